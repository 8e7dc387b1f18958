"""What every executor shares: a task, the sink a run's record goes to, and the protocol. Apart from
the package's `__init__` (which chooses an executor and imports the one chosen), so that the
executors import this and never the package that imports them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits
from assay.scenario.load import LoadedScenario

#: What `--executor ray` says where Ray is not installed (an extra since issue 28: most never leave one machine).
RAY_MISSING = "Ray is not installed here; install it with: pip install 'assay[ray]'"

#: Called with each finished run's record and the tool calls its agent made.
Sink = Callable[[RunRecord, int], None]


@dataclass(frozen=True)
class Task:
    loaded: LoadedScenario
    planned: PlannedRun


class Executor(Protocol):
    name: str

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        """Play every task; call `sink(record, steps)` once per task as its run ends (in the
        calling thread, in the order runs end)."""
