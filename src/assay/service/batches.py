"""Durable batches: create, execute what is pending, complete — as three operations.

    batch_id = create(store, bundle, factory, planned, batch, limits)   # plan + agent, stored at once
    steps = execute_pending(store, batch_id, factory, executor)         # claim slots, play, write each run
    complete(store, batch_id)                                           # score/stamp once all are recorded

A batch is only ever what its stored rows say, so any process can pick it up: `execute_pending`
claims the batch's pending slots a chunk at a time (`store/claims.py`: a slot is pending when no
run is recorded for it and nobody alive holds it), plays them on the executor, and hands each run
to the writer as it ends. A process killed mid-batch leaves its recorded runs stored and its
claimed-but-unrecorded slots pending; `assay resume` runs this same function again, as many times
and in as many processes at once as wanted: every slot is recorded exactly once.

The agent is stored as the batch was planned for it: the spec another process loads (a python
file's path made absolute) and the loader's options, never an API key (a resuming process reads
`OPENAI_API_KEY` from its own environment), plus the run limits. A resume may name the agent
again; it must be the same configuration (equal config signature), or the batch would mix agents.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

from assay.agents.loader import AgentFactory
from assay.errors import Conflict, Invalid, NotFound
from assay.service.actors import Actor, prefix_owner, require_owner, require_staff
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits
from assay.run.executors import Executor, Task
from assay.scenario.load import LoadedScenario
from assay.worlds.kits import get_kit
from assay.store.claims import ClaimRepo, Holder
from assay.store.faults import StoreUnavailable, describe, is_fault
from assay.store.repo import Store
from assay.store.board_repo import BoardRepo

#: Slots claimed at a time, at least (and twice the runs in flight when that is more). Claiming
#: ahead costs little if the process dies (its claims are free again once it is seen gone), and a
#: claim is a write transaction: a scripted batch plays hundreds of runs a second. Concurrent
#: resumes split a batch at this grain.
CLAIM_CHUNK = 256
#: The agent row's spec of a submission a remote agent plays over the agent API (`service.remote`).
REMOTE_AGENT = "remote"


def agent_row(factory: AgentFactory, limits: Limits) -> dict[str, Any]:
    """The `batch_agents` row of a batch played by `factory` under `limits` (never a secret)."""
    return {"load_spec": factory.portable_spec or factory.spec, "options": dict(factory.options),
            "turn_limit": limits.turn_limit, "time_limit": limits.time_limit}


def stored_agent(store: Store, batch_id: str, spec: str | None = None,
                 overrides: dict[str, Any] | None = None) -> tuple[AgentFactory, Limits]:
    """The batch's agent and limits, loaded again; `spec` (a resume's `--agent`) must match it.
    `overrides`: loader options given again (a resume's `--agent-env`, `--agent-memory`).

    A submission's `python:` agent is played only in its sandbox: refused where bwrap is missing,
    and refused outright if it was stored as played in process (`--in-process`, never submitted)."""
    from assay.agents.loader import load_agent

    batch = store.batch(batch_id)
    if batch is None:
        raise NotFound("no such batch or submission", "batch", value=batch_id)
    row = store.batch_agent(batch_id)
    if row is None:
        raise Conflict("this batch was stored before batches kept their agent and limits; it cannot be resumed",
                       "batch", value=batch_id)
    if row["load_spec"] == REMOTE_AGENT:
        raise Conflict("this submission is played by a remote agent over the agent API (`assay play`), not by "
                       "this process; it cannot be resumed here", "batch", value=batch_id)
    if row["load_spec"] == "mcp":  # `service.mcp_play.MCP_SPEC`
        raise Conflict("this batch is played by an MCP client (`assay mcp`), not by this process; launch "
                       "`assay mcp` again with the batch's suite, trials and seed to play its next run", "batch",
                       value=batch_id)
    options = {**dict(row["options"] or {}), **(overrides or {})}
    if batch["kind"] == "submission" and str(spec or row["load_spec"]).startswith("python:"):
        _require_sandbox(options, batch_id)
    if spec is None:
        # loaded by its portable spec, named as it was planned (the signature covers the name)
        factory = dataclasses.replace(load_agent(row["load_spec"], **options), spec=batch["agent_spec"])
    else:
        factory = load_agent(spec, **options)
    if factory.config_signature != batch["config_signature"]:
        raise Conflict(
            f"'{spec or row['load_spec']}' is not the agent this batch was planned for ({batch['agent_spec']}, "
            f"configuration signature {batch['config_signature'][:12]}; this one is "
            f"{factory.config_signature[:12]})", "agent")
    return factory, Limits(turn_limit=row["turn_limit"], time_limit=row["time_limit"])


def _require_sandbox(options: dict[str, Any], batch_id: str) -> None:
    from assay.agents import sandbox

    if options.get("in_process"):
        raise Conflict("this submission's agent was played in process (--in-process), which a submission never "
                       "is; it cannot be played here", "batch", value=batch_id)
    if sandbox.find_bwrap() is None:
        raise Invalid(sandbox.missing_line("a submission"), "agent")


def stored_scenarios(store: Store, batch_id: str) -> dict[str, LoadedScenario]:
    """The batch's scenarios rebuilt from their stored documents, by content hash; refused if this
    code no longer builds the same world from one of them (its hash would differ)."""
    from assay.scenario.load import parse_scenario

    loaded: dict[str, LoadedScenario] = {}
    for slot in store.planned_runs(batch_id):
        key = slot["scenario_hash"]
        if key in loaded:
            continue
        stored = store.scenario_by_hash(key)
        if stored is None:  # pragma: no cover - the plan's foreign key forbids it
            raise Conflict(f"scenario {key[:12]} of the plan is not stored", "batch", value=batch_id)
        rebuilt = parse_scenario(stored["document"], f"stored scenario {slot['case_id']}", get_kit)
        if rebuilt.content_hash != key:
            raise Conflict(
                f"scenario {slot['case_id']} now builds to content hash {rebuilt.content_hash[:12]}, not the "
                f"planned {key[:12]} (the kit's code changed since the batch was planned); it cannot be resumed",
                "batch", value=batch_id)
        loaded[key] = rebuilt
    return with_facilitator(loaded, facilitator_of(store, batch_id))


#: Where the platform's own model facilitator is reached (a release that pins `openai:MODEL`).
FACILITATOR_BASE_URL_ENV = "ASSAY_FACILITATOR_BASE_URL"


def facilitator_of(store: Store, batch_id: str) -> dict[str, Any] | None:
    """Who words a batch's campaign lines when not the script: the batch's own facilitator (a
    submission's `--facilitator`), else a model the release pins (`facilitator_model:
    openai:MODEL`, at `ASSAY_FACILITATOR_BASE_URL`). None: the scripted facilitator."""
    from assay.store.judge_repo import JudgeRepo

    own = JudgeRepo(store).batch_facilitator(batch_id)
    if own is not None:
        return own
    batch = store.batch(batch_id)
    release = BoardRepo(store).release(batch["suite_key"], batch["suite_version"]) if batch else None
    pinned = (release or {}).get("facilitator_model") or ""
    if pinned.startswith("openai:"):
        return {"spec": pinned, "base_url": os.environ.get(FACILITATOR_BASE_URL_ENV)}
    return None


def with_facilitator(scenarios: dict[str, LoadedScenario], facilitator: dict[str, Any] | None
                     ) -> dict[str, LoadedScenario]:
    """The scenarios with their world forked by `facilitator` where the kit has one to word."""
    if facilitator is None:
        return scenarios
    out = {}
    for key, loaded in scenarios.items():
        options = getattr(get_kit(loaded.scenario.kit), "run_options", None)
        out[key] = dataclasses.replace(loaded, world_options=options(facilitator)) if options else loaded
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
            raise _stopped(exc, batch_id, noun) from exc
        raise


def _noun(store: Store, batch_id: str) -> str:
    batch = store.batch(batch_id)
    return "submission" if batch is not None and batch["kind"] == "submission" else "batch"


def _stopped(exc: Exception, batch_id: str, noun: str) -> StoreUnavailable:
    """A store fault told as having stopped `batch_id` (what to resume)."""
    fault = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable(describe(exc))
    return fault.about(batch_id, noun)


def _execute_pending(
    store: Store, batch_id: str, factory: AgentFactory, executor: Executor, limits: Limits,
    scenarios: dict[str, LoadedScenario], on_done: Callable[[RunRecord, bool], None] | None = None,
    budget: Any = None,
) -> int:
    from assay.agents import sandbox
    from assay.service.runs import execute_tasks

    sandbox.protect_store(store.url)  # a sandboxed agent never sees the store it is recorded in
    plan = {row["run_id"]: PlannedRun(row["run_id"], row["slot"], row["case_id"], row["scenario_hash"],
                                      row["trial"], row["seed"])
            for row in store.planned_runs(batch_id)}
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


def complete(store: Store, batch_id: str) -> bool:
    """Finish the batch if every planned slot is recorded: a run batch gets its completion row, a
    submission is swept and finalised (`submissions.complete`). True when the batch is complete.

    Idempotent, and retried as a whole on a transient store fault (each step only adds what is
    missing), so a finalisation cut short is finished by the next call: the sweeper's
    (`complete_recorded`), `assay resume`'s or `assay score`'s."""
    batch = store.batch(batch_id)
    if batch is None:
        raise NotFound("no such batch or submission", "batch", value=batch_id)
    noun = "submission" if batch["kind"] == "submission" else "batch"

    def finish() -> bool:
        if batch["kind"] == "submission":
            from assay.service import submissions

            submissions.complete(store, batch_id)
        return store.add_completion(batch_id)

    try:
        return store.retry.call(finish)
    except Exception as exc:
        if is_fault(exc):
            raise _stopped(exc, batch_id, noun) from exc
        raise


def complete_recorded(store: Store, on_error: Callable[[str, Exception], None] | None = None) -> list[str]:
    """Complete every batch whose runs are all recorded but which was never completed (its last
    run's process stopped, or its finalisation failed, before it could): the sweeper's duty, so a
    submission whose runs are all recorded always completes. Returns the ids completed now; one
    that fails is told to `on_error` and left for the next call."""
    done = []
    for batch_id in store.completable():
        try:
            if complete(store, batch_id):
                done.append(batch_id)
        except Exception as exc:  # noqa: BLE001 - one batch must not stop the others
            if on_error is None:
                raise
            on_error(batch_id, exc)
    return done


def all_recorded(store: Store, batch_id: str) -> bool:
    """Whether every planned slot of the batch has its run recorded (nothing left to play)."""
    return store.unrecorded(batch_id) == 0


def find(store: Store, ident: str, *, actor: Actor) -> dict[str, Any]:
    """The batch or submission `ident` names (an id or a unique prefix); refused if none does,
    told what it is if `ident` names a run instead. A run batch is the operator's; a submission
    is also its account's."""
    owner = prefix_owner(actor)
    batch_id = store.resolve_batch_id(ident, owner)
    if batch_id is None:
        if store.resolve_run_id(ident, owner) is not None:
            raise NotFound("this is a run id, not a batch or submission; `assay debrief` shows a run", "batch",
                           value=ident)
        raise NotFound("no such batch or submission", "batch", value=ident)
    batch = store.batch(batch_id)
    assert batch is not None
    if not actor.is_staff:
        require_owner(actor, owner_of(store, batch), "batch or submission", ident, "batch")
    return batch


def owner_of(store: Store, batch: dict[str, Any]) -> str | None:
    """The account a batch belongs to: a submission's account; None for the operator's run batches."""
    if batch["kind"] != "submission":
        return None
    from assay.store.board_repo import BoardRepo

    submission = BoardRepo(store).submission(batch["id"])
    return submission["account"] if submission is not None else None


def list_batches(store: Store, kind: str | None = None, *, actor: Actor) -> list[dict[str, Any]]:
    require_staff(actor, "list every batch", "batch")
    """Every stored batch, newest first: id, kind, suite, agent, when, status and counts."""
    return store.batch_listing(kind)


def list_submissions(store: Store, account: str | None = None, suite: str | None = None, *,
                     actor: Actor) -> list[dict[str, Any]]:
    """Submissions, newest first: `status` is the board's (`complete`/`incomplete`) once the
    submission is finalised, `pending` before (runs still to play or sweep: `assay resume`)."""
    from assay.service.board import submission_facts
    from assay.store.board_repo import BoardRepo

    if not actor.is_staff:  # an account lists its own, whatever it asked for
        if actor.kind != "account" or account not in (None, actor.account):
            return []
        account = actor.account
    rows = [{**r, **(submission_facts(store, r["submission_id"]) or {})}
            for r in BoardRepo(store).submission_listing(account, suite)]
    return [{
        "id": r["submission_id"], "account": r["account"], "suite": r["suite_key"], "version": r["version"],
        "label": r["label"], "status": r["status"] if r["finalised"] else "pending",
        "n_planned": r["n_planned"], "n_recorded": r["n_recorded"], "n_scored": r["n_scored"],
        "created_at": r["created_at"].isoformat(),
    } for r in rows]
