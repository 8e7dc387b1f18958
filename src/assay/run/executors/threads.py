"""The threads executor: up to `workers` runs at once on long-lived threads, for sync agents.

A sync agent cannot be interrupted, so a watchdog in the calling thread ends a run whose agent
overstays its budget (the episode is failed as a timeout, and whatever the agent answers later is
ignored by the engine); its thread is replaced so the batch keeps its width, and returns to the
pool, or ends, once the agent lets go. Records reach the sink in the calling thread. A built-in
scripted agent (`reference:NAME`) is never played on threads: it never waits, so threads would
only contend for the interpreter lock (unless its world waits: a campaign worded by a model
facilitator keeps the threads). A small batch of it is played in the calling thread itself; a
large one (`FORK_AT` runs or more) by forked processes, one per core up to `workers`
(`forks.ForkedScripted`), while this process claims and writes. The agent's
worker processes, when it has them (a sandboxed `python:` agent), are stopped when the batch ends.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from assay.run.drivers import play_sync
from assay.run.engine import Episode, Limits, error_record, open_episode
from assay.run.executors import forks
from assay.run.executors.base import Sink, Task

#: Seconds past a run's budget before the watchdog steps in (the driver notices first when it can).
GRACE_S = 0.5
#: Tasks queued beyond the workers (tasks are small; finished records are what must not pile up).
WINDOW = 1024
#: A scripted batch with at least this many runs to play is played by forked processes, one per
#: core (at most `workers`): `forks.ForkedScripted`. A smaller one is over before they would pay.
FORK_AT = 200


class ThreadExecutor:
    name = "threads"

    def __init__(self, workers: int = 4) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        if scripted(agent_factory):
            source = iter(tasks)
            head = list(itertools.islice(source, FORK_AT))
            tasks = itertools.chain(head, source)
            # a world that waits (a campaign worded by a model facilitator) keeps its threads
            if not head or not head[0].loaded.world_options:
                processes = min(self.workers, forks.usable_cpus()) if forks.available() else 1
                if processes > 1 and len(head) >= FORK_AT:
                    return forks.ForkedScripted(processes).execute(tasks, agent_factory, limits, sink, self._inline)
                return self._inline(tasks, agent_factory, limits, sink)
        todo: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        finished: queue.SimpleQueue[tuple[int, Any, int]] = queue.SimpleQueue()
        active: dict[int, tuple[Episode, float]] = {}
        settled: set[int] = set()
        guard = threading.Lock()
        counter = iter(range(1 << 62))
        threads = 0

        def worker() -> None:
            while True:
                task = todo.get()
                if task is None:
                    return
                key = next(counter)
                episode: Episode | None = None
                try:
                    episode = open_episode(task.loaded, task.planned, limits)
                    with guard:
                        active[key] = (episode, time.monotonic() + limits.time_limit + GRACE_S)
                    record = play_sync(episode, agent_factory)
                except BaseException as exc:  # noqa: BLE001 - never lose a planned run
                    record = error_record(task.planned, f"harness fault: {type(exc).__name__}: {exc}", task.loaded)
                with guard:
                    abandoned = key not in active and episode is not None
                    active.pop(key, None)
                finished.put((key, record, episode.steps if episode is not None else 0))
                if abandoned:
                    return  # the watchdog replaced this thread; its run was already settled

        def spawn() -> None:
            nonlocal threads
            threads += 1
            threading.Thread(target=worker, daemon=True, name="assay-worker").start()

        for _ in range(self.workers):
            spawn()
        source = iter(tasks)
        exhausted = False
        outstanding = 0

        def feed() -> None:
            nonlocal exhausted, outstanding
            while not exhausted and outstanding < self.workers + WINDOW:  # a bounded window of tasks
                task = next(source, None)
                if task is None:
                    exhausted = True
                    return
                todo.put(task)
                outstanding += 1

        try:
            feed()
            while outstanding:
                with guard:
                    deadlines = [d for _, d in active.values()]
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.05
                try:
                    key, record, steps = finished.get(timeout=min(timeout, 0.25))
                except queue.Empty:
                    now = time.monotonic()
                    with guard:
                        overdue = [(k, ep) for k, (ep, d) in active.items() if d <= now]
                        for k, _ in overdue:
                            del active[k]
                    for k, ep in overdue:
                        finished.put((k, ep.timeout().record, ep.steps))
                        spawn()
                    feed()
                    continue
                if key in settled:
                    continue  # a late answer from an abandoned worker
                settled.add(key)
                outstanding -= 1
                sink(record, steps)
                feed()
        finally:
            for _ in range(threads):
                todo.put(None)
            close = getattr(agent_factory, "close", None)  # a sandboxed agent's workers
            if close is not None:
                close()

    @staticmethod
    def _inline(tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        """Play each run in the calling thread, one after another: a scripted agent answers at once
        and never waits, so worker threads would only take turns at the interpreter lock (and make
        the run writer wait for it). Its budget still holds: the driver reports each answer's time.
        An interrupt is not a run's fault: it stops the batch, and the run it cut is left unrecorded."""
        for task in tasks:
            episode: Episode | None = None
            try:
                episode = open_episode(task.loaded, task.planned, limits)
                record = play_sync(episode, agent_factory)
            except Exception as exc:  # noqa: BLE001 - never lose a planned run
                record = error_record(task.planned, f"harness fault: {type(exc).__name__}: {exc}", task.loaded)
            sink(record, episode.steps if episode is not None else 0)


def scripted(agent_factory: Any) -> bool:
    """Whether the agent is a built-in scripted baseline (`reference:NAME`): played in this
    process, answering at once without waiting on anything."""
    config = getattr(agent_factory, "config", None)
    return isinstance(config, dict) and config.get("kind") == "reference" and not getattr(agent_factory, "is_async", False)
