"""Executors play a batch's planned runs, behind one interface, and hand each record to a sink as
soon as its run ends (nothing is kept: memory stays flat however long the batch).

- `threads`: long-lived worker threads, a watchdog for agents that overstay; for sync agents. A
  built-in scripted agent's batch is played in the calling thread, or from `threads.FORK_AT` runs
  by children forked one per core (`forks`), while this process claims and writes.
- `async`: one event loop, up to thousands of runs in flight; for async and `openai:` agents. A
  model agent's batch with many runs in flight gets one event loop per core in child processes
  (`procs`; `aio.auto_processes` decides).
- `ray`: runs in Ray worker processes, on a local Ray started on demand or an existing cluster;
  records flow back to the one process that writes the store. Ray is an optional extra
  (`assay[ray]`): only this executor imports it, and without it `make_executor` refuses in one line.

What crosses a process boundary (`procs`, `ray`) has one shape and one settle path: `wire`.

Every planned run yields exactly one record, whatever the agent does.
"""

from __future__ import annotations

from typing import Any

from assay.errors import Invalid
from assay.run.executors.base import RAY_MISSING, Executor, Sink, Task

__all__ = ["EXECUTORS", "MAX_WORKERS", "Executor", "Sink", "Task", "default_executor", "make_executor"]

EXECUTORS = ("threads", "async", "ray")
MAX_WORKERS = 4096


def default_executor(agent_factory: Any) -> str:
    """`async` for agents that answer with awaitables (and `openai:`), `threads` otherwise."""
    return "async" if getattr(agent_factory, "is_async", False) else "threads"




def require_ray() -> None:
    """Refuse the ray executor in one line, before anything is planned or stored, where Ray cannot
    be imported (`assay[ray]` is an optional extra)."""
    try:
        import ray  # noqa: F401 - only whether it imports
    except ImportError:
        raise Invalid(RAY_MISSING, "executor", value="ray") from None


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
        from assay.run.executors.aio import AsyncExecutor, auto_processes

        processes = auto_processes(workers, agent_factory)
        if processes > 1:
            from assay.run.executors.procs import ProcessAsyncExecutor

            return ProcessAsyncExecutor(workers, processes)
        return AsyncExecutor(workers)
    if name == "ray":
        require_ray()
        from assay.run.executors.ray import RayExecutor

        return RayExecutor(workers, address=ray_address)
    raise Invalid(f"unknown executor '{name}' (known: {', '.join(EXECUTORS)})", "executor")
