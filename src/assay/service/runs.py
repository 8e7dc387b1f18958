"""`assay run`: plan a batch, execute it, score it, append it — and read the results back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from assay import HARNESS_VERSION
from assay.agents.loader import AgentFactory
from assay.errors import BadInput
from assay.run.episode import Limits
from assay.run.executor import Executor, LocalExecutor, Task
from assay.records import CheckOutcome, PlannedRun, RunRecord
from assay.score.oracle import evaluate_checks
from assay.service.suites import SuiteBundle, record_scenarios, resolve_suite
from assay.store.db import Store, open_store

FLUSH_EVERY = 64


@dataclass(frozen=True)
class BatchResult:
    batch_id: str
    n_runs: int
    n_steps: int
    seconds: float
    store_url: str


def plan_batch(bundle: SuiteBundle, trials: int, seed: int) -> list[PlannedRun]:
    """Every case × every trial, in a fixed order. Trials of a case share the world; the run seed
    is the same for all runs of an `assay run` batch and in-run chance derives from (seed, case, trial)."""
    planned = []
    for case in bundle.scenarios:
        for trial in range(1, trials + 1):
            planned.append(PlannedRun(uuid.uuid4().hex, len(planned), case.id, case.content_hash, trial, seed))
    return planned


def _append(store: Store, items: list[tuple[RunRecord, list[CheckOutcome]]]) -> None:
    """Append runs; a run the database cannot take is kept as an `error` run, never dropped."""
    try:
        store.add_runs(items)
        return
    except BadInput:
        pass
    for record, outcomes in items:
        try:
            store.add_runs([(record, outcomes)])
        except BadInput as exc:
            kept = replace(record, status="error", reason=f"run could not be stored: {exc.message}"[:500],
                           transcript=[], actions=[], claimed_success=None, claim_summary=None)
            store.add_runs([(kept, outcomes)])


def execute_batch(
    store: Store, bundle: SuiteBundle, factory: AgentFactory, planned: list[PlannedRun], limits: Limits,
    executor: Executor, on_done: Callable[[RunRecord], None] | None = None,
) -> int:
    """Run, score and append every planned run; returns the number of agent steps taken."""
    by_id = {s.id: s for s in bundle.scenarios}
    buffer: list[tuple[RunRecord, list[CheckOutcome]]] = []
    steps = 0

    def done(record: RunRecord, n_steps: int) -> None:
        nonlocal steps
        steps += n_steps
        outcomes = evaluate_checks(by_id[record.case_id].scenario.checks, record.final_state)
        buffer.append((record, outcomes))
        if len(buffer) >= FLUSH_EVERY:
            _append(store, buffer)
            buffer.clear()
        if on_done is not None:
            on_done(record)

    tasks = [Task(by_id[p.case_id], p) for p in planned]
    try:
        executor.execute(tasks, factory, limits, on_done=done)
    finally:
        if buffer:
            _append(store, buffer)
    return steps


def run_suite(
    suite: str | SuiteBundle, *, agent_spec: str | None = None, factory: AgentFactory | None = None,
    trials: int = 3, workers: int = 1, db_url: str | None = None, seed: int = 0, label: str | None = None,
    limits: Limits | None = None, progress: bool | Callable[[RunRecord], None] = False,
    store: Store | None = None, agent_options: dict[str, Any] | None = None,
) -> BatchResult:
    if trials < 1:
        raise BadInput("must be at least 1", "--trials")
    if workers < 1:
        raise BadInput("must be at least 1", "--workers")
    bundle = resolve_suite(suite) if isinstance(suite, str) else suite
    if factory is None:
        if agent_spec is None:
            raise BadInput("an agent spec is required", "--agent")
        from assay.agents.loader import load_agent

        factory = load_agent(agent_spec, **(agent_options or {}))
    store = store or open_store(db_url)
    record_scenarios(store, bundle.scenarios)
    planned = plan_batch(bundle, trials, seed)
    batch_id = uuid.uuid4().hex
    store.add_batch(
        {"id": batch_id, "kind": "run", "suite_key": bundle.key, "suite_version": bundle.version,
         "agent_spec": factory.spec, "agent_label": label or factory.default_label,
         "config_signature": factory.config_signature, "harness_version": HARNESS_VERSION,
         "trials": trials, "base_seed": seed},
        planned,
    )
    on_done = progress if callable(progress) else None
    start = time.perf_counter()
    steps = execute_batch(store, bundle, factory, planned, limits or Limits(), LocalExecutor(workers), on_done)
    return BatchResult(batch_id, len(planned), steps, time.perf_counter() - start, store.url)
