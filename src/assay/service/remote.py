"""Remote play: an agent on someone else's machine plays the runs the server composed, over HTTP.

    lease = next_run(store, actor=agent_of("alice"))         # the next pending run, leased, or None
    answer = step(store, lease["run_id"], message, index=1, actor=agent_of("alice"))
    # {"messages": [what followed], "done": bool, "status": …}; until done, step index + 1

A submission whose agent is `remote` (`remote_factory()`, composed by `submissions.compose`) is
played by whichever agent of its account asks for work. `next_run` leases a pending run with the
durable-batch claims (`store/claims.py`): the claim is unique per attempt in the database, so two
agents — two threads, two worker processes, two machines — never get the same run. The lease's
holder is the remote agent; it needs no heartbeat, because a run left idle past its time limit
ends as a `timeout` (`expire_idle`, which `next_run` runs first for the account), which records it.

Each `step` is one assistant message, applied by the one loop (`run.drivers.Stepper`) exactly as
in-process play applies it: a malformed message is `empty`, an unknown tool a tool error, the time
an answer took counts against the run's time limit (from the previous answer, or the lease, to the
request). A run is what its stored steps say: every step is appended to `remote_steps`, and the
run is a fresh fork of its world fed its recorded steps in order. A process keeps the run it last
stepped live (`_LIVE`: its stepper, fed exactly the steps stored, checked by their number and the
last one's digest before use) so a step applies one message instead of replaying the run; any other
process, or a restarted one, replays. So a restarted server (or another worker) goes on where the
run was, a retried step (the same index and the same message) is answered again and never applied
twice, and a different message for a taken index is refused.

One short write transaction per step (issue 26), of one statement: the step is decided and
applied from what this process kept of the run after its own last step of it (`_step_kept`: its
stepper, steps, lease and last step's time; no read), else from a read, then appended by
`RemoteRepo.append_step`, whose insert appends nothing (and the step is decided again, from a read)
if the run moved meanwhile. The step that ends a run records it in that same transaction —
the run, its check outcomes and oracle verdict (`execution.record_in`), its lease ended — so a run
is recorded once, with the step that ended it. Completion (sweep, era, digest, figures) is not the
step's: after the commit, the step that recorded a submission's last run completes it
(`completion.complete`, once per submission); if that fails or the process dies first, the
sweeper (`completion.complete_recorded`) does it. A campaign worded by a model facilitator is the
exception: its step is appended first and applied after (a line is asked of the model only for a
stored step), and the run it ends is recorded in a second transaction.

A campaign worded by a model facilitator (the submission's own, or one the release pins) is
replayed the same way, but a model would word each line anew at every replay: each line is kept in
`remote_lines` the first time it is spoken, and every later replay says the kept lines again and
asks the model only for the next one (`worlds.campaign.facilitator.ResumedFacilitator`).

An agent sees what an in-process agent sees — the messages, the tools — plus its scenario's id,
title and briefing and its limits; never the hidden truth, the checks or a seed. An agent plays only
its own account's runs: another account's run does not exist for it (`NotFound`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict

import sqlalchemy as sa

from assay.agents.loader import AgentFactory
from assay.errors import Conflict, Forbidden, NotFound
from assay.jsontypes import JsonObject
from assay.records import PlannedRun, storable
from assay.run.drivers import Stepper
from assay.run.engine import Limits, open_episode
from assay.scenario.load import LoadedScenario
from assay.score.oracle import evaluate_checks
from assay.service import completion, execution
from assay.service.actors import Actor, require_agent_of
from assay.store.claims import ClaimRepo
from assay.store.jsonvalue import dumps
from assay.store.remote_repo import (REMOTE_SPEC, Lease, Moved, NewStep, OpenLease, RemoteRepo, RemoteRun, StepHead,
                                     StoredStep, lock_batch)
from assay.store.repo import Store
from assay.store.schema import utcnow
from assay.store.runs_repo import RunsRepo

REMOTE = execution.REMOTE_AGENT
log = logging.getLogger("assay.service")
assert REMOTE == REMOTE_SPEC
#: What a run id looks like (`uuid4().hex`); anything else names no run, and is never sent to the database.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: How deep an agent's answer may nest before the rest of it is dropped (a message nests 4 deep).
MAX_DEPTH = 32
#: The longest failure reason a remote agent may report (the run record keeps 500 characters).
MAX_FAILURE = 500
#: How many times a step is decided again when its run moved on between the read and the write.
MAX_TRIES = 20


def remote_factory() -> AgentFactory:
    """The agent of a submission a remote agent plays: stored as `remote`, loaded by nobody here.

    Its configuration signature says only that: the server cannot vouch for what plays remotely
    (the label and the play model are the submitter's own words)."""
    return AgentFactory(REMOTE, _plays_elsewhere, {"kind": "remote"}, portable_spec=REMOTE)


def _plays_elsewhere() -> Any:
    raise RuntimeError("a remote agent plays over the agent API, never in the server's process")


# -- what the agent is answered: each serialised as it is, by the agent routes and `/mcp` ---------


class ScenarioView(TypedDict):
    id: str
    title: str
    briefing: str


class LimitsView(TypedDict):
    turn_limit: int
    time_limit: float


class LeaseView(TypedDict):
    """`next_run`'s answer (`POST /api/agent/runs/next`'s body, key for key)."""

    run_id: str
    submission_id: str
    scenario: ScenarioView
    messages: list[JsonObject]  # the engine's chat messages (`run.engine.Turn`), passed through
    tools: list[JsonObject]  # the kit's OpenAI function-tool schemas, passed through
    limits: LimitsView
    step: int
    pending: int


class StepView(TypedDict):
    """`step`'s answer (`POST /api/agent/runs/{id}/step`'s body, key for key)."""

    run_id: str
    step: int | None
    messages: list[JsonObject]
    done: bool
    status: str
    reason: str | None


class ReleaseView(TypedDict):
    """`release`'s answer (`POST /api/agent/runs/{id}/release`'s body, key for key)."""

    run_id: str
    released: bool
    step: int


# -- the run as its steps say -------------------------------------------------------------------

_SCENARIOS: OrderedDict[str, LoadedScenario] = OrderedDict()
_SCENARIOS_MAX = 64
_SCENARIOS_GUARD = threading.Lock()


def _scenario(content_hash: str, document: JsonObject, case_id: str) -> LoadedScenario:
    """The scenario rebuilt from its stored document (content-addressed, so kept once per hash)."""
    with _SCENARIOS_GUARD:
        found = _SCENARIOS.get(content_hash)
        if found is not None:
            _SCENARIOS.move_to_end(content_hash)
            return found
    from assay.scenario.load import parse_scenario
    from assay.worlds.kits import get_kit

    loaded = parse_scenario(document, f"stored scenario {case_id}", get_kit)
    if loaded.content_hash != content_hash:
        raise Conflict(f"scenario {case_id} now builds to content hash {loaded.content_hash[:12]}, not the planned "
                       f"{content_hash[:12]} (the kit's code changed since it was planned)", "run")
    with _SCENARIOS_GUARD:
        _SCENARIOS[content_hash] = loaded
        while len(_SCENARIOS) > _SCENARIOS_MAX:
            _SCENARIOS.popitem(last=False)
    return loaded


def _limits(run: RemoteRun) -> Limits:
    return Limits(turn_limit=run.turn_limit, time_limit=run.time_limit)


def _planned(run: RemoteRun) -> PlannedRun:
    return PlannedRun(run.run_id, run.slot, run.case_id, run.scenario_hash, run.trial, run.seed)


def _apply(stepper: Stepper, row: StoredStep | NewStep) -> None:
    """Feed one stored step to the run's stepper."""
    if row.kind == "message":
        stepper.send((row.reply or {}).get("message"), row.elapsed)
    elif row.kind == "failed":
        stepper.fail(row.reason or "", row.elapsed)
    else:
        stepper.expire()


def _as_stored(row: NewStep) -> NewStep:
    """A step row as it reads back from the store (its reply through the store's one JSON
    encoding), so a step applied before it is stored is applied as every replay will apply it."""
    return row if row.reply is None else dataclasses.replace(row, reply=json.loads(dumps(row.reply)))


def _replay(store: Store, run: RemoteRun, steps: Sequence[StoredStep]) -> Stepper:
    """A fresh fork of the run's world, fed its recorded steps in order (those after its end are
    ignored: nothing can follow the end of a run)."""
    loaded = _worded(store, run, _scenario(run.scenario_hash, run.document, run.case_id))
    stepper = Stepper(open_episode(loaded, _planned(run), _limits(run)))
    for row in steps:
        if stepper.done:
            break
        _apply(stepper, row)
    return stepper


#: Each kept run's facilitator (`_facilitator`), asked once per run and process.
_FACILITATORS: OrderedDict[tuple[str, str], execution.FacilitatorRef | None] = OrderedDict()


def _facilitator(store: Store, run: RemoteRun) -> execution.FacilitatorRef | None:
    """Who words the run's lines when its kit has lines a model words: its batch's model
    facilitator (`execution.facilitator_of`'s spec, passed to the kit as it is), or None (the
    script, or a kit with nothing to word). Asked once per run."""
    key = (store.url, run.run_id)
    with _LIVE_GUARD:
        if key in _FACILITATORS:
            return _FACILITATORS[key]
    from assay.worlds.kits import get_kit

    loaded = _scenario(run.scenario_hash, run.document, run.case_id)
    found = execution.facilitator_of(store, run.batch_id) if get_kit(loaded.scenario.kit).worded else None
    with _LIVE_GUARD:
        _FACILITATORS[key] = found
        while len(_FACILITATORS) > _RUNS_MAX:
            _FACILITATORS.popitem(last=False)
    return found


def _worded(store: Store, run: RemoteRun, loaded: LoadedScenario) -> LoadedScenario:
    """The scenario as this run's world is worded: by its batch's model facilitator, if it has one,
    taken up where the run was. The lines the run has spoken are kept in `remote_lines` as they are
    first spoken, and said again at every later replay, so the model is asked for each line once."""
    from assay.worlds.kits import get_kit

    facilitator = _facilitator(store, run)
    if facilitator is None:
        return loaded
    kit = get_kit(loaded.scenario.kit)
    repo, run_id, spec = RemoteRepo(store), run.run_id, facilitator["spec"]
    options = kit.resume_options(facilitator, repo.lines(run_id), lambda seq, line: repo.keep_line(run_id, seq, spec, line))
    return loaded if options is None else dataclasses.replace(loaded, world_options=options)


# -- live runs: the stepper a process fed last, kept for the run's next step ----------------------

@dataclasses.dataclass(slots=True)
class _Kept:
    """A run's stepper as this process left it: fed `steps` stored steps, the last with `digest`
    and stamped `last_at`, under `lease` (None when not known): what its next step is decided from
    without reading the run again (`_step_kept`)."""

    steps: int
    digest: str | None
    stepper: Stepper
    lease: Lease | None = None
    last_at: datetime | None = None


_LIVE: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
_LIVE_MAX = 2048
_LIVE_GUARD = threading.Lock()


def _stepper(store: Store, run: RemoteRun, steps: Sequence[StepHead]) -> Stepper:
    """The run as `steps` say: the stepper this process kept after its last step (taken out, so no
    other request advances it meanwhile) if it was fed exactly these steps, else a replay."""
    with _LIVE_GUARD:
        kept = _LIVE.pop((store.url, run.run_id), None)
    if kept is not None and kept.steps == len(steps) and kept.digest == (steps[-1].digest if steps else None):
        return kept.stepper
    full = [s for s in steps if isinstance(s, StoredStep)]
    if len(full) != len(steps):  # read without their replies (`RemoteRepo.state`): read them
        full = RemoteRepo(store).steps(run.run_id)[:len(steps)]  # append-only: the same steps, and any after
    return _replay(store, run, full)


def _keep(store: Store, run_id: str, steps: Sequence[StepHead] | int, digest: str | None, stepper: Stepper,
          lease: Lease | None = None, last_at: datetime | None = None) -> None:
    """Keep the run's stepper, fed `steps` stored steps (the last with `digest`, stamped
    `last_at`), under `lease` if known, for its next step. `steps` as read: its count, digest and
    time are taken from it."""
    if not isinstance(steps, int):
        digest, last_at = (steps[-1].digest, steps[-1].created_at) if steps else (None, None)
        steps = len(steps)
    key = (store.url, run_id)
    with _LIVE_GUARD:
        if stepper.done:
            _LIVE.pop(key, None)
            return
        kept = _LIVE.get(key)
        if kept is not None and kept.steps > steps:
            return
        _LIVE[key] = _Kept(steps, digest, stepper, lease, last_at)
        _LIVE.move_to_end(key)
        while len(_LIVE) > _LIVE_MAX:
            _LIVE.popitem(last=False)


# -- recording a run that is over ---------------------------------------------------------------


def _recorder(store: Store, run: RemoteRun, stepper: Stepper, holder: str | None) -> Callable[[sa.Connection], int]:
    """What records the run `stepper` ended, inside a write transaction: the run scored by its
    checks (`execution.record_in`: once; a run already recorded is kept as it was), its lease
    ended; returns how many of its batch's runs are still unrecorded then (counted after the
    batch's other recording transactions committed: `lock_batch`)."""
    record = stepper.record
    assert record is not None
    loaded = _scenario(run.scenario_hash, run.document, run.case_id)
    item = execution.scored(record, evaluate_checks(loaded.scenario.checks, record.final_state))

    def then(conn: sa.Connection) -> int:
        execution.record_in(store, conn, item)
        if holder is not None:
            RemoteRepo.end_holder_in(conn, holder)
        lock_batch(conn, run.batch_id)
        return RunsRepo.unrecorded_in(conn, run.batch_id)

    return then


def _record(store: Store, run: RemoteRun, stepper: Stepper, holder: str | None) -> None:
    """Record a run that is over in a transaction of its own (a run whose world could not open, a
    worded run's last step, one whose record went missing), then complete its batch if it was the last."""
    left = RemoteRepo(store).record(run.run_id, _recorder(store, run, stepper, holder))
    if left is None and holder is not None:
        RemoteRepo(store).end_holder(holder)  # recorded already: its lease ends all the same
    _completed(store, run, left)


def _completed(store: Store, run: RemoteRun, left: int | None) -> None:
    """Complete the run's submission once its last run is recorded (`left == 0`), after the
    recording transaction committed: once per submission. Idempotent; a failure is the sweeper's."""
    if left != 0:
        return
    try:
        completion.complete(store, run.batch_id)
    except Exception as exc:  # noqa: BLE001 - the run is recorded: its answer stands
        # finishing the submission is idempotent; the sweeper (`completion.complete_recorded`) does it
        # again until it is done, so the agent is not told its recorded step failed
        log.warning("submission %s: completion deferred to the sweeper: %s: %s", run.batch_id,
                    type(exc).__name__, exc)


def _take(store: Store, run: RemoteRun, seen: int, seen_digest: str | None, lease: Lease, row: NewStep,
          stepper: Stepper) -> Stepper:
    """Append `row` as the run's next step (its steps being `seen`, the last with `seen_digest`,
    leased by `lease`) and apply it to `stepper`, the run as those steps say; the step that ends
    the run records it in the same transaction. Raises `Moved` (nothing appended; `stepper` may
    have been fed `row`: drop it) if the run moved on since."""
    repo, stored, holder, created = RemoteRepo(store), _as_stored(row), lease.holder, utcnow()
    if _facilitator(store, run) is None:
        _apply(stepper, stored)  # before the write: so the write records the run the step ended
        then = _recorder(store, run, stepper, holder) if stepper.done else None
        left = repo.append_step(run.run_id, seen, seen_digest, holder, row, created, then)
        _completed(store, run, left)
    else:
        repo.append_step(run.run_id, seen, seen_digest, holder, row, created)  # a line is asked only for a stored step
        _apply(stepper, stored)
        if stepper.done:
            _record(store, run, stepper, holder)
    _keep(store, run.run_id, seen + 1, row.digest, stepper, lease, created)
    return stepper


# -- the run's fixed facts ------------------------------------------------------------------------

_RUNS: OrderedDict[tuple[str, str], RemoteRun] = OrderedDict()
_RUNS_MAX = 4096
#: Each scenario's document once, however many kept runs play it (by content hash).
_DOCUMENTS: OrderedDict[str, JsonObject] = OrderedDict()


def _static(store: Store, run_id: str) -> RemoteRun | None:
    """What remote play needs of a planned run that never changes (`RemoteRepo.run` but whether it
    is recorded): read once per process, then kept."""
    key = (store.url, run_id)
    with _LIVE_GUARD:
        found = _RUNS.get(key)
        if found is not None:
            _RUNS.move_to_end(key)
            return found
    found_row = RemoteRepo(store).run(run_id)
    if found_row is None:
        return None
    with _LIVE_GUARD:
        document = _DOCUMENTS.setdefault(found_row.scenario_hash, found_row.document)
        row = dataclasses.replace(found_row, document=document, recorded_status=None)
        _DOCUMENTS.move_to_end(row.scenario_hash)
        while len(_DOCUMENTS) > _SCENARIOS_MAX * 4:
            _DOCUMENTS.popitem(last=False)
        _RUNS[key] = row
        while len(_RUNS) > _RUNS_MAX:
            _RUNS.popitem(last=False)
    return row


def _run(store: Store, run_id: str, actor: Actor) -> RemoteRun:
    """The remote run `run_id`, if `actor` may play it; otherwise it does not exist."""
    run = _static(store, run_id) if isinstance(run_id, str) and _RUN_ID.match(run_id) else None
    if run is None or run.load_spec != REMOTE:
        raise NotFound("no such run", "run", value=run_id)
    require_agent_of(actor, run.account, run_id)
    return run


def _agent_account(actor: Actor) -> str:
    if actor.kind != "agent" or actor.account is None:
        raise Forbidden(f"only an agent of an account plays remote runs; {actor.describe()} does not", "run")
    return actor.account


# -- leasing ------------------------------------------------------------------------------------


def next_run(store: Store, *, actor: Actor) -> LeaseView | None:
    """Lease the next pending run of the account's remote submissions to the caller, or None when
    none is pending. Runs its account left idle past their time end first (`expire_idle`).

    The answer is made before the run is leased, and the lease (holder and claim) is one
    transaction, the last thing done: a fault anywhere before it leaves the run pending for the
    next request, never leased to an agent that was not told."""
    account = _agent_account(actor)
    expire_idle(store, account=account)
    repo, claims = RemoteRepo(store), ClaimRepo(store)
    for submission_id in repo.open_submissions(account):
        cursor: int | None = -1
        while cursor is not None:
            free, after = claims.free(submission_id, 1, cursor)
            cursor = None if after == -1 else after
            if not free:
                continue
            run_id, attempt = free[0]
            run = _static(store, run_id)
            assert run is not None
            # a run an agent released (`release`) goes on where it was: its steps are replayed
            steps = repo.steps(run_id)
            stepper = _stepper(store, run, steps)
            view = None if stepper.done else _lease_view(store, run, stepper)
            lease = repo.take_lease(run_id, attempt)
            if lease is None:
                continue  # another agent leased it meanwhile: look further
            if view is None:  # its world could not open: recorded as the harness's `error`
                _record(store, run, stepper, lease.holder)
                continue
            _keep(store, run_id, steps, None, stepper, lease)
            return view
    return None


def _lease_view(store: Store, run: RemoteRun, stepper: Stepper) -> LeaseView:
    """The lease's answer, made before the run is leased: `pending` counts the runs left after it."""
    assert stepper.turn is not None
    limits = _limits(run)
    pending = RemoteRepo(store).pending(run.account)
    briefing = run.document["briefing"]
    assert isinstance(briefing, str)  # a scenario's briefing is text (`scenario.models.Scenario`)
    return {
        "run_id": run.run_id,
        "submission_id": run.batch_id,
        "scenario": {"id": run.case_id, "title": run.title, "briefing": briefing},
        "messages": stepper.turn.messages,
        "tools": stepper.turn.tools,
        "limits": {"turn_limit": limits.turn_limit, "time_limit": limits.time_limit},
        "step": len(stepper.marks),  # 1, or the next answer of a run that was released
        "pending": max(0, pending - 1),
    }


# -- stepping -----------------------------------------------------------------------------------


def _json_value(value: Any, depth: int = 0) -> Any:
    """What an agent sent, as JSON both backends store alike: text made storable, a number that is
    not one (NaN, Infinity) made null, and anything nested deeper than `MAX_DEPTH` (no assistant
    message is) made null, which the engine reads as nothing said."""
    if depth > MAX_DEPTH or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, dict):
        return {storable(str(k)): _json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v, depth + 1) for v in value]
    if isinstance(value, str):
        return storable(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return storable(str(value))


def _digest(kind: str, said: Any) -> str:
    text = json.dumps([kind, said], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def step(store: Store, run_id: str, message: object = None, *, actor: Actor, index: int | None = None,
         failure: str | None = None, now: datetime | None = None,
         answered_at: tuple[int, datetime] | None = None) -> StepView:
    """Apply the agent's next answer to its leased run: `message` (one assistant message, or
    whatever it sent), or `failure` (it failed on its side: the run is `crashed` with that reason).

    `index` is the answer's 1-based number in the run (the lease says `step: 1`; each answer says
    the next): a retry of a taken index with the same message is answered again, not applied
    twice; another message there is refused (`Conflict`), as is a gap. Without `index` the answer
    is the next one. Returns `{run_id, step, messages, done, status}`: the messages that followed
    the answer, whether the run is over now, and its status then (`running` before). A step on a
    run that is over (idle past its time, say) answers `done` with its status and applies nothing.

    The agent is charged the time from the server's answer to this step's arrival only (issue 26):
    `now` is when the request arrived (the web stamps it before any queue), and `answered_at`
    `(n, when)` when the server's answer after the run's n-th step (0: the lease) left it, which
    counts from then rather than from when that step was stored."""
    arrival = now or utcnow()
    run = _run(store, run_id, actor)
    if failure is not None:
        kind, reply, reason = "failed", None, storable(str(failure))[:MAX_FAILURE] or "the agent failed"
        digest = _digest(kind, reason)
    else:
        reply = {"message": _json_value(message)}
        kind, reason = "message", None
        digest = _digest(kind, reply)
    kept = _step_kept(store, run, index, kind, reply, reason, digest, arrival, answered_at)
    if kept is not None:
        return kept
    for _ in range(MAX_TRIES):
        steps, lease, recorded = RemoteRepo(store).state(run_id)
        answered, row = _decide(run_id, steps, lease, recorded, index, kind, reply, reason, digest, arrival,
                                answered_at)
        stepper = _stepper(store, run, steps)
        if row is None or stepper.done:  # a retry of a step taken, or the run is over: nothing to append
            if stepper.done and not recorded:  # over, but its record went missing (cut short)
                _record(store, run, stepper, lease.holder if lease is not None else None)
            _keep(store, run_id, steps, None, stepper, lease)
            return _answer(store, run, stepper, answered if row is None else None)
        assert lease is not None
        try:
            stepper = _take(store, run, len(steps), steps[-1].digest if steps else None, lease, row, stepper)
        except Moved:
            continue  # another request for this run got in first: decide again from what it left
        return _answer(store, run, stepper, answered)
    raise Conflict("this run is being stepped by other requests at the same time; send the step again", "step",
                   value=run_id)


def _step_kept(store: Store, run: RemoteRun, index: int | None, kind: str, reply: JsonObject | None,
               reason: str | None, digest: str, arrival: datetime,
               answered_at: tuple[int, datetime] | None) -> StepView | None:
    """The step taken from what this process kept of the run after its own last step of it (its
    stepper, steps, lease and last step's time), without reading the run (issue 26: one
    statement a step): the answer, or None when nothing usable is kept (this process did not
    play the run's last step, `index` is not the next step, the run is over) or the run moved
    since (`Moved`: then the kept stepper is dropped). The caller then decides from a read."""
    key = (store.url, run.run_id)
    with _LIVE_GUARD:
        kept = _LIVE.get(key)
        if (kept is None or kept.lease is None or kept.stepper.done
                or (index is not None and index != kept.steps + 1)):
            return None
        del _LIVE[key]  # taken out: no other request advances it meanwhile
    n, lease = kept.steps, kept.lease
    previous = lease.leased_at if kept.last_at is None else max(kept.last_at, lease.leased_at)
    if answered_at is not None and answered_at[0] == n:
        previous = max(previous, answered_at[1])
    row = NewStep(n + 1, kind, reply, reason, digest, max(0.0, (arrival - previous).total_seconds()))
    try:
        stepper = _take(store, run, n, kept.digest, lease, row, kept.stepper)
    except Moved:
        return None
    return _answer(store, run, stepper, n + 1)


def _decide(run_id: str, steps: Sequence[StepHead], lease: Lease | None, recorded: bool,
            index: int | None, kind: str, reply: JsonObject | None, reason: str | None, digest: str,
            arrival: datetime, answered_at: tuple[int, datetime] | None) -> tuple[int | None, NewStep | None]:
    """What an answer does to the run as read: `(its step number, None)` for a retry of a taken
    step (None for the number when the run is over), `(n + 1, row)` with the step row to append;
    raises `Conflict` for another message at a taken index, a gap, or a run nobody leased."""
    n = len(steps)
    if index is not None and 1 <= index <= n:
        taken = steps[index - 1]
        if taken.digest != digest and taken.kind != "expired":
            raise Conflict(f"step {index} of this run was already taken with another message", "step",
                           value=run_id)
        return index, None
    if recorded or (steps and steps[-1].kind != "message"):
        return None, None  # the run is over
    if lease is None:
        raise Conflict("this run is not leased; ask for work with POST /api/agent/runs/next", "run", value=run_id)
    if index is not None and index != n + 1:
        raise Conflict(f"this run's next step is {n + 1}, not {index}", "step", value=run_id)
    previous = max(steps[-1].created_at, lease.leased_at) if steps else lease.leased_at
    if answered_at is not None and answered_at[0] == n:
        previous = max(previous, answered_at[1])
    return n + 1, NewStep(n + 1, kind, reply, reason, digest, max(0.0, (arrival - previous).total_seconds()))


def _answer(store: Store, run: RemoteRun, stepper: Stepper, index: int | None) -> StepView:
    played = len(stepper.marks) - 1  # the answers the run took before it ended (or so far)
    if stepper.done:
        assert stepper.record is not None
        status: str = stepper.record.status
    else:
        status = "running"
    if index is None or index > played:  # the run was over before this answer
        if not stepper.done:  # pragma: no cover - a remote run is only ever recorded from its steps
            recorded = RemoteRepo(store).run(run.run_id)
            status = (recorded.recorded_status if recorded is not None else None) or status
        return {"run_id": run.run_id, "step": index, "messages": [], "done": True, "status": status,
                "reason": _reason(stepper)}
    return {"run_id": run.run_id, "step": index, "messages": stepper.after(index), "done": stepper.done,
            "status": status, "reason": _reason(stepper)}


def _reason(stepper: Stepper) -> str | None:
    """Why a run that is over did not complete (the player is told, as the owner is), else None."""
    record = stepper.record if stepper.done else None
    return None if record is None or record.status == "completed" else record.reason


# -- handing a run back -------------------------------------------------------------------------


def release(store: Store, run_id: str, *, actor: Actor) -> ReleaseView:
    """The agent hands its leased run back (it stopped: Ctrl-C): the lease ends and nothing is
    recorded or charged, so the run is pending again at once. The next lease of it goes on where it
    was (its steps so far are replayed; the time it lay released is nobody's). Returns `{run_id,
    released, step}`: whether a lease was ended, and the number of the run's next answer. A run
    not leased (already released, or over) is answered `released: false`."""
    _run(store, run_id, actor)
    repo = RemoteRepo(store)
    lease = repo.lease(run_id) if not RunsRepo(store).recorded([run_id]) else None
    if lease is not None:
        repo.end_holder(lease.holder)
    return {"run_id": run_id, "released": lease is not None, "step": len(repo.steps(run_id)) + 1}


# -- idle runs ----------------------------------------------------------------------------------


def expire_idle(store: Store, *, account: str | None = None, now: datetime | None = None) -> int:
    """End every leased run (of `account`, or all) whose agent stayed away past its time limit:
    an `expired` step is appended (under the run's lock, unless the agent answered meanwhile) and
    the run, replayed, ends as a `timeout` and is recorded. Returns how many runs were ended."""
    repo = RemoteRepo(store)
    now = now or utcnow()
    ended = 0
    for lease in repo.open_leases(account):
        if now > _deadline(lease.leased_at, lease.last_step_at, lease.time_limit, lease.spent):
            ended += _expire(store, lease, now)
    return ended


def _expire(store: Store, lease: OpenLease, now: datetime) -> int:
    """End one leased run past its time (1), unless its agent answered in time after all (0)."""
    run = _static(store, lease.run_id)
    assert run is not None
    for _ in range(MAX_TRIES):
        steps, held, recorded = RemoteRepo(store).state(lease.run_id)
        if recorded or held is None or held.holder != lease.holder:
            return 0
        stepper = _stepper(store, run, steps)
        if stepper.done:  # already over: only its record is missing
            _record(store, run, stepper, held.holder)
            return 1
        last = max(steps[-1].created_at, held.leased_at) if steps else held.leased_at
        spent = sum(s.elapsed for s in steps)
        if now <= _deadline(held.leased_at, last, lease.time_limit, spent):
            _keep(store, run.run_id, steps, None, stepper, held)
            return 0  # it answered in time after all
        row = NewStep(len(steps) + 1, "expired", None, None, _digest("expired", None),
                      max(0.0, (now - last).total_seconds()))
        try:
            stepper = _take(store, run, len(steps), steps[-1].digest if steps else None, held, row, stepper)
        except Moved:
            continue
        return 1 if stepper.done else 0
    return 0


def _deadline(leased_at: datetime, last_step_at: datetime | None, time_limit: float, spent: float) -> datetime:
    """When a leased run's agent has overstayed: its last answer (or the lease) + the time it has left."""
    since = leased_at if last_step_at is None else max(last_step_at, leased_at)  # a released run's new lease
    return since + timedelta(seconds=max(0.0, time_limit - spent))
