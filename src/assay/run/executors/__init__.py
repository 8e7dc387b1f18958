"""Executors play a batch's planned runs, behind one interface, and hand each record to a sink as
soon as its run ends (nothing is kept: memory stays flat however long the batch).

- `threads`: long-lived worker threads, a watchdog for agents that overstay; for sync agents.
- `async`: one event loop, up to thousands of runs in flight; for async and `openai:` agents.
- `ray`: runs in Ray worker processes, on a local Ray started on demand or an existing cluster;
  records flow back to the one process that writes the store.

Every planned run yields exactly one record, whatever the agent does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from assay.errors import Invalid
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits
from assay.scenario.load import LoadedScenario
from assay.worlds.kits import get_kit

EXECUTORS = ("threads", "async", "ray")
MAX_WORKERS = 4096

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


def default_executor(agent_factory: Any) -> str:
    """`async` for agents that answer with awaitables (and `openai:`), `threads` otherwise."""
    return "async" if getattr(agent_factory, "is_async", False) else "threads"


def make_executor(name: str | None, workers: int, agent_factory: Any = None, *,
                  ray_address: str | None = None) -> Executor:
    name = name or default_executor(agent_factory)
    if not 1 <= workers <= MAX_WORKERS:
        raise Invalid(f"must be between 1 and {MAX_WORKERS}", "workers")
    if ray_address is not None and name != "ray":
        raise Invalid("only the ray executor takes a Ray address", "ray_address")
    if name == "threads":
        from assay.run.executors.threads import ThreadExecutor

        return ThreadExecutor(workers)
    if name == "async":
        from assay.run.executors.aio import AsyncExecutor

        return AsyncExecutor(workers)
    if name == "ray":
        from assay.run.executors.ray import RayExecutor

        return RayExecutor(workers, address=ray_address)
    raise Invalid(f"unknown executor '{name}' (known: {', '.join(EXECUTORS)})", "executor")


def rebuild_scenario(document: Any, planned_hash: str, case_id: str, who: str) -> LoadedScenario | str:
    """A planned scenario rebuilt from its document in another process (`who`: "the Ray worker",
    "the worker process"), or why it cannot be played there: it would not parse, or this process's
    kit code builds another world from it (another content hash)."""
    from assay.scenario.load import parse_scenario

    try:
        loaded = parse_scenario(document, f"scenario {case_id}", get_kit)
    except Exception as exc:  # noqa: BLE001 - a BadInput, or a kit fault
        return f"{who} could not rebuild scenario {case_id}: {type(exc).__name__}: {exc}"
    if loaded.content_hash != planned_hash:
        return (f"{who} rebuilt scenario {case_id} with content hash {loaded.content_hash[:12]}, "
                f"not the planned {planned_hash[:12]} (does it run other Assay code?)")
    return loaded
