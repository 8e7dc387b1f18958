"""An agent whose trials of a case disagree: for the tests that compare the results JSON with the
board (issue 8, item 5).

Load it as `python:tests/board/agents/wavering.py:Wavering`. The harness makes one instance per
run; a class-level counter deals each new run the next of three ways to play it: `diligent`
(passes), `overclaimer` (claims a success it did not earn: a false success), `idle` (finishes at
once claiming nothing; one player message, so a participation floor of 2 gates it). Which run gets
which depends on scheduling; that a batch holds passes, failures and false successes, and cases
whose trials disagree, does not (any three runs in a row are played all three ways).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from assay.agents.reference import Diligent, Idle, Overclaimer


class Wavering:
    _counter = itertools.count()
    _lock = threading.Lock()

    def __init__(self) -> None:
        with self._lock:
            n = next(type(self)._counter)
        self.inner: Any = (Diligent, Overclaimer, Idle)[n % 3]()

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return self.inner(messages, tools)
