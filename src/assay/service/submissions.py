"""Submissions: the server composes the whole batch, runs it, sweeps it, and stamps it once.

A submission is a batch (`batches.kind = 'submission'`, its id is the submission id) plus a
`submissions` row. The plan is every pinned scenario × `reps_per_scenario`, each run with its
own fork of the world and its own seed drawn here with `secrets` — the submitter chooses no run,
no seed and cannot drop one. Runs are executed and oracle-scored by the core batch machinery;
then the completion sweep (`service/completion.py`) evaluates each scenario's win conditions on the run's final state and
records its participation (assistant messages, actions) next to the floor in force. When every
planned run has been swept the submission is finalised: stamped with its measurement era, and
published if it asked to be, is complete, and its account holds a public handle.

`submit` is `compose` (every refusal, then the plan stored) followed by `execute` (the runs
played) and `complete`; the service composes alone for an agent that plays elsewhere (a remote
agent over the agent routes, `service.remote`) or later (the web app's background workers).

Whether it is complete, gated, ranked — every number — is read from the board views.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import sqlalchemy as sa

from assay import HARNESS_VERSION
from assay.agents.loader import AgentFactory
from assay.errors import Conflict, Forbidden, Invalid, NotFound
from assay.jsontypes import JsonArray, JsonObject
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits
from assay.run.executors import make_executor
from assay.service import accounts, exports, judgements, platform_config, releases
from assay.service.actors import (OPERATOR, Actor, may_see, prefix_owner, require_operator, require_owner,
                                  require_speaks_for)
from assay.service import board as boards
from assay.service.board import entry_numbers
from assay.service.completion import complete
from assay.service.execution import (FacilitatorRef, agent_row, execute_pending, facilitator_of, stored_agent,
                                     stored_scenarios, with_facilitator)
from assay.service.suites import SuiteBundle
from assay.scenario.load import LoadedScenario
from assay.stats.commitment import seed_commitment
from assay.scenario.rubric import Rubric
from assay.store.board_repo import BoardRepo
from assay.store.releases_repo import AnyRelease, ReleaseRow, ReleasesRepo
from assay.store.submissions_repo import NewSubmission, SubmissionExtras, SubmissionsRepo
from assay.store.db import Store
from assay.worlds.kits import get_kit
from assay.store.rows import NewBatch
from assay.store.runs_repo import RunsRepo

SEED_BOUND = 2**62
MAX_LABEL = 120


def plan_submission(bundle: SuiteBundle, reps: int) -> list[PlannedRun]:
    """Every pinned scenario × every rep, each with a fresh server-side seed."""
    planned: list[PlannedRun] = []
    for case in bundle.scenarios:
        for rep in range(1, reps + 1):
            planned.append(PlannedRun(uuid.uuid4().hex, len(planned), case.id, case.content_hash, rep,
                                      secrets.randbelow(SEED_BOUND)))
    return planned


def submit(
    store: Store,
    key: str,
    *,
    factory: AgentFactory,
    account: str,
    label: str,
    version: str | None = None,
    play_model: str | None = None,
    publish: bool = False,
    unlisted: bool = False,
    byok: bool = False,
    baseline: bool = False,
    workers: int = 4,
    limits: Limits | None = None,
    on_done: Callable[[RunRecord, bool], None] | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    on_created: Callable[[str, int], None] | None = None,
    facilitator: FacilitatorRef | None = None,
    rubric: Rubric | None = None,
    actor: Actor,
) -> str:
    """Create, run, sweep and finalise a submission; return its id. Every refusal comes first.

    `compose`, then `execute`: `on_created(id, n_planned)` is called once the submission and its
    plan are stored, before the first run; from then on a killed process leaves a submission that
    `resume` finishes.

    `actor` submits as `account`: the account itself, or the operator on its behalf; only the
    operator files an official baseline (and only for the suite owner)."""
    chosen = make_executor(executor, workers, factory, ray_address=ray_address)
    composed = _compose(store, key, factory=factory, account=account, label=label, version=version,
                        play_model=play_model, publish=publish, unlisted=unlisted, byok=byok, baseline=baseline, limits=limits,
                        facilitator=facilitator, rubric=rubric, actor=actor)
    if on_created is not None:
        on_created(composed.id, composed.n_planned)
    execute_pending(store, composed.id, factory, chosen, composed.limits, composed.scenarios, on_done)
    complete(store, composed.id)
    return composed.id


def compose(
    store: Store,
    key: str,
    *,
    factory: AgentFactory,
    account: str,
    label: str,
    version: str | None = None,
    play_model: str | None = None,
    publish: bool = False,
    unlisted: bool = False,
    byok: bool = False,
    baseline: bool = False,
    limits: Limits | None = None,
    facilitator: FacilitatorRef | None = None,
    rubric: Rubric | None = None,
    actor: Actor,
) -> str:
    """Compose a submission without playing it: every refusal (who may submit, the label, the
    suite as `actor` may see it, the handle, the cap), then the plan, the submission row and the
    agent row stored in one transaction. Returns its id; its runs are all pending.

    Who plays them is the agent row's business: `execute` (the server, for an agent it loads:
    `resume` does the same), or a remote agent over the agent routes (`service.remote`)."""
    return _compose(store, key, factory=factory, account=account, label=label, version=version,
                    play_model=play_model, publish=publish, unlisted=unlisted, byok=byok, baseline=baseline, limits=limits,
                    facilitator=facilitator, rubric=rubric, actor=actor).id


def execute(store: Store, submission_id: str, *, workers: int = 4, executor: str | None = None,
            on_done: Callable[[RunRecord, bool], None] | None = None) -> bool:
    """Play a composed submission's pending runs with the agent it was planned for (loaded again
    from its agent row, as `resume` loads it), then complete it. True when it is complete.

    Safe to call in several processes at once, and again after a restart: slots are claimed."""
    factory, limits = stored_agent(store, submission_id)
    chosen = make_executor(executor, workers, factory)
    execute_pending(store, submission_id, factory, chosen, limits,
                            stored_scenarios(store, submission_id), on_done)
    return complete(store, submission_id)


@dataclass(frozen=True)
class _Composed:
    id: str
    n_planned: int
    limits: Limits
    scenarios: dict[str, LoadedScenario]


def _require_sandboxed(factory: AgentFactory) -> None:
    """A submitted `python:` agent is played only in its bubblewrap sandbox: never in process
    (`--in-process` is for debugging), never in a plain subprocess (bwrap missing)."""
    isolation = getattr(factory, "isolation", "builtin")
    if isolation == "in_process":
        raise Invalid("an agent played in process (--in-process) can never be submitted; submit it sandboxed",
                      "agent")
    if isolation == "subprocess":
        from assay.agents import sandbox  # lazy: start-up cost

        raise Invalid(sandbox.missing_line("a submission"), "agent")


def _compose(
    store: Store,
    key: str,
    *,
    factory: AgentFactory,
    account: str,
    label: str,
    version: str | None,
    play_model: str | None,
    publish: bool,
    unlisted: bool,
    byok: bool,
    baseline: bool,
    limits: Limits | None,
    facilitator: FacilitatorRef | None = None,
    rubric: Rubric | None = None,
    actor: Actor,
) -> _Composed:
    """Every refusal, then the plan and its rows. A submission that brings its own facilitator
    (`{"spec": "openai:MODEL", "base_url": …}`) or its own rubric is bring-your-own: uncapped,
    its runs never ranked (`self_hosted_facilitator`). Only such a submission may be published
    `unlisted`: reachable by its submission id, never listed on the public board."""
    require_speaks_for(actor, account, "submit")
    _require_sandboxed(factory)
    if facilitator is not None or rubric is not None:
        byok = True
    if unlisted:
        if not byok:
            raise Invalid("only a bring-your-own submission (its own facilitator or rubric, or byok) may be "
                          "published unlisted; a platform entry is listed on the board", "unlisted")
        publish = True
    if baseline:
        require_operator(actor, "file an official baseline", "baseline")
    label = label.strip()
    if not label or len(label) > MAX_LABEL:
        raise Invalid(f"a label is 1 to {MAX_LABEL} characters", "label")
    if play_model is not None:
        play_model = play_model.strip() or None
        if play_model is not None and len(play_model) > 200:
            raise Invalid("a play model is at most 200 characters", "play_model")
    holder = accounts.get(store, account)
    if publish and holder.public_handle is None:
        raise Conflict(
            f"publishing needs a public handle on account '{account}'; set one with "
            f"`assay account set-handle {account} HANDLE`", "publish")
    repo = SubmissionsRepo(store)
    # Resolve without writing: a built-in not yet released is released only once every check passed.
    release = _stored_release(store, key, version)
    if release is not None and not may_see(actor, release):
        raise NotFound(f"no released suite '{key}'" + (f" version {version}" if version else ""),
                       "version" if version else "suite")
    pending: releases.PreparedRelease | None = None
    if release is None:
        pending = releases.builtin_prepared(key, version)
        if pending is None or (version is not None and pending.row["version"] != version):
            raise NotFound(f"no released suite '{key}'" + (f" version {version}" if version else ""),
                           "version" if version else "suite")
        owner = pending.row["owner"]
        bundle = pending.bundle
        reps = pending.row["reps_per_scenario"]
    else:
        owner = release["owner"]
        bundle = releases.pinned_bundle(store, release)
        reps = release["reps_per_scenario"]
    if baseline and account != owner:
        raise Forbidden(
            f"only the suite owner ({owner or 'none recorded'}) may submit an official baseline", "baseline")
    cap = platform_config.get(store, platform_config.SUBMISSION_CAP)["max_per_account_per_version"]
    capped = not (byok or baseline)
    if capped and release is not None:
        with repo.read() as conn:
            used = repo.count_submissions(conn, account, release["id"], capped_only=True)
        if used >= cap:
            raise _cap_refusal(account, key, release["version"], cap)
    from assay.agents.reference import check_fits

    check_fits(factory.spec, {s.scenario.kit for s in bundle.scenarios})
    _check_own_inputs(bundle, release if release is not None else pending.row,  # type: ignore[union-attr]
                      facilitator, rubric)
    if pending is not None:
        release, _ = releases.store_release(store, pending)
        bundle = releases.pinned_bundle(store, release)
    assert release is not None

    planned = plan_submission(bundle, reps)
    submission_id = uuid.uuid4().hex
    batch = NewBatch(
        id=submission_id, kind="submission", suite_key=release["suite_key"],
        suite_version=release["version"], agent_spec=factory.spec, agent_label=label,
        config_signature=factory.config_signature, harness_version=HARNESS_VERSION,
        # every run has its own seed (planned_runs.seed); there is no batch-wide seed
        trials=reps, base_seed=0,
    )
    row: NewSubmission = {
        "id": submission_id, "account": account, "release_id": release["id"], "label": label,
        "play_model": play_model, "byok": byok, "baseline": baseline, "publish_requested": publish,
    }

    def check_cap(conn: sa.Connection) -> None:
        if capped and repo.count_submissions(conn, account, release["id"], capped_only=True) >= cap:
            raise _cap_refusal(account, key, release["version"], cap)

    limits = limits or Limits()
    extras = SubmissionExtras(
        rubric_hash=rubric.content_hash() if rubric is not None else None,
        rubric=rubric.document() if rubric is not None else None,
        unlisted=unlisted,
        facilitator_spec=facilitator["spec"] if facilitator is not None else None,
        facilitator_base_url=facilitator.get("base_url") if facilitator is not None else None,
    )
    repo.create_submission(batch, planned, row, ranked_eligible=not byok, capped=check_cap,
                           agent=agent_row(factory, limits), extras=extras)
    scenarios = {s.content_hash: s for s in bundle.scenarios}
    return _Composed(submission_id, len(planned), limits,
                     with_facilitator(scenarios, facilitator_of(store, submission_id)))


def _check_own_inputs(bundle: SuiteBundle, release: AnyRelease, facilitator: FacilitatorRef | None,
                      rubric: Rubric | None) -> None:
    """Refuse a facilitator for a suite with nobody to facilitate, a rubric for a suite its judge
    does not score, and a rubric the rules judge cannot read."""
    worded = [s for s in bundle.scenarios if get_kit(s.scenario.kit).worded]
    if facilitator is not None and not worded:
        raise Invalid(f"suite {release['suite_key']} has no facilitator to replace (its worlds have none)",
                      "facilitator")
    if rubric is not None:
        if release.get("rubric") is None:
            raise Invalid(f"suite {release['suite_key']} is scored by its checks alone; a rubric replaces a trait "
                          "suite's own", "rubric")
        judge = (release.get("judge") or {}).get("model", "rules")
        if judge == "rules" and rubric.without_evidence():
            raise Invalid(f"the rules judge needs evidence for every trait; none for "
                          f"{', '.join(rubric.without_evidence())}", "rubric")


def _stored_release(store: Store, key: str, version: str | None) -> ReleaseRow | None:
    found = ReleasesRepo(store).releases(key)
    if version is not None:
        return next((r for r in found if r["version"] == version), None)
    latest = max(found, key=lambda r: releases.version_key(r["version"])) if found else None
    builtin = releases.builtin_prepared(key)
    if builtin is not None and not any(r["version"] == builtin.row["version"] for r in found):
        if latest is None or releases.version_key(builtin.row["version"]) > releases.version_key(latest["version"]):
            return None  # the built-in's current version is released on this first use
    return latest


def _cap_refusal(account: str, key: str, version: str, cap: int) -> Conflict:
    return Conflict(
        f"account '{account}' already has {cap} submission(s) to {key} {version}, the most allowed per "
        f"suite version (platform config '{platform_config.SUBMISSION_CAP}')", "account")


# -- owner operations -------------------------------------------------------------------------


def find(store: Store, ident: str, *, actor: Actor = OPERATOR) -> str | None:
    """The submission id `ident` names (an id, or a unique prefix of one `actor` may see), or None."""
    return SubmissionsRepo(store).resolve_submission_id(ident, prefix_owner(actor))


def _require(store: Store, ident: str, actor: Actor) -> str:
    """The submission `ident` names, if `actor` may see its owner view (others: no such submission)."""
    found = find(store, ident, actor=actor)
    if found is None:
        raise NotFound("no such submission", "submission", value=ident)
    submission = SubmissionsRepo(store).submission(found)
    assert submission is not None
    require_owner(actor, submission["account"], "submission", ident, "submission")
    return found


def unpublish(store: Store, ident: str, *, actor: Actor) -> JsonObject:
    """Take a published (or to-be-published) entry off the board: its owner, or the operator."""
    submission_id = _require(store, ident, actor)
    repo = SubmissionsRepo(store)

    def check(conn: sa.Connection) -> None:
        facts = repo.submission_info(submission_id, conn)
        assert facts is not None
        pending = facts["publish_requested"] and not facts["finalised"]
        if not facts["published"] and not pending:
            raise Conflict("the submission is not published", "submission", value=submission_id)

    # An unpublication before completion also stops the automatic publication (any event does).
    repo.add_publication_event(submission_id, False, "unpublished by its owner", check)
    return results(store, submission_id, actor=actor)


def note(store: Store, ident: str, text: str, *, actor: Actor) -> JsonObject:
    """Set the operator's variance note on an entry (an empty text withdraws it)."""
    require_operator(actor, "file a variance note", "note")
    submission_id = _require(store, ident, actor)
    text = text.strip()
    if len(text) > 2000:
        raise Invalid("a variance note is at most 2000 characters", "note")
    SubmissionsRepo(store).add_note(submission_id, text)
    return results(store, submission_id, actor=actor)


