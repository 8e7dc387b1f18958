"""Agents for submission tests: a good agent that misbehaves on exactly one run of a batch.

Load them as `python:tests/board/agents/flaky.py:NAME`. Each is a class, so the harness makes one
instance per run; a class-level counter picks the first run of the process to misbehave (a
sandboxed agent's process: submit with one worker, so one process plays the whole batch), and
every other run is played by the scripted `diligent` reference agent (which passes every forge
case). Which scenario gets the bad run depends on scheduling; that exactly one does, does not.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from assay.agents.reference import Diligent


class _OneBadRun:
    _counter = itertools.count()
    _lock = threading.Lock()

    def __init__(self) -> None:
        with self._lock:
            self.bad = next(type(self)._counter) == 0
        self.inner = Diligent()

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if self.bad:
            return self.misbehave(messages, tools)
        return self.inner(messages, tools)

    def misbehave(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError


class CrashOnce(_OneBadRun):
    """One run raises (status `crashed`); the rest pass."""

    _counter = itertools.count()

    def misbehave(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        raise RuntimeError("the agent fell over")


class IdleOnce(_OneBadRun):
    """One run finishes at once, doing nothing (1 player message, 0 actions); the rest pass."""

    _counter = itertools.count()

    def misbehave(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        args = {"claimed_success": False, "summary": "nothing to do"}
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "finish", "arguments": json.dumps(args)}}]}
