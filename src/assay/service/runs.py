"""`assay run`: plan a batch, store it, execute it (`service/execution.py`), complete it
(`service/completion.py`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay import HARNESS_VERSION
from assay.agents.loader import AgentFactory, load_agent
from assay.errors import Invalid
from assay.run.engine import Limits
from assay.run.executors import Executor, make_executor
from assay.records import PlannedRun, RunRecord
from assay.service.completion import complete
from assay.service.execution import agent_row, execute_pending
from assay.service.suites import SuiteBundle, record_scenarios, resolve_suite
from assay.store.db import Store, open_store
from assay.store.rows import NewBatch
from assay.store.runs_repo import RunsRepo


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
    planned: list[PlannedRun] = []
    for case in bundle.scenarios:
        for trial in range(1, trials + 1):
            planned.append(PlannedRun(uuid.uuid4().hex, len(planned), case.id, case.content_hash, trial, seed))
    return planned


def create_run_batch(store: Store, bundle: SuiteBundle, factory: AgentFactory, *, trials: int, seed: int,
                     label: str | None, limits: Limits) -> tuple[str, list[PlannedRun]]:
    """Store an `assay run` batch: its scenarios, its plan and its agent, in one go."""
    record_scenarios(store, bundle.scenarios)
    planned = plan_batch(bundle, trials, seed)
    batch_id = uuid.uuid4().hex
    RunsRepo(store).add_batch(
        NewBatch(id=batch_id, kind="run", suite_key=bundle.key, suite_version=bundle.version,
                 agent_spec=factory.spec, agent_label=label or factory.default_label,
                 config_signature=factory.config_signature, harness_version=HARNESS_VERSION,
                 trials=trials, base_seed=seed),
        planned, agent_row(factory, limits),
    )
    return batch_id, planned


def run_suite(
    suite: str | SuiteBundle, *, agent_spec: str | None = None, factory: AgentFactory | None = None,
    trials: int = 3, workers: int = 1, db_url: str | None = None, seed: int = 0, label: str | None = None,
    limits: Limits | None = None, progress: bool | Callable[[RunRecord, bool], None] = False,
    store: Store | None = None, agent_options: dict[str, Any] | None = None,
    executor: str | Executor | None = None, ray_address: str | None = None,
    on_created: Callable[[str, int], None] | None = None, max_cost: float | None = None,
    on_budget: Callable[[Any], None] | None = None,
) -> BatchResult:
    """Create a run batch, execute it, complete it.

    `on_created(batch_id, n_planned)` is called once the batch is stored, before its first run."""
    if trials < 1:
        raise Invalid("must be at least 1", "trials")
    bundle = resolve_suite(suite) if isinstance(suite, str) else suite
    if factory is None:
        if agent_spec is None:
            raise Invalid("an agent spec is required", "agent")
        factory = load_agent(agent_spec, **(agent_options or {}))
    from assay.agents.reference import check_fits

    check_fits(factory.spec, {s.scenario.kit for s in bundle.scenarios})
    if not isinstance(executor, str | None):
        chosen = executor
    else:
        chosen = make_executor(executor, workers, factory, ray_address=ray_address)
    store = store or open_store(db_url)
    limits = limits or Limits()
    batch_id, planned = create_run_batch(store, bundle, factory, trials=trials, seed=seed, label=label,
                                         limits=limits)
    if on_created is not None:
        on_created(batch_id, len(planned))
    on_done = progress if callable(progress) else None
    start = time.perf_counter()
    scenarios = {s.content_hash: s for s in bundle.scenarios}
    from assay.service.usage import Budget

    budget = None if max_cost is None else Budget(store, batch_id, max_cost)
    if on_budget is not None and budget is not None:
        on_budget(budget)
    steps = execute_pending(store, batch_id, factory, chosen, limits, scenarios, on_done, budget=budget)
    complete(store, batch_id)
    return BatchResult(batch_id, len(planned), steps, time.perf_counter() - start, store.url)
