"""Execution, the lowest layer of the service: play a batch's pending slots and write each run.

    steps = execute_pending(store, batch_id, factory, executor, ...)   # claim slots, play, write each run

A batch is only ever what its stored rows say, so any process can pick it up: `execute_pending`
claims the batch's pending slots a chunk at a time (`store/claims.py`: a slot is pending when no
run is recorded for it and nobody alive holds it), plays them on the executor, and hands each run
to the writer (`RunWriter`) as it ends. A process killed mid-batch leaves its recorded runs stored
and its claimed-but-unrecorded slots pending; `assay resume` runs this same function again, as many
times and in as many processes at once as wanted: every slot is recorded exactly once. Completing a
batch once every slot is recorded is the layer above (`service/completion.py`).

The agent is stored as the batch was planned for it (`agent_row`): the spec another process loads
(a python file's path made absolute) and the loader's options, never an API key (a resuming process
reads `OPENAI_API_KEY` from its own environment), plus the run limits. A resume may name the agent
again (`stored_agent`); it must be the same configuration (equal config signature), or the batch
would mix agents.

This module imports nothing of `service/` but the suites it is handed: everything above calls down.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypedDict

from assay.agents.loader import AgentFactory, load_agent
from assay.errors import BadInput, Conflict, Invalid, NotFound
from assay.jsontypes import JsonObject
from assay.records import CheckOutcome, PlannedRun, RunRecord, RunVerdict
from assay.run.engine import Limits
from assay.run.executors import Executor, Task
from assay.scenario.load import LoadedScenario, parse_scenario
from assay.score.oracle import evaluate_checks, run_verdict
from assay.store.releases_repo import ReleasesRepo
from assay.store.claims import ClaimRepo, Holder
from assay.store.faults import StoreUnavailable, describe, is_fault
from assay.store.judge_repo import JudgeRepo
from assay.store.repo import Store
from assay.worlds.kits import get_kit
from assay.store.rows import AgentRow
from assay.store.runs_repo import RunsRepo

#: A batch of finished runs goes to the store when it holds this many, or is this old. Each write
#: is a transaction (and, on SQLite, waits for the write lock among threads that hold the GIL), so
#: a scripted batch writes in large blocks; a kill still costs only what was not yet written.
FLUSH_RUNS = 256


FLUSH_SECONDS = 0.5


#: How often a hand-over to a full queue looks whether the writer stopped, in seconds.
HAND_OVER_POLL = 0.1


Scored = tuple[RunRecord, list[CheckOutcome], RunVerdict]


def scored(record: RunRecord, outcomes: list[CheckOutcome]) -> Scored:
    """A finished run with its check outcomes and the oracle's verdict on them, as the store records it."""
    return record, outcomes, run_verdict(outcomes, record.status, record.claimed_success)


def _append(store: Store, items: list[Scored]) -> None:
    """Append runs; a run the database cannot take is kept as an `error` run, never dropped.

    A run already recorded (another process played the slot after taking this one for dead) is
    left as it was stored: a slot is recorded once, by whoever recorded it first."""
    runs = RunsRepo(store)
    try:
        runs.add_runs(items)
        return
    except BadInput:
        pass
    taken = runs.recorded([item[0].run_id for item in items])
    items = [item for item in items if item[0].run_id not in taken]
    try:
        runs.add_runs(items)
        return
    except BadInput:
        pass
    for record, outcomes, verdict in items:
        try:
            runs.add_runs([(record, outcomes, verdict)])
        except BadInput as exc:
            kept = record.refused(f"run could not be stored: {exc.message}")
            runs.add_runs([scored(kept, outcomes)])  # an `error` run: its verdict is the rule's again


def record_in(store: Store, conn: Any, item: Scored) -> bool:
    """`_append` of one run inside the caller's write transaction `conn` (remote play records a run
    in the transaction of the step that ended it), each try in a savepoint: a run the database
    cannot take is kept as an `error` run, never dropped; a run already recorded is left as it was
    stored (False: nothing was recorded now)."""
    record, outcomes, _ = item
    try:
        with conn.begin_nested():
            RunsRepo(store).insert_runs(conn, [item])
        return True
    except BadInput as exc:
        refusal = exc.message
    if RunsRepo.recorded_in(conn, [record.run_id]):
        return False
    kept = record.refused(f"run could not be stored: {refusal}")
    with conn.begin_nested():
        RunsRepo(store).insert_runs(conn, [scored(kept, outcomes)])  # an `error` run: its verdict is the rule's again
    return True


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
                    outcomes = record.outcomes  # scored where it ended (another process), or here
                    item = scored(record, list(outcomes) if outcomes is not None else
                                  evaluate_checks(self.checks[record.scenario_hash], record.final_state))
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


