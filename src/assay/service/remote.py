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
request). The server keeps no run in memory: every step is appended to `remote_steps` under a
lock on its run before it is applied, and the run is a fresh fork of its world fed its recorded
steps in order. So a restarted server (or another worker) goes on where the run was, a retried
step (the same index and the same message) is answered again and never applied twice, and a
different message for a taken index is refused. When the run ends it is recorded, oracle-scored
and swept like any other (`execution.RunWriter`, `completion.complete`); the submission completes with
its last run.

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
from datetime import datetime, timedelta
from typing import Any

from assay.agents.loader import AgentFactory
from assay.errors import Conflict, Forbidden, NotFound
from assay.records import PlannedRun, storable
from assay.run.drivers import Stepper
from assay.run.engine import Limits, open_episode
from assay.scenario.load import LoadedScenario
from assay.service import completion, execution
from assay.service.actors import Actor, require_agent_of
from assay.store.claims import ClaimRepo
from assay.store.remote_repo import REMOTE_SPEC, RemoteRepo
from assay.store.repo import Store
from assay.store.schema import utcnow

REMOTE = execution.REMOTE_AGENT
log = logging.getLogger("assay.service")
assert REMOTE == REMOTE_SPEC
#: What a run id looks like (`uuid4().hex`); anything else names no run, and is never sent to the database.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: How deep an agent's answer may nest before the rest of it is dropped (a message nests 4 deep).
MAX_DEPTH = 32
#: The longest failure reason a remote agent may report (the run record keeps 500 characters).
MAX_FAILURE = 500


def remote_factory() -> AgentFactory:
    """The agent of a submission a remote agent plays: stored as `remote`, loaded by nobody here.

    Its configuration signature says only that: the server cannot vouch for what plays remotely
    (the label and the play model are the submitter's own words)."""
    return AgentFactory(REMOTE, _plays_elsewhere, {"kind": "remote"}, portable_spec=REMOTE)


def _plays_elsewhere() -> Any:
    raise RuntimeError("a remote agent plays over the agent API, never in the server's process")


# -- the run as its steps say -------------------------------------------------------------------

_SCENARIOS: OrderedDict[str, LoadedScenario] = OrderedDict()
_SCENARIOS_MAX = 64
_SCENARIOS_GUARD = threading.Lock()


def _scenario(content_hash: str, document: dict[str, Any], case_id: str) -> LoadedScenario:
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


def _limits(run: dict[str, Any]) -> Limits:
    return Limits(turn_limit=run["turn_limit"], time_limit=run["time_limit"])


def _planned(run: dict[str, Any]) -> PlannedRun:
    return PlannedRun(run["run_id"], run["slot"], run["case_id"], run["scenario_hash"], run["trial"], run["seed"])


def _replay(store: Store, run: dict[str, Any], steps: list[dict[str, Any]]) -> Stepper:
    """A fresh fork of the run's world, fed its recorded steps in order (those after its end are
    ignored: nothing can follow the end of a run)."""
    loaded = _worded(store, run, _scenario(run["scenario_hash"], run["document"], run["case_id"]))
    stepper = Stepper(open_episode(loaded, _planned(run), _limits(run)))
    for row in steps:
        if stepper.done:
            break
        if row["kind"] == "message":
            stepper.send((row["reply"] or {}).get("message"), row["elapsed"])
        elif row["kind"] == "failed":
            stepper.fail(row["reason"] or "", row["elapsed"])
        else:
            stepper.expire()
    return stepper


def _worded(store: Store, run: dict[str, Any], loaded: LoadedScenario) -> LoadedScenario:
    """The scenario as this run's world is worded: by its batch's model facilitator, if it has one,
    taken up where the run was. The lines the run has spoken are kept in `remote_lines` as they are
    first spoken, and said again at every later replay, so the model is asked for each line once."""
    from assay.worlds.kits import get_kit

    kit = get_kit(loaded.scenario.kit)
    facilitator = execution.facilitator_of(store, run["batch_id"]) if kit.worded else None
    if facilitator is None:
        return loaded
    repo, run_id, spec = RemoteRepo(store), run["run_id"], str(facilitator["spec"])
    options = kit.resume_options(facilitator, repo.lines(run_id), lambda seq, line: repo.keep_line(run_id, seq, spec, line))
    return dataclasses.replace(loaded, world_options=options)


