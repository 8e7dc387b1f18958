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
from assay.run.record import PlannedRun, RunRecord
from assay.spec.load import LoadedScenario

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
    from assay.spec.hashing import canonical_hash

    try:
        state = fork_world(task.loaded, task.planned.seed, task.planned.trial).state()
    except Exception:  # noqa: BLE001
        state = {}
    p = task.planned
    return RunRecord(run_id=p.run_id, case_id=p.case_id, scenario_hash=p.scenario_hash, trial=p.trial, seed=p.seed,
                     status="error", reason=reason[:500], claimed_success=None, claim_summary=None, turns=0,
                     final_state=state, final_state_hash=canonical_hash(state))


class LocalExecutor:
    """Up to `workers` episodes at once, each in its own daemon thread, watched for deadlines."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers

    def execute(self, tasks: Sequence[Task], agent_factory: Any, limits: Limits,
                on_done: Callable[[RunRecord, int], None] | None = None) -> list[RunRecord]:
        results: list[RunRecord | None] = [None] * len(tasks)
        finished: queue.SimpleQueue[tuple[int, RunRecord]] = queue.SimpleQueue()
        active: dict[int, tuple[Episode, float]] = {}
        pending = iter(range(len(tasks)))
        exhausted = False

        def work(i: int, episode: Episode) -> None:
            try:
                record = episode.run()
            except BaseException as exc:  # noqa: BLE001 - never lose a planned run
                record = _error_record(tasks[i], f"harness fault: {type(exc).__name__}: {exc}")
            finished.put((i, record))

        def settle(i: int, record: RunRecord) -> None:
            if results[i] is not None:
                return
            results[i] = record
            episode = active.pop(i, (None, 0.0))[0]
            if on_done is not None:
                on_done(record, episode.steps if episode is not None else 0)

        while True:
            while not exhausted and len(active) < self.workers:
                i = next(pending, None)
                if i is None:
                    exhausted = True
                    break
                try:
                    episode = Episode(tasks[i].loaded, agent_factory, tasks[i].planned, limits)
                except Exception as exc:  # noqa: BLE001
                    settle(i, _error_record(tasks[i], f"harness fault: {type(exc).__name__}: {exc}"))
                    continue
                active[i] = (episode, time.monotonic() + limits.time_limit + GRACE_S)
                threading.Thread(target=work, args=(i, episode), daemon=True, name=f"assay-run-{i}").start()
            if not active:
                if exhausted:
                    break
                continue
            next_deadline = min(d for _, d in active.values())
            try:
                i, record = finished.get(timeout=max(0.0, next_deadline - time.monotonic()))
                settle(i, record)
            except queue.Empty:
                now = time.monotonic()
                for i, (episode, deadline) in list(active.items()):
                    if deadline <= now:
                        settle(i, episode.snapshot_timeout())
        return [r for r in results if r is not None]