def results(store: Store, ident: str, *, actor: Actor) -> JsonObject:
    """The owner's view of a submission: status, class, aggregates and every run with its seed.
    Only the owner (and the operator) sees it; to anyone else the submission does not exist.

    The document as it is printed (`assay submit --json`) and served (the API's closed `OwnerView`
    model validates it): a trait suite's runs carry `traits` and the view its trait figures, other
    suites' have neither key, a shape a fixed-field model would not keep."""
    submission_id = _require(store, ident, actor)
    facts = boards.submission_facts(store, submission_id)
    assert facts is not None
    release = ReleasesRepo(store).release_by_id(facts["release_id"])
    assert release is not None
    runs = BoardRepo(store).run_facts(submission_id)
    models: JsonArray = [*sorted({r["facilitator_model"] for r in runs if r["facilitator_model"] is not None})]
    # a trait suite's owner view: per run its traits {mean, variance, passes}, and the figures
    figures = judgements.trait_figures(store, submission_id)
    judged = judgements.judgements(store, submission_id) if figures else {}
    batch = RunsRepo(store).batch(submission_id)
    listed = boards.listed_entry(store, submission_id)
    salts = exports.seed_salts(store, submission_id)  # with the seeds: the owner may open each commitment
    reasons = {r.run_id: r.reason for r in RunsRepo(store).runs_for_batch(submission_id, bodies=False)
               if r.status not in (None, "completed")}  # why a run did not complete
    return {
        "id": submission_id,
        "suite": {"key": release["suite_key"], "version": release["version"],
                  "release_hash": release["release_hash"]},
        "account": facts["account"],
        "agent": {"spec": batch.agent_spec if batch else None, "label": facts["label"], "label_self_declared": True,
                  "config_signature": batch.config_signature if batch else None},
        "harness_version": batch.harness_version if batch else None,
        "play_model": facts["play_model"],
        "model_provenance": facts["model_provenance"],
        "byok": facts["byok"],
        "baseline": facts["baseline"],
        "status": facts["status"],
        "leaderboard_class": facts["leaderboard_class"],
        "publish_requested": facts["publish_requested"],
        "published": facts["published"],
        "listed": facts["listed"],
        "on_board": listed is not None,
        "public_handle": facts["public_handle"],
        "rank": boards.rank_of(store, listed),
        **entry_numbers(facts),
        "n_planned": facts["n_planned"],
        "n_recorded": facts["n_recorded"],
        "n_scored": facts["n_scored"],
        "n_gated": facts["n_gated"],
        "measurement_era": facts["measurement_era"],
        "measurement_era_is_current": facts["measurement_era_is_current"],
        "finalised": facts["finalised"],
        "digest": exports.digests(store, [submission_id]).get(submission_id),
        "variance_note": facts["variance_note"],
        "facilitator_models": models,
        "pinned_facilitator_model": release["facilitator_model"],
        "created_at": facts["created_at"].isoformat(),
        "runs": [
            {
                "run_id": r["run_id"],
                "scenario": r["case_id"],
                "rep": r["rep"],
                "seed": r["seed"],
                "seed_salt": salts.get(r["run_id"]),
                "seed_commitment": seed_commitment(r["seed"], salts[r["run_id"]]) if r["run_id"] in salts else None,
                "status": r["status"] or "pending",
                "reason": reasons.get(r["run_id"]),
                "scored": r["scored"],
                "participation_gated": r["gated"],
                "score": r["score"] if r["has_run"] else None,
                "passed": r["passed"],
                "claimed_success": r["claimed_success"],
                "false_success": r["false_success"],
                "win_conditions_met": r["win_met"],
                "win_conditions_total": r["win_total"],
                "player_messages": r["player_messages"],
                "actions": r["actions"],
                **({"traits": cast(JsonObject, judged[r["run_id"]].traits_view()) if r["run_id"] in judged else None}
                   if figures else {}),
            }
            for r in runs
        ],
        **{k: v for k, v in figures.items() if k != "composite_by_case"},
    }
