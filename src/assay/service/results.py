"""Results, debriefs and replays — all computed from what is stored, never from memory.

A run's score, pass and false success are its verdict row's (`run_verdicts`, written by the scorer
when the run was recorded): nothing here applies the pass rule again. The statistics are
`stats.trials`', over the planned runs minus the participation-gated ones, the board's denominator
(a submission's runs are gated by its completion sweep, read from the board views; a run batch
has no sweep, so nothing in it is gated). A replay re-applies the recorded actions and compares the
final state's hash, which is what decides every check; it scores nothing, by design.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from assay.errors import NotFound
from assay.jsontypes import JsonObject
from assay.service.actors import Actor, prefix_owner, require_owner
from assay.service import usage
from assay.records import (AgentRef, BatchResults, CaseResult, CheckResult, Debrief, DebriefCheck, PlannedRun,
                           ReplayReport, SuiteRef, Summary, TrialResult, legacy_actions)
from assay.run.drivers import replay as replay_actions
from assay.run.engine import Episode, Limits, fork_world
from assay.canonical import canonical_hash
from assay.scenario.load import parse_scenario
from assay.scenario.predicates import PREDICATE, missing_paths
from assay.worlds.kits import get_kit
from assay.stats.trials import TrialOutcome, consistent, pass_rate, summary
from assay.store.db import Store
from assay.store.rows import Batch, StoredRun
from assay.store.runs_repo import RunsRepo


@dataclass(frozen=True, slots=True)
class _CaseHead:
    """A case of the results JSON, as its first planned run names it."""

    case_id: str
    hash: str
    title: str | None
    frozen_on: str | None


class _DocumentCheck(TypedDict):
    """A check of a stored scenario document, the keys a debrief reads."""

    id: str
    weight: int
    safety: bool
    description: str
    expect: JsonObject


class _Document(TypedDict):
    """A stored scenario document, the keys a debrief reads: the shape `scenario.Scenario` held it
    to when it was stored (a TypedDict: a view of the stored JSON, read as it is)."""

    title: str
    hidden_truth: str
    checks: list[_DocumentCheck]


@dataclass(frozen=True, slots=True)
class _Judged:
    """A debrief's judge view of its run: its `traits` and why it has no judge score (`unjudged`)."""

    traits: dict[str, JsonObject] | None = None
    unjudged: str | None = None


def trial_view(row: StoredRun, usage: JsonObject | None = None) -> TrialResult:
    """One planned run as the results JSON shows it, its verdict read from its verdict row. A slot
    with no run has no verdict: a failed `error` trial. `usage`: the run's, when the view shows it."""
    v = row.verdict
    return TrialResult(
        run_id=row.run_id, trial=row.trial, seed=row.seed, status=row.status or "error",
        recorded=bool(row.status),
        reason=row.reason if row.status else "no run was recorded for this planned slot",
        score=v.score if v else 0, passed=v.passed if v else False,
        # which safety checks failed: the recorded outcomes', in check order (the verdict counts them)
        safety_failures=[c.check_id for c in row.checks if c.safety and not c.passed],
        claimed_success=row.claimed_success, false_success=v.false_success if v else False,
        final_state_hash=row.final_state_hash,
        turns=row.turns or 0,
        checks=[CheckResult(id=c.check_id, weight=c.weight, safety=c.safety, passed=c.passed) for c in row.checks],
        usage=usage,
    )