#: Slots claimed at a time, at least (and twice the runs in flight when that is more). Claiming
#: ahead costs little if the process dies (its claims are free again once it is seen gone), and a
#: claim is a write transaction: a scripted batch plays hundreds of runs a second. Concurrent
#: resumes split a batch at this grain.
CLAIM_CHUNK = 256


#: The agent row's spec of a submission a remote agent plays over the agent API (`service.remote`).
REMOTE_AGENT = "remote"


def agent_row(factory: AgentFactory, limits: Limits) -> AgentRow:
    """The `batch_agents` row of a batch played by `factory` under `limits` (never a secret)."""
    return AgentRow(load_spec=factory.portable_spec or factory.spec, options=dict(factory.options),
                    turn_limit=limits.turn_limit, time_limit=limits.time_limit)


def stored_agent(store: Store, batch_id: str, spec: str | None = None,
                 overrides: JsonObject | None = None) -> tuple[AgentFactory, Limits]:
    """The batch's agent and limits, loaded again; `spec` (a resume's `--agent`) must match it.
    `overrides`: loader options given again (a resume's `--agent-env`, `--agent-memory`).

    A submission's `python:` agent is played only in its sandbox: refused where bwrap is missing,
    and refused outright if it was stored as played in process (`--in-process`, never submitted)."""
    batch = RunsRepo(store).batch(batch_id)
    if batch is None:
        raise NotFound("no such batch or submission", "batch", value=batch_id)
    row = RunsRepo(store).batch_agent(batch_id)
    if row is None:
        raise Conflict("this batch was stored before batches kept their agent and limits; it cannot be resumed",
                       "batch", value=batch_id)
    if row.load_spec == REMOTE_AGENT:
        raise Conflict("this submission is played by a remote agent over the agent API (`assay play`), not by "
                       "this process; it cannot be resumed here", "batch", value=batch_id)
    if row.load_spec == "mcp":  # `service.mcp_play.MCP_SPEC`
        raise Conflict("this batch is played by an MCP client (`assay mcp`), not by this process; launch "
                       "`assay mcp` again with the batch's suite, trials and seed to play its next run", "batch",
                       value=batch_id)
    # `load_agent`'s keyword arguments, as stored (and as given again)
    options: dict[str, Any] = {**dict(row.options or {}), **(overrides or {})}
    if batch.kind == "submission" and str(spec or row.load_spec).startswith("python:"):
        _require_sandbox(options, batch_id)
    if spec is None:
        # loaded by its portable spec, named as it was planned (the signature covers the name)
        factory = dataclasses.replace(load_agent(row.load_spec, **options), spec=batch.agent_spec)
    else:
        factory = load_agent(spec, **options)
    if factory.config_signature != batch.config_signature:
        raise Conflict(
            f"'{spec or row.load_spec}' is not the agent this batch was planned for ({batch.agent_spec}, "
            f"configuration signature {batch.config_signature[:12]}; this one is "
            f"{factory.config_signature[:12]})", "agent")
    return factory, Limits(turn_limit=row.turn_limit, time_limit=row.time_limit)


def _require_sandbox(options: JsonObject, batch_id: str) -> None:
    from assay.agents import sandbox  # lazy: start-up cost

    if options.get("in_process"):
        raise Conflict("this submission's agent was played in process (--in-process), which a submission never "
                       "is; it cannot be played here", "batch", value=batch_id)
    if sandbox.find_bwrap() is None:
        raise Invalid(sandbox.missing_line("a submission"), "agent")


def stored_scenarios(store: Store, batch_id: str) -> dict[str, LoadedScenario]:
    """The batch's scenarios rebuilt from their stored documents, by content hash; refused if this
    code no longer builds the same world from one of them (its hash would differ)."""
    loaded: dict[str, LoadedScenario] = {}
    for slot in RunsRepo(store).planned_runs(batch_id):
        key = slot.scenario_hash
        if key in loaded:
            continue
        stored = RunsRepo(store).scenario_by_hash(key)
        if stored is None:  # pragma: no cover - the plan's foreign key forbids it
            raise Conflict(f"scenario {key[:12]} of the plan is not stored", "batch", value=batch_id)
        rebuilt = parse_scenario(stored.document, f"stored scenario {slot.case_id}", get_kit)
        if rebuilt.content_hash != key:
            raise Conflict(
                f"scenario {slot.case_id} now builds to content hash {rebuilt.content_hash[:12]}, not the "
                f"planned {key[:12]} (the kit's code changed since the batch was planned); it cannot be resumed",
                "batch", value=batch_id)
        loaded[key] = rebuilt
    return with_facilitator(loaded, facilitator_of(store, batch_id))


#: Where the platform's own model facilitator is reached (a release that pins `openai:MODEL`).
FACILITATOR_BASE_URL_ENV = "ASSAY_FACILITATOR_BASE_URL"


