"""`assay run`: plan a batch, execute it, score it, append it — and read the results back."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from assay import HARNESS_VERSION
from assay.agents.loader import AgentFactory
from assay.errors import BadInput, Invalid
from assay.run.engine import Limits
from assay.run.executors import Executor, Task, make_executor
from assay.records import CheckOutcome, PlannedRun, RunRecord, RunVerdict
from assay.scenario.load import LoadedScenario
from assay.score.oracle import evaluate_checks, run_verdict
from assay.service.suites import SuiteBundle, record_scenarios, resolve_suite
from assay.store.db import Store, open_store

#: A batch of finished runs goes to the store when it holds this many, or is this old. Each write
#: is a transaction (and, on SQLite, waits for the write lock among threads that hold the GIL), so
#: a scripted batch writes in large blocks; a kill still costs only what was not yet written.
FLUSH_RUNS = 256
FLUSH_SECONDS = 0.5
#: How often a hand-over to a full queue looks whether the writer stopped, in seconds.
HAND_OVER_POLL = 0.1


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


Scored = tuple[RunRecord, list[CheckOutcome], RunVerdict]


def scored(record: RunRecord, outcomes: list[CheckOutcome]) -> Scored:
    """A finished run with its check outcomes and the oracle's verdict on them, as the store records it."""
    return record, outcomes, run_verdict(outcomes, record.status, record.claimed_success)


def _append(store: Store, items: list[Scored]) -> None:
    """Append runs; a run the database cannot take is kept as an `error` run, never dropped.

    A run already recorded (another process played the slot after taking this one for dead) is
    left as it was stored: a slot is recorded once, by whoever recorded it first."""
    try:
        store.add_runs(items)
        return
    except BadInput:
        pass
    taken = store.recorded([item[0].run_id for item in items])
    items = [item for item in items if item[0].run_id not in taken]
    try:
        store.add_runs(items)
        return
    except BadInput:
        pass
    for record, outcomes, verdict in items:
        try:
            store.add_runs([(record, outcomes, verdict)])
        except BadInput as exc:
            kept = record.model_copy(update={
                "status": "error", "reason": f"run could not be stored: {exc.message}"[:500],
                "transcript": [], "actions": [], "claimed_success": None, "claim_summary": None})
            store.add_runs([scored(kept, outcomes)])  # an `error` run: its verdict is the rule's again


class RunWriter:
    """Scores each finished run (telling `on_done(record, passed)`, from its thread) and streams it
    to the store from a thread of its own, in bounded batches (by count and by age). The executor
    hands a record over and goes on at once, so a store write never stalls the runs in flight; the hand-over queue is bounded, so a batch of any
    size holds at most about a thousand finished runs in memory, and a store that falls behind slows
    the executor down rather than filling memory. A store fault ends the writer at once (transient
    ones were already retried by the store, `store/faults.py`) and is raised in the executor's
    thread at the next hand-over (or at `close`), never swallowed: nothing ever waits on a writer
    that has stopped."""

    def __init__(self, store: Store, scenarios: Iterable[LoadedScenario],
                 on_done: Callable[[RunRecord, bool], None] | None = None) -> None:
        self.store = store
        self.checks = {s.content_hash: s.scenario.checks for s in scenarios}
        self.on_done = on_done
        self.steps = 0
        self.written = 0
        self._queue: queue.Queue[RunRecord | None] = queue.Queue(maxsize=FLUSH_RUNS * 4)
        self._fault: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="assay-writer", daemon=True)
        self._thread.start()

    def __call__(self, record: RunRecord, steps: int) -> None:
        self._raise_fault()
        self.steps += steps
        self._hand_over(record)

    def close(self) -> None:
        """Write what is left, and wait for it (not for a writer that has stopped)."""
        if self._thread.is_alive():
            try:
                self._hand_over(None)
            finally:
                self._thread.join()
        self._raise_fault()

    def _raise_fault(self) -> None:
        if self._fault is not None:
            raise self._fault

    def _hand_over(self, item: RunRecord | None) -> None:
        """Queue `item`; while the queue is full, keep checking that the writer still drains it
        (a writer that stopped on a fault will never make room: its fault is raised instead)."""
        while True:
            try:
                self._queue.put(item, timeout=HAND_OVER_POLL)
                return
            except queue.Full:
                self._raise_fault()
                if not self._thread.is_alive():  # pragma: no cover - it only stops on None or a fault
                    raise RuntimeError("the run writer stopped") from None

    def _drain(self) -> None:
        buffer: list[Scored] = []
        since = time.monotonic()
        try:
            while True:
                try:
                    record = self._queue.get(timeout=max(0.01, FLUSH_SECONDS - (time.monotonic() - since)))
                except queue.Empty:
                    record = False  # type: ignore[assignment]
                if record:
                    item = scored(record, evaluate_checks(self.checks[record.scenario_hash], record.final_state))
                    buffer.append(item)
                    if self.on_done is not None:
                        self.on_done(record, item[2].passed)
                if buffer and (record is None or len(buffer) >= FLUSH_RUNS or time.monotonic() - since >= FLUSH_SECONDS):
                    _append(self.store, buffer)
                    self.written += len(buffer)
                    buffer = []
                if record is None or len(buffer) == 0:
                    since = time.monotonic()
                if record is None:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the executor's thread
            self._fault = exc  # and stop: `_hand_over` sees it, and waits on nothing


def execute_tasks(
    store: Store, scenarios: dict[str, LoadedScenario], factory: AgentFactory, tasks: Iterable[Task],
    limits: Limits, executor: Executor, on_done: Callable[[RunRecord, bool], None] | None = None,
    budget: Any = None,
) -> int:
    """Play, score and append every task's run as it ends; returns the number of agent steps taken.
    A `budget` (`service.usage.Budget`) counts each run's cost as it is handed over."""
    writer = RunWriter(store, scenarios.values(), on_done)
    try:
        executor.execute(tasks, factory, limits, writer if budget is None else budget.wrap(writer))
    finally:
        writer.close()
    return writer.steps


def create_run_batch(store: Store, bundle: SuiteBundle, factory: AgentFactory, *, trials: int, seed: int,
                     label: str | None, limits: Limits) -> tuple[str, list[PlannedRun]]:
    """Store an `assay run` batch: its scenarios, its plan and its agent, in one go."""
    from assay.service.batches import agent_row

    record_scenarios(store, bundle.scenarios)
    planned = plan_batch(bundle, trials, seed)
    batch_id = uuid.uuid4().hex
    store.add_batch(
        {"id": batch_id, "kind": "run", "suite_key": bundle.key, "suite_version": bundle.version,
         "agent_spec": factory.spec, "agent_label": label or factory.default_label,
         "config_signature": factory.config_signature, "harness_version": HARNESS_VERSION,
         "trials": trials, "base_seed": seed},
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
    """Create a run batch, execute it, complete it (`service/batches.py`).

    `on_created(batch_id, n_planned)` is called once the batch is stored, before its first run."""
    from assay.service.batches import complete, execute_pending

    if trials < 1:
        raise Invalid("must be at least 1", "trials")
    bundle = resolve_suite(suite) if isinstance(suite, str) else suite
    if factory is None:
        if agent_spec is None:
            raise Invalid("an agent spec is required", "agent")
        from assay.agents.loader import load_agent

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
