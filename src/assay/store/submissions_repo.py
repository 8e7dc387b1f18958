"""Reads and appends for submissions: the submission and its plan, its completion (sweeps,
win-condition outcomes, finalisation), its publication events and variance notes, and what a
submission is besides its figures (`submission_info`, `submission_listing`).

Every refusal that depends on what is stored (a fourth submission, a publication) is re-checked
inside the write's transaction, under a lock (`submit`, `complete`: shared with the judge's
writes, hence the board's lock namespace).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

import sqlalchemy as sa

from assay.jsontypes import JsonObject
from assay.records import PlannedRun
from assay.store.board_repo import latest, relist
from assay.store.board_schema import (
    account_handles,
    board_run_facts,
    current_era,
    entry_figures,
    publication_events,
    run_sweeps,
    submission_finalisations,
    submission_runs,
    submissions,
    suite_releases,
    unlisted_submissions,
    variance_notes,
    win_condition_outcomes,
)
from assay.store.judge_schema import batch_facilitators, submission_rubrics
from assay.store.repo import Repository, owned_by, resolve_prefix
from assay.store.rows import AgentRow, NewBatch
from assay.store.runs_repo import RunsRepo
from assay.store.schema import planned_runs, runs, utcnow


#: The boolean columns a submission's row may carry (0/1 on SQLite, bool on PostgreSQL).
_TRUTHS = ("byok", "baseline", "publish_requested", "published", "finalised", "measurement_era_is_current",
           "listed")


class SubmissionRow(TypedDict):
    """A `submissions` row (store/board_schema.py). A TypedDict rather than a dataclass: the board,
    scoring, judgements, completion, batches and the owner's view read it by key, and this types
    those reads leaving each call site as it is."""

    id: str
    account: str
    release_id: int
    label: str
    play_model: str | None
    byok: bool
    baseline: bool
    publish_requested: bool
    created_at: datetime


class NewSubmission(TypedDict):
    """A `submissions` row to append (`create_submission`; its time is the write's)."""

    id: str
    account: str
    release_id: int
    label: str
    play_model: str | None
    byok: bool
    baseline: bool
    publish_requested: bool


class SubmissionInfo(TypedDict):
    """What a submission is besides its figures (`_info_columns`, in that order), its booleans as bool.
    A TypedDict: it is merged with the figures into one mapping (`service.board.submission_facts`)
    that the owner's view, the CLI and the API serve by key, in this order."""

    submission_id: str
    release_id: int
    account: str
    label: str
    play_model: str | None
    byok: bool
    baseline: bool
    publish_requested: bool
    created_at: datetime
    model_provenance: str | None  # "platform_verified", "self_reported", or None
    published: bool
    public_handle: str | None
    variance_note: str | None
    finalised: bool
    measurement_era: str | None
    measurement_era_is_current: bool | None  # None until finalised
    listed: bool


class SubmissionListing(SubmissionInfo):
    """A submission as the listings show it: `SubmissionInfo` with its suite's key and version."""

    suite_key: str
    version: str


@dataclass(frozen=True, slots=True)
class SubmissionExtras:
    """What a submission brings of its own, stored with it: its rubric (`--rubric`, with its hash),
    whether it is unlisted, its facilitator (`--facilitator`: spec and endpoint, never a key)."""

    rubric_hash: str | None = None
    rubric: JsonObject | None = None
    unlisted: bool = False
    facilitator_spec: str | None = None
    facilitator_base_url: str | None = None


@dataclass(frozen=True, slots=True)
class Sweep:
    """A run's completion sweep (a `run_sweeps` row): its participation counts, the floor they are
    held to, and who spoke its facilitator's lines."""

    run_id: str
    submission_id: str
    player_messages: int
    actions: int
    min_player_messages: int
    min_actions_per_turn: float
    facilitator_model: str | None


@dataclass(frozen=True, slots=True)
class WinOutcome:
    """Whether a run's final state met one of its scenario's win conditions (`win_condition_outcomes`)."""

    run_id: str
    condition_id: str
    ordinal: int
    met: bool


class UnsweptRun(TypedDict):
    """A recorded run the completion sweep has not looked at yet: its record's JSON as stored (read by
    key in `service.completion`), and what it was planned as."""

    run_id: str
    status: str
    transcript: list[JsonObject]
    actions: list[JsonObject]
    final_state: JsonObject
    scenario_hash: str
    case_id: str


def normalised(row: Mapping[Any, Any]) -> SubmissionInfo:
    """A submission's info row (its `_mapping`; a listing's too), its boolean columns as bool (or None)."""
    out = dict(row)
    for key in _TRUTHS:
        if key in out:
            out[key] = None if out[key] is None else bool(out[key])
    return cast(SubmissionInfo, out)


class SubmissionsRepo(Repository):
    """Submissions: their plan, completion, publication, notes, and what each is."""

    LOCKS = "board"  # the board's lock names: `complete` is shared with the judge's writes

    def create_submission(
        self,
        batch: NewBatch,
        planned: list[PlannedRun],
        submission: NewSubmission,
        ranked_eligible: bool | None,
        capped: Callable[[sa.Connection], None],
        agent: AgentRow | None = None,
        extras: SubmissionExtras = SubmissionExtras(),
    ) -> None:
        """Store a submission's batch, its whole plan and its submission row in one transaction,
        with the `extras` rows that belong to it (its own rubric, unlisting, its own facilitator).

        `capped(conn)` runs first, under a per-(account, release) lock: it raises to refuse (the
        submission cap), so two concurrent submissions cannot both take the last slot.
        """
        now = utcnow()
        with self.write() as conn:
            self.lock(conn, "submit", f"{submission['account']}\x00{submission['release_id']}")
            capped(conn)
            RunsRepo(self.store).insert_plan(conn, batch, planned, agent, now)
            conn.execute(sa.insert(submissions).values(**submission, created_at=now))
            conn.execute(
                sa.insert(submission_runs),
                [{"run_id": p.run_id, "submission_id": submission["id"], "ranked_eligible": ranked_eligible}
                 for p in planned],
            )
            sid = submission["id"]
            if extras.rubric is not None:
                conn.execute(sa.insert(submission_rubrics).values(
                    submission_id=sid, rubric_hash=extras.rubric_hash, document=extras.rubric, created_at=now))
            if extras.unlisted:
                conn.execute(sa.insert(unlisted_submissions).values(submission_id=sid, created_at=now))
            if extras.facilitator_spec is not None:
                conn.execute(sa.insert(batch_facilitators).values(
                    batch_id=sid, spec=extras.facilitator_spec, base_url=extras.facilitator_base_url, created_at=now))

    @staticmethod
    def count_submissions(conn: sa.Connection, account: str, release_id: int, *, capped_only: bool) -> int:
        query = sa.select(sa.func.count()).select_from(submissions).where(
            submissions.c.account == account, submissions.c.release_id == release_id
        )
        if capped_only:
            query = query.where(sa.not_(submissions.c.byok), sa.not_(submissions.c.baseline))
        return int(conn.execute(query).scalar_one())

    def submission(self, submission_id: str) -> SubmissionRow | None:
        with self.read() as conn:
            row = conn.execute(sa.select(submissions).where(submissions.c.id == submission_id)).first()
        return cast(SubmissionRow, dict(row._mapping)) if row is not None else None

    def resolve_submission_id(self, ident: str, owner: str | None = None) -> str | None:
        """The full id for `ident` or a unique prefix of it (the store's one prefix rule); with
        `owner`, a prefix expands only to that account's submissions."""
        with self.read() as conn:
            return resolve_prefix(conn, submissions.c.id, ident, "submission", owned_by(owner, submissions.c.id))

    def unswept_runs(self, submission_id: str) -> list[UnsweptRun]:
        """Recorded runs of a submission that the completion sweep has not looked at yet."""
        query = (
            sa.select(runs.c.run_id, runs.c.status, runs.c.transcript, runs.c.actions, runs.c.final_state,
                      planned_runs.c.scenario_hash, planned_runs.c.case_id)
            .join(planned_runs, planned_runs.c.run_id == runs.c.run_id)
            .outerjoin(run_sweeps, run_sweeps.c.run_id == runs.c.run_id)
            .where(planned_runs.c.batch_id == submission_id, run_sweeps.c.run_id.is_(None))
            .order_by(planned_runs.c.slot)
        )
        with self.read() as conn:
            return [cast(UnsweptRun, dict(r._mapping)) for r in conn.execute(query)]

    def complete(
        self,
        submission_id: str,
        sweeps: Sequence[Sweep],
        outcomes: Sequence[WinOutcome],
        finalise: Callable[[sa.Connection], tuple[str | None, bool] | None],
    ) -> bool:
        """Append sweep rows and win-condition outcomes, then let `finalise(conn)` decide; True when
        the submission is finalised (now or before).

        `finalise` sees the new rows (same transaction) and returns None (not finalisable yet),
        or `(era, publish)`: the era stamp to record once, and whether to publish now.
        """
        with self.write() as conn:
            self.lock(conn, "complete", submission_id)
            done = {
                r for r in conn.execute(
                    sa.select(run_sweeps.c.run_id).where(run_sweeps.c.submission_id == submission_id)
                ).scalars()
            }
            now = utcnow()
            fresh = [s for s in sweeps if s.run_id not in done]
            fresh_ids = {s.run_id for s in fresh}
            if fresh:
                conn.execute(sa.insert(run_sweeps), [{**asdict(s), "created_at": now} for s in fresh])
            wins = [asdict(o) for o in outcomes if o.run_id in fresh_ids]
            if wins:
                conn.execute(sa.insert(win_condition_outcomes), wins)
            already = conn.execute(
                sa.select(submission_finalisations.c.submission_id)
                .where(submission_finalisations.c.submission_id == submission_id)
            ).first()
            if already is not None:
                return True
            decision = finalise(conn)
            if decision is None:
                return False
            era, publish = decision
            conn.execute(sa.insert(submission_finalisations).values(
                submission_id=submission_id, measurement_era=era, created_at=now))
            if publish:
                conn.execute(sa.insert(publication_events).values(
                    submission_id=submission_id, published=True,
                    reason="published automatically on completion", created_at=now))
                relist(conn, entry_figures.c.submission_id == submission_id)
        return True

    @staticmethod
    def n_planned_and_swept(conn: sa.Connection, submission_id: str) -> tuple[int, int]:
        planned = conn.execute(
            sa.select(sa.func.count()).select_from(planned_runs).where(planned_runs.c.batch_id == submission_id)
        ).scalar_one()
        # a run is settled once swept and, for a release with a trait rubric, judged: a submission
        # is finalised (era stamp, publication) only when every planned run is settled
        f = board_run_facts
        swept = conn.execute(
            sa.select(sa.func.count()).select_from(f)
            .where(f.c.submission_id == submission_id, f.c.swept == 1, f.c.judged == 1)
        ).scalar_one()
        return int(planned), int(swept)

    # -- events: publication, notes -----------------------------------------------------------

    @staticmethod
    def has_publication_events(conn: sa.Connection, submission_id: str) -> bool:
        return conn.execute(
            sa.select(publication_events.c.id).where(publication_events.c.submission_id == submission_id).limit(1)
        ).first() is not None

    def add_publication_event(
        self, submission_id: str, published: bool, reason: str,
        check: Callable[[sa.Connection], None] | None = None,
    ) -> None:
        with self.write() as conn:
            self.lock(conn, "complete", submission_id)
            if check is not None:
                check(conn)
            conn.execute(sa.insert(publication_events).values(
                submission_id=submission_id, published=published, reason=reason, created_at=utcnow()))
            relist(conn, entry_figures.c.submission_id == submission_id)

    def add_note(self, submission_id: str, text: str) -> None:
        with self.write() as conn:
            conn.execute(sa.insert(variance_notes).values(submission_id=submission_id, text=text, created_at=utcnow()))

    @classmethod
    def _info_columns(cls) -> list[Any]:
        """What a submission is besides its figures: who, what, whether published, listed, finalised,
        its era, its handle and note now (each the latest row of its stream)."""
        s, fz = submissions, submission_finalisations
        published = latest(publication_events, "published", publication_events.c.submission_id, s.c.id)
        handle = latest(account_handles, "handle", account_handles.c.account, s.c.account)
        note = latest(variance_notes, "text", variance_notes.c.submission_id, s.c.id)
        era_now = sa.select(current_era.c.name).limit(1).scalar_subquery()
        unlisted = sa.exists().where(unlisted_submissions.c.submission_id == s.c.id)
        return [
            s.c.id.label("submission_id"), s.c.release_id, s.c.account, s.c.label, s.c.play_model, s.c.byok,
            s.c.baseline, s.c.publish_requested, s.c.created_at,
            sa.case((s.c.baseline, "platform_verified"), (s.c.play_model.is_not(None), "self_reported"),
                    else_=None).label("model_provenance"),
            sa.func.coalesce(published, False).label("published"),
            handle.label("public_handle"),
            sa.func.nullif(note, "").label("variance_note"),
            fz.c.submission_id.is_not(None).label("finalised"),
            fz.c.measurement_era,
            sa.case((fz.c.submission_id.is_(None), None),
                    (sa.and_(fz.c.measurement_era.is_(None), era_now.is_(None)), True),
                    (fz.c.measurement_era == era_now, True), else_=False).label("measurement_era_is_current"),
            sa.not_(unlisted).label("listed"),
        ]

    def submission_info(self, submission_id: str, conn: sa.Connection | None = None) -> SubmissionInfo | None:
        """A submission's facts that are not figures (`_info_columns`), or None."""
        query = (sa.select(*self._info_columns())
                 .select_from(submissions.outerjoin(submission_finalisations,
                                                    submission_finalisations.c.submission_id == submissions.c.id))
                 .where(submissions.c.id == submission_id))
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with self.read() as c:
                row = c.execute(query).first()
        return normalised(row._mapping) if row is not None else None

    def submission_listing(self, account: str | None, suite: str | None, release_id: int | None = None,
                           ) -> list[SubmissionListing]:
        """Submissions (not figures) with their suite key and version, newest first, optionally filtered."""
        r = suite_releases
        query = (sa.select(*self._info_columns(), r.c.suite_key, r.c.version)
                 .select_from(submissions.join(r, r.c.id == submissions.c.release_id)
                              .outerjoin(submission_finalisations,
                                         submission_finalisations.c.submission_id == submissions.c.id))
                 .order_by(submissions.c.created_at.desc(), submissions.c.id.desc()))
        if account is not None:
            query = query.where(submissions.c.account == account)
        if suite is not None:
            query = query.where(r.c.suite_key == suite)
        if release_id is not None:
            query = query.where(submissions.c.release_id == release_id)
        with self.read() as conn:
            return [cast(SubmissionListing, normalised(row._mapping)) for row in conn.execute(query)]

