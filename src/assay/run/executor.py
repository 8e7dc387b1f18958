"""Executors run planned episodes. The local one uses threads on this machine; a distributed one
(Ray) plugs in behind the same interface later.

Every planned run yields exactly one RunRecord, whatever the agent does: an agent that hangs past
its time limit is abandoned (its daemon thread can no longer touch the record) and recorded as a
timeout; a fault in the harness itself is recorded as `error`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from assay.run.episode import Episode, Limits
from assay.records import PlannedRun, RunRecord
from assay.scenario.load import LoadedScenario

GRACE_S = 0.5


@dataclass(frozen=True)
class Task:
    loaded: LoadedScenario
    planned: PlannedRun


class Executor(Protocol):
    def execute(self, tasks: Sequence[Task], agent_factory: Any, limits: Limits,
                on_done: Callable[[RunRecord, int], None] | None = None) -> list[RunRecord]:
        """Run every task; return one record per task, in task order. `on_done(record, steps)`."""


def _error_record(task: Task, reason: str) -> RunRecord:
    from assay.run.episode import fork_world
    from assay.canonical import canonical_hash

    try:
        state = fork_world(task.loaded, task.planned.seed, task.planned.trial).state()
    except Exception:  # noqa: BLE001
        state = {}
    p = task.planned
    return RunRecord(run_id=p.run_id, case_id=p.case_id, scenario_hash=p.scenario_hash, trial=p.trial, seed=p.seed,
                     status="error", reason=reason[:500], claimed_success=None, claim_summary=None, turns=0,
                     final_state=state, final_state_hash=canonical_hash(state))


class LocalExecutor:
    """Up to `workers` episodes at once on long-lived daemon threads, watched for deadlines.

    A worker whose agent overstays its time limit is abandoned (its episode is ended as a
    timeout by the watchdog, so nothing it does later reaches the record) and replaced.
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers

    def execute(self, tasks: Sequence[Task], agent_factory: Any, limits: Limits,
                on_done: Callable[[RunRecord, int], None] | None = None) -> list[RunRecord]:
        results: list[RunRecord | None] = [None] * len(tasks)
        todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        finished: queue.SimpleQueue[tuple[int, RunRecord, int]] = queue.SimpleQueue()
        active: dict[int, tuple[Episode, float]] = {}
        guard = threading.Lock()
        for i in range(len(tasks)):
            todo.put(i)

        def worker() -> None:
            while True:
                i = todo.get()
                if i is None:
                    return
                episode: Episode | None = None
                try:
                    episode = Episode(tasks[i].loaded, agent_factory, tasks[i].planned, limits)
                    with guard:
                        active[i] = (episode, time.monotonic() + limits.time_limit + GRACE_S)
                    record = episode.run()
                except BaseException as exc:  # noqa: BLE001 - never lose a planned run
                    record = _error_record(tasks[i], f"harness fault: {type(exc).__name__}: {exc}")
                with guard:
                    abandoned = i not in active and episode is not None
                    active.pop(i, None)
                finished.put((i, record, episode.steps if episode is not None else 0))
                if abandoned:
                    return  # the watchdog replaced this thread; its result was already settled

        def spawn() -> None:
            threading.Thread(target=worker, daemon=True, name="assay-worker").start()

        n_threads = min(self.workers, len(tasks))
        for _ in range(n_threads):
            spawn()
        remaining = len(tasks)
        while remaining:
            with guard:
                deadlines = [d for _, d in active.values()]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 0.05
            try:
                i, record, steps = finished.get(timeout=timeout)
            except queue.Empty:
                now = time.monotonic()
                with guard:
                    overdue = [(i, ep) for i, (ep, d) in active.items() if d <= now]
                    for i, _ in overdue:
                        del active[i]
                for i, ep in overdue:
                    finished.put((i, ep.snapshot_timeout(), ep.steps))
                    spawn()
                continue
            if results[i] is not None:
                continue  # a late answer from an abandoned worker
            results[i] = record
            remaining -= 1
            if on_done is not None:
                on_done(record, steps)
        for _ in range(n_threads + len(tasks)):
            todo.put(None)
        return [r for r in results if r is not None]