def batch_results(store: Store, batch_id: str, *, actor: Actor) -> BatchResults:
    """A batch and every planned run of it, from what is stored (the results JSON contract).
    `batch_id` may be a unique prefix, as everywhere an id is typed."""
    batch_id = RunsRepo(store).resolve_batch_id(batch_id, prefix_owner(actor)) or batch_id
    batch = RunsRepo(store).batch(batch_id)
    if batch is None:
        raise NotFound("no such batch", "batch", value=batch_id)
    _require_owner(store, actor, batch, batch_id, "batch")
    rows = RunsRepo(store).runs_for_batch(batch_id, bodies=False)
    gated = _gated(store, batch_id) if batch.kind == "submission" else set()
    heads: dict[str, _CaseHead] = {}
    trials: dict[str, list[TrialResult]] = {}
    batch_usage, run_usage = usage.batch_usage(store, batch_id, [row.run_id for row in rows])
    for row in rows:
        if row.case_id not in heads:
            scen = RunsRepo(store).scenario_by_hash(row.scenario_hash)
            heads[row.case_id] = _CaseHead(row.case_id, row.scenario_hash, scen.title if scen else None,
                                           scen.frozen_on if scen else None)
            trials[row.case_id] = []
        trials[row.case_id].append(trial_view(row, run_usage.get(row.run_id)))
    outcomes = {cid: [TrialOutcome(t.passed, t.false_success, t.run_id in gated) for t in ts]
                for cid, ts in trials.items()}
    cases = [CaseResult(case_id=heads[cid].case_id, hash=heads[cid].hash, title=heads[cid].title,
                        frozen_on=heads[cid].frozen_on, trials=ts, consistent=consistent(outcomes[cid]),
                        pass_rate=pass_rate({cid: outcomes[cid]}))
             for cid, ts in trials.items()]
    return BatchResults(
        batch_id=batch_id,
        suite=SuiteRef(key=batch.suite_key, version=batch.suite_version,
                       scenario_hashes={c.case_id: c.hash for c in cases}),
        agent=AgentRef(spec=batch.agent_spec, label=batch.agent_label, config_signature=batch.config_signature),
        harness_version=batch.harness_version, trials_per_case=batch.trials, seed=batch.base_seed,
        created_at=_iso(batch.created_at), cases=cases, summary=Summary(**summary(outcomes)),
        usage=batch_usage,
    )


def _gated(store: Store, submission_id: str) -> set[str]:
    """The submission's participation-gated runs, as the board decides them (`board_run_facts`)."""
    from assay.store.board_repo import BoardRepo  # lazy: start-up cost (a run batch has no gate)

    return {r["run_id"] for r in BoardRepo(store).run_facts(submission_id) if r["gated"]}


def results_json(store: Store, batch_id: str, *, actor: Actor) -> JsonObject:
    """`batch_results` as the JSON document the CLI prints and writes."""
    return batch_results(store, batch_id, actor=actor).as_json()


def _require_owner(store: Store, actor: Actor, batch: Batch | None, ident: str, noun: str) -> None:
    """Seeds, hidden truths and transcripts are for the owner of the batch (and the operator)."""
    if actor.is_staff and actor.kind == "operator":
        return
    from assay.service.batches import owner_of  # lazy: start-up cost (the operator's `assay run` never asks)

    require_owner(actor, owner_of(store, batch) if batch is not None else None, noun, ident, noun)


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _stored_run(store: Store, run_id: str, actor: Actor) -> StoredRun:
    run = RunsRepo(store).run(run_id, prefix_owner(actor))
    if run is None:
        raise NotFound("no such run", "run", value=run_id)
    _require_owner(store, actor, RunsRepo(store).batch(run.batch_id), run_id, "run")
    if not run.status:
        raise NotFound("this planned run never produced a record", "run", value=run_id)
    return run


def debrief(store: Store, run_id: str, *, actor: Actor) -> JsonObject:
    """Everything about one run, the hidden truth included: for after the run, never during it."""
    return debrief_view(store, run_id, actor=actor).as_json()


def _not_found(expect: JsonObject, final_state: JsonObject | None) -> list[str]:
    """The paths a check reads that name nothing in the run's final state (none when it has none)."""
    return [] if final_state is None else missing_paths(PREDICATE.validate_python(expect), final_state)


