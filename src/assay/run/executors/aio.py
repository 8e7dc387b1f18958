"""The asyncio executor: one event loop, `workers` runs in flight, one shared client per endpoint.

Each of `workers` coroutines takes the next planned run, plays it with the async driver and hands
its record to the sink; an async agent that overstays is cancelled under its time budget, never
abandoned. Sync agents are called inline on the loop, so scripted agents keep their speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from assay.run.drivers import play_async
from assay.run.engine import Limits, error_record, open_episode
from assay.run.executors import Sink, Task


class AsyncExecutor:
    name = "async"

    def __init__(self, workers: int = 100) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        asyncio.run(self.play(tasks, agent_factory, limits, sink))

    async def play(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        """Play `tasks` on the running loop (for callers that already have one)."""
        size_pool = getattr(agent_factory, "size_pool", None)
        if size_pool is not None:
            size_pool(self.workers)
        todo = iter(tasks)

        async def worker() -> None:
            for task in todo:  # one loop, one thread: taking the next task never races
                steps = 0
                try:
                    episode = open_episode(task.loaded, task.planned, limits)
                    record = await play_async(episode, agent_factory)
                    steps = episode.steps
                except Exception as exc:  # noqa: BLE001 - never lose a planned run
                    record = error_record(task.planned, f"harness fault: {type(exc).__name__}: {exc}", task.loaded)
                sink(record, steps)

        try:
            await asyncio.gather(*(worker() for _ in range(self.workers)))
        finally:
            aclose = getattr(agent_factory, "aclose", None)
            if aclose is not None:
                await aclose()