def _finish(store: Store, run: dict[str, Any], stepper: Stepper) -> None:
    """Record a run that is over (scored by its checks, once: a run already recorded is kept as it
    was), end its lease, and complete its submission if this was its last run."""
    assert stepper.record is not None
    repo = RemoteRepo(store)
    if not store.recorded([run["run_id"]]):
        loaded = _scenario(run["scenario_hash"], run["document"], run["case_id"])
        writer = execution.RunWriter(store, [loaded])
        try:
            writer(stepper.record, stepper.episode.steps)
        finally:
            writer.close()
    lease = repo.lease(run["run_id"])
    if lease is not None:
        repo.end_holder(lease["holder"])
    try:
        completion.complete(store, run["batch_id"])
    except Exception as exc:  # noqa: BLE001 - the run is recorded: its answer stands
        # finishing the submission is idempotent; the sweeper (`completion.complete_recorded`) does it
        # again until it is done, so the agent is not told its recorded step failed
        log.warning("submission %s: completion deferred to the sweeper: %s: %s", run["batch_id"],
                    type(exc).__name__, exc)


def _run(store: Store, run_id: str, actor: Actor) -> dict[str, Any]:
    """The remote run `run_id`, if `actor` may play it; otherwise it does not exist."""
    run = RemoteRepo(store).run(run_id) if isinstance(run_id, str) and _RUN_ID.match(run_id) else None
    if run is None or run["load_spec"] != REMOTE:
        raise NotFound("no such run", "run", value=run_id)
    require_agent_of(actor, run["account"], run_id)
    return run


def _agent_account(actor: Actor) -> str:
    if actor.kind != "agent" or actor.account is None:
        raise Forbidden(f"only an agent of an account plays remote runs; {actor.describe()} does not", "run")
    return actor.account


# -- leasing ------------------------------------------------------------------------------------


def next_run(store: Store, *, actor: Actor) -> dict[str, Any] | None:
    """Lease the next pending run of the account's remote submissions to the caller, or None when
    none is pending. Runs its account left idle past their time end first (`expire_idle`).

    The answer is made before the run is leased, and the lease (holder and claim) is one
    transaction, the last thing done: a fault anywhere before it leaves the run pending for the
    next request, never leased to an agent that was not told."""
    account = _agent_account(actor)
    expire_idle(store, account=account)
    repo, claims = RemoteRepo(store), ClaimRepo(store)
    for submission_id in repo.open_submissions(account):
        cursor = -1
        while cursor is not None:
            free, after = claims.free(submission_id, 1, cursor)
            cursor = None if after == -1 else after
            if not free:
                continue
            run_id, attempt = free[0]
            run = repo.run(run_id)
            assert run is not None
            # a run an agent released (`release`) goes on where it was: its steps are replayed
            stepper = _replay(store, run, repo.steps(run_id))
            view = None if stepper.done else _lease_view(store, run, stepper)
            if repo.take_lease(run_id, attempt) is None:
                continue  # another agent leased it meanwhile: look further
            if view is None:  # its world could not open: recorded as the harness's `error`
                _finish(store, run, stepper)
                continue
            return view
    return None


