"""Completion: once every planned slot of a batch is recorded, finish it — a run batch gets its
completion row; a submission is swept (each run's win conditions evaluated on its final state, its
participation recorded next to the floor in force) and, once every planned run is swept, finalised:
stamped with its measurement era and its digest, published if it asked to be, and its board figures
refreshed.

    complete(store, batch_id)            # idempotent: each step only adds what is missing
    complete_recorded(store)             # the sweeper: every batch recorded but never completed

This layer sits on execution (`service/execution.py`) and on the projections it keeps current
(`board` figures, `exports` digests, `judgements`); the use cases above (runs, submissions,
scoring, remote play) call it, and it calls none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

import sqlalchemy as sa

from assay.errors import NotFound
from assay.jsontypes import JsonObject
from assay.records import legacy_actions, transcript_events
from assay.scenario.models import Scenario
from assay.scenario.predicates import holds
from assay.service.execution import stopped
from assay.store.config_repo import ConfigRepo
from assay.store.submissions_repo import SubmissionsRepo, Sweep, WinOutcome
from assay.store.faults import is_fault
from assay.store.repo import Store
from assay.worlds.kits import get_kit
from assay.store.runs_repo import RunsRepo

#: The facilitator recorded for runs of a BYOK submission: the submitter's own, unverified.
SELF_HOSTED = "self_hosted"


def participation(kit: str, transcript: list[JsonObject], actions: list[JsonObject]) -> tuple[int, int]:
    """(player messages, actions) of a run, counted as its world kit counts them (any record version)."""
    return get_kit(kit).participation(transcript_events(transcript), legacy_actions(actions))


def complete_submission(store: Store, submission_id: str) -> None:
    """Sweep every recorded, unswept run; finalise the submission once all planned runs are swept.

    Safe to call again at any time (a later sweep only adds what is missing; the era stamp and the
    automatic publication happen once).
    """
    # lazy: start-up cost; a run batch (`assay run`, the CLI's hot path) never gets here
    from assay.service import board as boards
    from assay.service import exports, platform_config
    from assay.service.judgements import submission_and_release

    repo = SubmissionsRepo(store)
    submission, release = submission_and_release(store, submission_id)
    floor = platform_config.get(store, platform_config.PARTICIPATION)
    facilitator = SELF_HOSTED if submission["byok"] else release["facilitator_model"]
    documents: dict[str, Scenario] = {}
    sweeps: list[Sweep] = []
    outcomes: list[WinOutcome] = []
    for run in repo.unswept_runs(submission_id):
        scenario = documents.get(run["scenario_hash"])
        if scenario is None:
            stored = RunsRepo(store).scenario_by_hash(run["scenario_hash"])
            assert stored is not None
            scenario = documents[run["scenario_hash"]] = Scenario.model_validate(stored.document)
        messages, n_actions = participation(scenario.kit, run["transcript"], run["actions"])
        kit = get_kit(scenario.kit)
        kit_messages, kit_per_turn = kit.participation_floor
        observed = kit.observed_facilitators(transcript_events(run["transcript"]))
        sweeps.append(Sweep(
            run_id=run["run_id"], submission_id=submission_id, player_messages=messages,
            actions=n_actions, min_player_messages=max(floor["min_player_messages"], kit_messages),
            min_actions_per_turn=max(float(floor["min_actions_per_turn"]), kit_per_turn),
            # who actually spoke the run's lines, as recorded; else what the release pinned
            facilitator_model=observed[0] if observed else facilitator,
        ))
        outcomes.extend(
            WinOutcome(run_id=run["run_id"], condition_id=w.id, ordinal=i, met=holds(w.expect, run["final_state"]))
            for i, w in enumerate(scenario.win_conditions)
        )

    def finalise(conn: sa.Connection) -> tuple[str | None, bool] | None:
        n_planned, n_swept = repo.n_planned_and_swept(conn, submission_id)
        if n_swept < n_planned:
            return None
        facts = boards.submission_facts(store, submission_id, conn)
        assert facts is not None
        era = ConfigRepo.era_at(conn, submission["created_at"])
        publish = bool(
            submission["publish_requested"] and facts["status"] == "complete" and facts["public_handle"]
            and not repo.has_publication_events(conn, submission_id)
        )
        exports.stamp(conn, submission_id, era)  # the digest, in the finalising transaction (issue 12)
        return era, publish

    if repo.complete(submission_id, sweeps, outcomes, finalise):
        # its figures, from its own rows only (the same cost on a board of 100 or 100,000 entries):
        # on finalisation, and again whenever it is completed later (a judgement scored since)
        boards.refresh(store, submission_id)


def complete(store: Store, batch_id: str) -> bool:
    """Finish the batch if every planned slot is recorded: a run batch gets its completion row, a
    submission is swept and finalised (`complete_submission`). True when the batch is complete.

    Idempotent, and retried as a whole on a transient store fault (each step only adds what is
    missing), so a finalisation cut short is finished by the next call: the sweeper's
    (`complete_recorded`), `assay resume`'s or `assay score`'s."""
    batch = RunsRepo(store).batch(batch_id)
    if batch is None:
        raise NotFound("no such batch or submission", "batch", value=batch_id)
    noun = "submission" if batch.kind == "submission" else "batch"

    def finish() -> bool:
        if batch.kind == "submission":
            complete_submission(store, batch_id)
        return RunsRepo(store).add_completion(batch_id)

    try:
        return store.retry.call(finish)
    except Exception as exc:
        if is_fault(exc):
            raise stopped(exc, batch_id, noun) from exc
        raise


def complete_recorded(store: Store, on_error: Callable[[str, Exception], None] | None = None, *,
                      since: datetime | None = None, also: Iterable[str] = ()) -> list[str]:
    """Complete every batch whose runs are all recorded but which was never completed (its last
    run's process stopped, or its finalisation failed, before it could): the sweeper's duty, so a
    submission whose runs are all recorded always completes. Returns the ids completed now; one
    that fails is told to `on_error` and left for the next call. With `since`, only the batches
    with a run recorded since then are looked at (`RunsRepo.completable`), and those of `also` (what
    failed before)."""
    done = []
    todo = RunsRepo(store).completable(since)
    todo += [b for b in also if b not in set(todo)]
    for batch_id in todo:
        try:
            if complete(store, batch_id):
                done.append(batch_id)
        except Exception as exc:  # noqa: BLE001 - one batch must not stop the others
            if on_error is None:
                raise
            on_error(batch_id, exc)
    return done