class FacilitatorRef(TypedDict):
    """Who words a batch's campaign lines: a model spec (`openai:MODEL`) and its endpoint, never a
    key. A TypedDict: it is handed as it is to the kit (`Kit.run_options`, a mapping) and stored as
    its two columns (`batch_facilitators`)."""

    spec: str
    base_url: str | None


def facilitator_of(store: Store, batch_id: str) -> FacilitatorRef | None:
    """Who words a batch's campaign lines when not the script: the batch's own facilitator (a
    submission's `--facilitator`), else a model the release pins (`facilitator_model:
    openai:MODEL`, at `ASSAY_FACILITATOR_BASE_URL`). None: the scripted facilitator."""
    own = JudgeRepo(store).batch_facilitator(batch_id)
    if own is not None:
        return FacilitatorRef(spec=own.spec, base_url=own.base_url)
    batch = RunsRepo(store).batch(batch_id)
    release = (ReleasesRepo(store).release(batch.suite_key, batch.suite_version)
               if batch is not None and batch.suite_version is not None else None)
    pinned = (release["facilitator_model"] if release is not None else None) or ""
    if pinned.startswith("openai:"):
        return FacilitatorRef(spec=pinned, base_url=os.environ.get(FACILITATOR_BASE_URL_ENV))
    return None


def with_facilitator(scenarios: dict[str, LoadedScenario], facilitator: FacilitatorRef | None
                     ) -> dict[str, LoadedScenario]:
    """The scenarios with their world forked by `facilitator` where the kit has one to word."""
    if facilitator is None:
        return scenarios
    out = {}
    for key, loaded in scenarios.items():
        options = get_kit(loaded.scenario.kit).run_options(facilitator)
        out[key] = dataclasses.replace(loaded, world_options=options) if options is not None else loaded
    return out


def pending(store: Store, batch_id: str) -> int:
    """Slots a resume would play now: unrecorded, and not held by a live process."""
    return ClaimRepo(store).n_pending(batch_id)


def execute_pending(
    store: Store, batch_id: str, factory: AgentFactory, executor: Executor, limits: Limits,
    scenarios: dict[str, LoadedScenario], on_done: Callable[[RunRecord, bool], None] | None = None,
    budget: Any = None,
) -> int:
    """Claim and play the batch's pending slots until none is left; each run is scored and
    appended as it ends. Returns the agent steps taken. An interrupt (KeyboardInterrupt, or the
    SIGTERM the CLI turns into one) stops claiming, keeps the runs that ended, and leaves every
    other slot pending: the claims of this process end with it."""
    noun = _noun(store, batch_id)
    try:
        return _execute_pending(store, batch_id, factory, executor, limits, scenarios, on_done, budget)
    except Exception as exc:
        if is_fault(exc):
            raise stopped(exc, batch_id, noun) from exc
        raise


def _noun(store: Store, batch_id: str) -> str:
    batch = RunsRepo(store).batch(batch_id)
    return "submission" if batch is not None and batch.kind == "submission" else "batch"


def stopped(exc: Exception, batch_id: str, noun: str) -> StoreUnavailable:
    """A store fault told as having stopped `batch_id` (what to resume)."""
    fault = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable(describe(exc))
    return fault.about(batch_id, noun)


def _execute_pending(
    store: Store, batch_id: str, factory: AgentFactory, executor: Executor, limits: Limits,
    scenarios: dict[str, LoadedScenario], on_done: Callable[[RunRecord, bool], None] | None = None,
    budget: Any = None,
) -> int:
    from assay.agents import sandbox  # lazy: start-up cost

    sandbox.protect_store(store.url)  # a sandboxed agent never sees the store it is recorded in
    plan = {row.run_id: PlannedRun(row.run_id, row.slot, row.case_id, row.scenario_hash, row.trial, row.seed)
            for row in RunsRepo(store).planned_runs(batch_id)}
    chunk = max(CLAIM_CHUNK, 2 * getattr(executor, "workers", 1))
    claims = ClaimRepo(store)
    with Holder(store) as holder:
        def tasks() -> Iterator[Task]:
            cursor = -1
            while True:
                won, cursor = claims.claim(batch_id, holder.id, chunk, cursor)
                for run_id in won:
                    if budget is not None and not budget.allows_next():
                        return  # the spend cap: the claimed rest end with this holder, pending again
                    p = plan[run_id]
                    yield Task(scenarios[p.scenario_hash], p)
                if cursor == -1:
                    return

        return execute_tasks(store, scenarios, factory, tasks(), limits, executor, on_done, budget)


def all_recorded(store: Store, batch_id: str) -> bool:
    """Whether every planned slot of the batch has its run recorded (nothing left to play)."""
    return RunsRepo(store).unrecorded(batch_id) == 0