def _lease_view(store: Store, run: dict[str, Any], stepper: Stepper) -> dict[str, Any]:
    """The lease's answer, made before the run is leased: `pending` counts the runs left after it."""
    assert stepper.turn is not None
    limits = _limits(run)
    pending = sum(ClaimRepo(store).n_pending(s) for s in RemoteRepo(store).open_submissions(run["account"]))
    return {
        "run_id": run["run_id"],
        "submission_id": run["batch_id"],
        "scenario": {"id": run["case_id"], "title": run["title"], "briefing": run["document"]["briefing"]},
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


def step(store: Store, run_id: str, message: Any = None, *, actor: Actor, index: int | None = None,
         failure: str | None = None, now: datetime | None = None,
         answered_at: tuple[int, datetime] | None = None) -> dict[str, Any]:
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
        kind, reply, reason = "message", {"message": _json_value(message)}, None
        digest = _digest(kind, reply)
    answered: dict[str, int | None] = {}

    def decide(_conn: Any, steps: list[dict[str, Any]], lease: dict[str, Any] | None,
               recorded: bool) -> dict[str, Any] | None:
        n = len(steps)
        if index is not None and 1 <= index <= n:
            taken = steps[index - 1]
            if taken["digest"] != digest and taken["kind"] != "expired":
                raise Conflict(f"step {index} of this run was already taken with another message", "step",
                               value=run_id)
            answered["step"] = index
            return None
        if recorded or (steps and steps[-1]["kind"] != "message"):
            answered["step"] = None  # the run is over
            return None
        if lease is None:
            raise Conflict("this run is not leased; ask for work with POST /api/agent/runs/next", "run", value=run_id)
        if index is not None and index != n + 1:
            raise Conflict(f"this run's next step is {n + 1}, not {index}", "step", value=run_id)
        previous = max(steps[-1]["created_at"], lease["leased_at"]) if steps else lease["leased_at"]
        if answered_at is not None and answered_at[0] == n:
            previous = max(previous, answered_at[1])
        answered["step"] = n + 1
        return {"step": n + 1, "kind": kind, "reply": reply, "reason": reason, "digest": digest,
                "elapsed": max(0.0, (arrival - previous).total_seconds())}

    steps = RemoteRepo(store).take_step(run_id, decide)
    stepper = _replay(store, run, steps)
    if stepper.done and run["recorded_status"] is None:
        _finish(store, run, stepper)
    return _answer(store, run, stepper, answered.get("step"))


def _answer(store: Store, run: dict[str, Any], stepper: Stepper, index: int | None) -> dict[str, Any]:
    played = len(stepper.marks) - 1  # the answers the run took before it ended (or so far)
    if stepper.done:
        assert stepper.record is not None
        status: str = stepper.record.status
    else:
        status = "running"
    if index is None or index > played:  # the run was over before this answer
        if not stepper.done:  # pragma: no cover - a remote run is only ever recorded from its steps
            recorded = RemoteRepo(store).run(run["run_id"])
            status = (recorded or {}).get("recorded_status") or status
        return {"run_id": run["run_id"], "step": index, "messages": [], "done": True, "status": status,
                "reason": _reason(stepper)}
    return {"run_id": run["run_id"], "step": index, "messages": stepper.after(index), "done": stepper.done,
            "status": status, "reason": _reason(stepper)}


def _reason(stepper: Stepper) -> str | None:
    """Why a run that is over did not complete (the player is told, as the owner is), else None."""
    record = stepper.record if stepper.done else None
    return None if record is None or record.status == "completed" else record.reason


# -- handing a run back -------------------------------------------------------------------------


def release(store: Store, run_id: str, *, actor: Actor) -> dict[str, Any]:
    """The agent hands its leased run back (it stopped: Ctrl-C): the lease ends and nothing is
    recorded or charged, so the run is pending again at once. The next lease of it goes on where it
    was (its steps so far are replayed; the time it lay released is nobody's). Returns `{run_id,
    released, step}`: whether a lease was ended, and the number of the run's next answer. A run
    not leased (already released, or over) is answered `released: false`."""
    run = _run(store, run_id, actor)
    repo = RemoteRepo(store)
    lease = repo.lease(run_id) if run["recorded_status"] is None else None
    if lease is not None:
        repo.end_holder(lease["holder"])
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
        if now <= _deadline(lease["leased_at"], lease["last_step_at"], lease["time_limit"], lease["spent"]):
            continue
        expired: dict[str, bool] = {}

        def decide(_conn: Any, steps: list[dict[str, Any]], held: dict[str, Any] | None, recorded: bool,
                   lease: dict[str, Any] = lease) -> dict[str, Any] | None:
            if recorded or held is None or held["holder"] != lease["holder"]:
                return None
            if steps and steps[-1]["kind"] != "message":
                expired["yes"] = True  # already over: only its record is missing
                return None
            last = max(steps[-1]["created_at"], held["leased_at"]) if steps else held["leased_at"]
            spent = sum(s["elapsed"] for s in steps)
            if now <= _deadline(held["leased_at"], last, lease["time_limit"], spent):
                return None  # it answered in time after all
            expired["yes"] = True
            return {"step": len(steps) + 1, "kind": "expired", "reply": None, "reason": None,
                    "digest": _digest("expired", None), "elapsed": max(0.0, (now - last).total_seconds())}

        steps = repo.take_step(lease["run_id"], decide)
        if not expired:
            continue
        run = repo.run(lease["run_id"])
        assert run is not None
        stepper = _replay(store, run, steps)
        if stepper.done:
            _finish(store, run, stepper)
            ended += 1
    return ended


def _deadline(leased_at: datetime, last_step_at: datetime | None, time_limit: float, spent: float) -> datetime:
    """When a leased run's agent has overstayed: its last answer (or the lease) + the time it has left."""
    since = leased_at if last_step_at is None else max(last_step_at, leased_at)  # a released run's new lease
    return since + timedelta(seconds=max(0.0, time_limit - spent))