def debrief_view(store: Store, run_id: str, *, actor: Actor) -> Debrief:
    run = _stored_run(store, run_id, actor)
    assert run.scenario is not None and run.final_state_hash is not None  # `RunsRepo.run` joins it; the run is recorded
    doc = cast(_Document, run.scenario.document)
    outcome = {c.check_id: c for c in run.checks}
    view = trial_view(run)
    events = run.events
    judged = _judged(store, run)
    return Debrief(
        run_id=run.run_id, case_id=run.case_id, title=doc["title"], scenario_hash=run.scenario_hash,
        trial=run.trial, seed=run.seed, status=view.status, reason=run.reason,
        hidden_truth=doc["hidden_truth"],
        checks=[DebriefCheck(id=c["id"], weight=c["weight"], safety=c["safety"], description=c["description"],
                             passed=outcome[c["id"]].passed if c["id"] in outcome else False,
                             not_found=_not_found(c["expect"], run.final_state))
                for c in doc["checks"]],
        score=view.score, passed=view.passed, safety_failures=view.safety_failures,
        claimed_success=run.claimed_success, claim_summary=run.claim_summary,
        false_success=view.false_success, final_state_hash=run.final_state_hash,
        transcript=events, rolls=[dict(e.get("data") or {}) for e in events if e.get("source") == "dice"],
        beats=[{**(e.get("data") or {}), "line": e.get("content")} for e in events
               if e.get("source") == "facilitator" and e.get("role") == "user"],
        traits=judged.traits, unjudged=judged.unjudged,
    )


def _judged(store: Store, run: StoredRun) -> _Judged:
    """The judge's view of a run of a trait suite's submission (`traits`), and why it has no judge
    score when it has none (`unjudged`); nothing for any other run."""
    from assay.service.judgements import judgements, needs_judging, why_unscored  # lazy: start-up cost

    batch = RunsRepo(store).batch(run.batch_id)
    if batch is None or batch.kind != "submission" or not needs_judging(store, run.batch_id):
        return _Judged()
    judged = judgements(store, run.batch_id).get(run.run_id)
    if judged is None:
        return _Judged()
    return _Judged(judged.traits_view(), None if judged.scored else why_unscored(judged))


def _diff(a: Any, b: Any, path: str = "", out: list[str] | None = None, limit: int = 20) -> list[str]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                out.append(f"{p}: {'only in the stored run' if k in a else 'only in the replay'}")
            else:
                _diff(a[k], b[k], p, out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: stored {a!r:.60} ≠ replayed {b!r:.60}")
    return out


def replay(store: Store, run_id: str, *, actor: Actor) -> JsonObject:
    """Rebuild the world from the pinned scenario and seed, re-apply the recorded actions, compare."""
    return replay_view(store, run_id, actor=actor).as_json()


def replay_view(store: Store, run_id: str, *, actor: Actor) -> ReplayReport:
    run = _stored_run(store, run_id, actor)
    scen = run.scenario
    assert scen is not None and run.final_state_hash is not None  # `RunsRepo.run` joins it; the run is recorded
    loaded = parse_scenario(scen.document, f"stored scenario {run.case_id} v{scen.version}", get_kit)
    replaying = get_kit(loaded.scenario.kit).replay_options(run.events)
    if replaying is not None:  # a facilitator's recorded words are said again, never asked anew
        loaded = dataclasses.replace(loaded, world_options=replaying)
    world_same = loaded.world_fingerprint == scen.world_fingerprint
    planned = PlannedRun(run.run_id, run.slot, run.case_id, run.scenario_hash, run.trial, run.seed)
    actions = legacy_actions(run.actions or [])
    # the same engine the run was played on, fed the replies it recorded, with no budget to run out
    episode = Episode(planned, fork_world(loaded, run.seed, run.trial), Limits(len(actions) + 1, float("inf")))
    world = replay_actions(episode, actions).world
    replayed_hash = canonical_hash(world.state())
    identical = replayed_hash == run.final_state_hash
    return ReplayReport(
        run_id=run.run_id, case_id=run.case_id, scenario_hash=run.scenario_hash, actions=len(actions),
        stored_final_state_hash=run.final_state_hash, replayed_final_state_hash=replayed_hash,
        identical=identical, world_fingerprint_matches=world_same,
        differences=[] if identical else _diff(run.final_state, world.state()),
    )
