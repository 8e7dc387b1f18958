"""The asyncio executor: one event loop, `workers` runs in flight, one shared client per endpoint.

A model agent's batch with many runs in flight is spread over one event loop per core, in child
processes (`procs.py`, which `make_executor` picks by `auto_processes`), because one loop's core
is what limits it; everything else runs here.

Each of `workers` coroutines takes the next planned run, plays it with the async driver and hands
its record to the sink; an async agent that overstays is cancelled under its time budget, never
abandoned. Sync agents are called inline on the loop, so scripted agents keep their speed. A world
whose steps block (a campaign worded by a model facilitator: a sync HTTP call per line) is opened
and stepped on a thread pool as wide as the runs in flight, so its runs' model calls overlap as
the agents' do, and the loop never waits on one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from assay.run.drivers import play_async
from assay.run.engine import Limits, error_record, open_episode
from assay.run.executors.base import Sink, Task

#: Runs in flight per event loop before a model agent's batch is spread over more processes.
RUNS_PER_LOOP = 50

_T = TypeVar("_T")


def auto_processes(workers: int, agent_factory: Any, cpus: int | None = None) -> int:
    """Event loops for a batch: one per `RUNS_PER_LOOP` runs in flight, at most one per core, and
    only for agents behind a model endpoint (their runs cost CPU per request; a scripted agent's
    batch is faster in one process than the start-up of another) whose key a child inherits, and
    only when this process's main module is safe to import again (`_main_is_ours`)."""
    endpoint = getattr(agent_factory, "endpoint", None)
    if endpoint is None:
        return 1
    key = getattr(endpoint, "_key", None)
    if key not in (os.environ.get("OPENAI_API_KEY"), "unset"):
        return 1  # a key given in code, not in the environment a child process inherits
    if not _main_is_ours():
        return 1
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(cpus, workers // RUNS_PER_LOOP))


@contextlib.contextmanager
def lenient_gc() -> Iterator[None]:
    """Collect garbage less eagerly while a batch plays.

    A thousand runs in flight keep hundreds of thousands of live objects (worlds, transcripts,
    connections), and the cyclic collector's default thresholds walk them over and over: measured
    at --workers 1000, a third of the loop's CPU per run. What exists when the batch starts (the
    scenarios, the modules) is frozen out of the collector's sight, and a collection waits for
    50,000 allocations rather than 700; both are restored afterwards. Nothing here relies on
    cycles being collected promptly.
    """
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _main_is_ours() -> bool:
    """Whether a spawned child may import this process's main module: a spawned interpreter runs
    the parent's main script again (as `__mp_main__`), which is harmless for the `assay` console
    script and `python -m assay...` but would replay a user's unguarded script. Elsewhere the batch
    stays on one loop unless `processes` is asked for explicitly."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if path is None:
        return True  # python -c, a REPL: nothing to re-import
    main = Path(path).resolve()
    return main.name == "assay" or Path(__file__).resolve().parents[2] in main.parents


class AsyncExecutor:
    name = "async"

    def __init__(self, workers: int = 100) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        with lenient_gc():
            asyncio.run(self.play(tasks, agent_factory, limits, sink))

    async def play(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        """Play `tasks` on the running loop (for callers that already have one)."""
        size_pool = getattr(agent_factory, "size_pool", None)
        if size_pool is not None:
            size_pool(self.workers)
        todo = iter(tasks)
        loop = asyncio.get_running_loop()
        # for worlds that block (`drivers.blocks`): one thread per run in flight at most, started
        # only when such a world first steps (a pool starts its threads as work needs them)
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="assay-world")

        async def offload(call: Callable[[], _T]) -> _T:
            return await loop.run_in_executor(pool, call)

        async def worker() -> None:
            for task in todo:  # one loop, one thread: taking the next task never races
                steps = 0
                try:
                    episode = open_episode(task.loaded, task.planned, limits)
                    record = await play_async(episode, agent_factory, offload)
                    steps = episode.steps
                except Exception as exc:  # noqa: BLE001 - never lose a planned run
                    record = error_record(task.planned, f"harness fault: {type(exc).__name__}: {exc}", task.loaded)
                sink(record, steps)

        try:
            await asyncio.gather(*(worker() for _ in range(self.workers)))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # every run has ended, or the batch was stopped
            aclose = getattr(agent_factory, "aclose", None)
            if aclose is not None:
                await aclose()
