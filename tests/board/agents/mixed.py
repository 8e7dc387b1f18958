"""A mixed agent for board tests: diligent on some forge cases, idle on the others.

Load it as `python:tests/board/agents/mixed.py:Mixed`. The harness makes one instance per run;
the first call reads the briefing and picks a side for the whole run, so every trial of a case is
played the same way: case means 1, 0, 0, 1, 1 on forge (it idles on the storage ticket and on the
shared-platform ticket), a figure whose case means vary.
"""

from __future__ import annotations

from typing import Any

from assay.agents.reference import Diligent, Idle

IDLE_ON = ("Acme's storage", "shared platform")


class Mixed:
    def __init__(self) -> None:
        self.inner: Any = None

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if self.inner is None:
            text = " ".join(str(m.get("content") or "") for m in messages)
            self.inner = Idle() if any(word in text for word in IDLE_ON) else Diligent()
        return self.inner(messages, tools)
