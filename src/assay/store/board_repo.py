"""Reads and appends for the board: releases, accounts, submissions, sweeps, events, config, eras.

`BoardRepo` wraps a `Store` and uses its engine; like the Store it only ever INSERTs (the
database refuses anything else). Every write is one transaction, and any refusal that depends on
what is stored (a release that differs, a fourth submission, a handle someone else holds) is
re-checked *inside* that transaction, under a lock, so two writers cannot both slip past it.
Numbers are never computed here: the store gives per-run facts (`board_run_facts`) and keeps each
entry's figures, computed in Python (`stats.board`), in `entry_figures` — the one derived table,
whose rows `put_figures` replaces.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict, NotFound
from assay.records import PlannedRun
from assay.store.judge_schema import release_rubrics
from assay.store.board_schema import (
    account_handles,
    accounts,
    board_run_facts,
    current_era,
    current_handles,
    entry_figures,
    measurement_eras,
    platform_config,
    publication_events,
    release_scenarios,
    run_sweeps,
    submission_finalisations,
    submission_runs,
    submissions,
    suite_releases,
    unlisted_submissions,
    variance_notes,
    win_condition_outcomes,
)
from assay.store.digest_schema import digest_stamps
from assay.stats.board import from_row
from assay.store.repo import Repository, owned_by, resolve_prefix
from assay.store.schema import batches, planned_runs, runs, scenario_versions, utcnow
from assay.store.rows import AgentRow, NewBatch
from assay.store.runs_repo import RunsRepo


def _bool(value: Any) -> bool | None:
    """SQLite hands booleans back as 0/1 from views; PostgreSQL as bool. One shape for callers."""
    return None if value is None else bool(value)


class BoardRepo(Repository):
    """The board's half of the store, over the same engine."""

    LOCKS = "board"

    # -- releases -----------------------------------------------------------------------------

    @staticmethod
    def _releases() -> sa.Select[Any]:
        """Release rows with the trait rubric they pin (`rubric`: its document, or None)."""
        return sa.select(suite_releases, release_rubrics.c.document.label("rubric")).select_from(
            suite_releases.outerjoin(release_rubrics, release_rubrics.c.release_id == suite_releases.c.id))

    def release(self, key: str, version: str, conn: sa.Connection | None = None) -> dict[str, Any] | None:
        query = self._releases().where(
            suite_releases.c.suite_key == key, suite_releases.c.version == version
        )
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with self.read() as c:
                row = c.execute(query).first()
        return dict(row._mapping) if row is not None else None

    def release_by_id(self, release_id: int) -> dict[str, Any] | None:
        with self.read() as conn:
            row = conn.execute(self._releases().where(suite_releases.c.id == release_id)).first()
        return dict(row._mapping) if row is not None else None

    def releases(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every release (of one key), oldest first."""
        query = self._releases().order_by(suite_releases.c.suite_key, suite_releases.c.id)
        if key is not None:
            query = query.where(suite_releases.c.suite_key == key)
        with self.read() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def release_scenarios(self, release_id: int) -> list[dict[str, Any]]:
        """The pinned scenarios of a release, in release order, each with its stored document."""
        rs, sv = release_scenarios, scenario_versions
        query = (
            sa.select(rs, sv.c.title, sv.c.document, sv.c.frozen_on, sv.c.language, sv.c.kit)
            .join(sv, sv.c.content_hash == rs.c.scenario_hash)
            .where(rs.c.release_id == release_id)
            .order_by(rs.c.ordinal)
        )
        with self.read() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def add_release(
        self, row: dict[str, Any], pinned: Sequence[dict[str, Any]],
        refuse: Callable[[dict[str, Any]], None],
    ) -> tuple[dict[str, Any], bool]:
        """Insert a release and its pinned scenarios; return (release, created).

        If `(key, version)` is already released, `refuse(existing)` decides inside the
        transaction: it raises to refuse, or returns to accept the existing release as is.
        """
        with self.write() as conn:
            self.lock(conn, "release", f"{row['suite_key']}\x00{row['version']}")
            existing = self.release(row["suite_key"], row["version"], conn)
            if existing is not None:
                refuse(existing)
                return existing, False
            fields = {k: v for k, v in row.items() if k not in ("rubric", "rubric_hash")}
            now = utcnow()
            release_id = conn.execute(
                sa.insert(suite_releases).values(**fields, created_at=now).returning(suite_releases.c.id)
            ).scalar_one()
            conn.execute(
                sa.insert(release_scenarios),
                [{"release_id": release_id, "ordinal": i, **p} for i, p in enumerate(pinned)],
            )
            if row.get("rubric") is not None:
                conn.execute(sa.insert(release_rubrics).values(
                    release_id=release_id, rubric_hash=row["rubric_hash"], document=row["rubric"], created_at=now))
            created = conn.execute(self._releases().where(suite_releases.c.id == release_id)).one()
        return dict(created._mapping), True

    # -- accounts -----------------------------------------------------------------------------

    def account(self, name: str) -> dict[str, Any] | None:
        with self.read() as conn:
            row = conn.execute(sa.select(accounts).where(accounts.c.name == name)).first()
            if row is None:
                return None
            handle = conn.execute(
                sa.select(current_handles.c.handle).where(current_handles.c.account == name)
            ).scalar_one_or_none()
        return {**row._mapping, "public_handle": handle}

    def handle_history(self, name: str) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(account_handles).where(account_handles.c.account == name).order_by(account_handles.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    def _holder(self, conn: sa.Connection, handle: str) -> str | None:
        # Handles are unique among the handles held now (case-insensitively, compared in Python
        # so both backends agree).
        rows = conn.execute(
            sa.select(current_handles.c.account, current_handles.c.handle).where(current_handles.c.handle.is_not(None))
        ).all()
        for row in rows:
            if str(row.handle).lower() == handle.lower():
                return str(row.account)
        return None

    def add_account(self, name: str, handle: str | None) -> None:
        with self.write() as conn:
            self.lock(conn, "handles", "all")
            if conn.execute(sa.select(accounts.c.name).where(accounts.c.name == name)).first() is not None:
                raise Conflict("an account by that name already exists", "account", value=name)
            if handle is not None:
                holder = self._holder(conn, handle)
                if holder is not None:
                    raise Conflict("the public handle is taken", "public_handle", value=handle)
            now = utcnow()
            conn.execute(sa.insert(accounts).values(name=name, created_at=now))
            if handle is not None:
                conn.execute(sa.insert(account_handles).values(account=name, handle=handle, created_at=now))

    def add_handle_event(self, name: str, handle: str | None) -> None:
        """Set (or, with None, revoke) an account's public handle: one new row either way."""
        with self.write() as conn:
            self.lock(conn, "handles", "all")
            if conn.execute(sa.select(accounts.c.name).where(accounts.c.name == name)).first() is None:
                raise NotFound("no such account", "account", value=name)
            current = conn.execute(
                sa.select(current_handles.c.handle).where(current_handles.c.account == name)
            ).scalar_one_or_none()
            if handle is None:
                if current is None:
                    raise Conflict("the account has no public handle to revoke", "account", value=name)
            else:
                holder = self._holder(conn, handle)
                if holder is not None and holder != name:
                    raise Conflict("the public handle is taken", "public_handle", value=handle)
                if current == handle:
                    raise Conflict(f"the account already holds the handle '{handle}'", "account", value=name)
            conn.execute(sa.insert(account_handles).values(account=name, handle=handle, created_at=utcnow()))
            self.relist(conn, entry_figures.c.submission_id.in_(sa.select(submissions.c.id)
                                                                .where(submissions.c.account == name)))

    # -- submissions --------------------------------------------------------------------------

    def create_submission(
        self,
        batch: NewBatch,
        planned: list[PlannedRun],
        submission: dict[str, Any],
        ranked_eligible: bool | None,
        capped: Callable[[sa.Connection], None],
        agent: AgentRow | None = None,
        extras: Sequence[tuple[sa.Table, dict[str, Any]]] = (),
    ) -> None:
        """Store a submission's batch, its whole plan and its submission row in one transaction,
        with the `extras` rows that belong to it (its own rubric, its own facilitator).

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
            for table, values in extras:
                conn.execute(sa.insert(table).values(**values, created_at=now))

    @staticmethod
    def count_submissions(conn: sa.Connection, account: str, release_id: int, *, capped_only: bool) -> int:
        query = sa.select(sa.func.count()).select_from(submissions).where(
            submissions.c.account == account, submissions.c.release_id == release_id
        )
        if capped_only:
            query = query.where(sa.not_(submissions.c.byok), sa.not_(submissions.c.baseline))
        return int(conn.execute(query).scalar_one())

    def submission(self, submission_id: str) -> dict[str, Any] | None:
        with self.read() as conn:
            row = conn.execute(sa.select(submissions).where(submissions.c.id == submission_id)).first()
        return dict(row._mapping) if row is not None else None

    def resolve_submission_id(self, ident: str, owner: str | None = None) -> str | None:
        """The full id for `ident` or a unique prefix of it (the store's one prefix rule); with
        `owner`, a prefix expands only to that account's submissions."""
        with self.read() as conn:
            return resolve_prefix(conn, submissions.c.id, ident, "submission", owned_by(owner, submissions.c.id))

    def unswept_runs(self, submission_id: str) -> list[dict[str, Any]]:
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
            return [dict(r._mapping) for r in conn.execute(query)]

    def complete(
        self,
        submission_id: str,
        sweeps: list[dict[str, Any]],
        outcomes: list[dict[str, Any]],
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
            fresh = [s for s in sweeps if s["run_id"] not in done]
            fresh_ids = {s["run_id"] for s in fresh}
            if fresh:
                conn.execute(sa.insert(run_sweeps), [{**s, "created_at": now} for s in fresh])
            wins = [o for o in outcomes if o["run_id"] in fresh_ids]
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
                self.relist(conn, entry_figures.c.submission_id == submission_id)
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

    def publication_events(self, submission_id: str) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(publication_events).where(publication_events.c.submission_id == submission_id)
                .order_by(publication_events.c.id)
            ).all()
        return [{**r._mapping, "published": bool(r.published)} for r in rows]

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
            self.relist(conn, entry_figures.c.submission_id == submission_id)

    def add_note(self, submission_id: str, text: str) -> None:
        with self.write() as conn:
            conn.execute(sa.insert(variance_notes).values(submission_id=submission_id, text=text, created_at=utcnow()))

    def notes(self, submission_id: str) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(variance_notes).where(variance_notes.c.submission_id == submission_id)
                .order_by(variance_notes.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    # -- platform config ----------------------------------------------------------------------

    def add_config(self, key: str, value: Any) -> None:
        with self.write() as conn:
            conn.execute(sa.insert(platform_config).values(key=key, value=value, created_at=utcnow()))

    def config_history(self, key: str) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(platform_config).where(platform_config.c.key == key).order_by(platform_config.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    def config_value(self, key: str, at: datetime | None = None, conn: sa.Connection | None = None) -> Any | None:
        """The value in force at `at` (default: now): the latest row created before it."""
        query = sa.select(platform_config.c.value).where(platform_config.c.key == key)
        if at is not None:
            query = query.where(platform_config.c.created_at <= at)
        query = query.order_by(platform_config.c.id.desc()).limit(1)
        if conn is not None:
            return conn.execute(query).scalar_one_or_none()
        with self.read() as c:
            return c.execute(query).scalar_one_or_none()

    def config_keys(self) -> list[str]:
        with self.read() as conn:
            return [str(k) for k in conn.execute(
                sa.select(platform_config.c.key).distinct().order_by(platform_config.c.key)).scalars()]

    # -- eras ---------------------------------------------------------------------------------

    def add_era(self, name: str, starts_at: datetime, reason: str) -> None:
        with self.write() as conn:
            self.lock(conn, "eras", "all")
            if conn.execute(sa.select(measurement_eras.c.id).where(measurement_eras.c.name == name)).first():
                raise Conflict("an era by that name already exists", "era", value=name)
            latest = conn.execute(
                sa.select(measurement_eras.c.name, measurement_eras.c.starts_at)
                .order_by(measurement_eras.c.starts_at.desc(), measurement_eras.c.id.desc()).limit(1)
            ).first()
            if latest is not None and starts_at <= latest.starts_at:
                raise Conflict(
                    f"an era must begin after the latest boundary ({latest.name}, from "
                    f"{latest.starts_at.isoformat()}); era boundaries only move forward", "from")
            # a finalised submission is stamped with the era in force when it was created: a boundary
            # before that moment would say it belongs to an era it was never stamped with
            last_stamped = conn.execute(
                sa.select(sa.func.max(submissions.c.created_at))
                .join(submission_finalisations, submission_finalisations.c.submission_id == submissions.c.id)
            ).scalar()
            if last_stamped is not None and starts_at <= last_stamped:
                raise Conflict(
                    f"an era cannot begin before a submission already finalised (the latest was made "
                    f"{last_stamped.isoformat()}); choose a later boundary", "from")
            conn.execute(sa.insert(measurement_eras).values(
                name=name, starts_at=starts_at, reason=reason, created_at=utcnow()))

    def eras(self) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(measurement_eras).order_by(measurement_eras.c.starts_at, measurement_eras.c.id)
            ).all()
            current = conn.execute(sa.select(current_era.c.name)).scalar_one_or_none()
        return [{**r._mapping, "current": r.name == current} for r in rows]

    @staticmethod
    def era_at(conn: sa.Connection, moment: datetime) -> str | None:
        """The era in force at `moment`: the latest boundary at or before it."""
        return conn.execute(
            sa.select(measurement_eras.c.name).where(measurement_eras.c.starts_at <= moment)
            .order_by(measurement_eras.c.starts_at.desc(), measurement_eras.c.id.desc()).limit(1)
        ).scalar_one_or_none()

    # -- per-run facts, and what is not a figure ------------------------------------------------

    @staticmethod
    def _run_row(row: sa.Row[Any]) -> dict[str, Any]:
        d = dict(row._mapping)
        for key in ("has_run", "passed", "false_success", "swept", "claimed_success", "ranked_eligible", "judged"):
            d[key] = _bool(d[key])
        for key in ("n_checks", "score", "safety_failures", "win_total", "win_met", "slot", "rep", "seed",
                    "release_id"):
            d[key] = int(d[key])
        return d

    def run_rows(self, submission_id: str, conn: sa.Connection | None = None) -> list[dict[str, Any]]:
        """The `board_run_facts` rows of one submission, in slot order (plain facts: what is scored,
        gated or counted is decided by `stats.board`)."""
        f = board_run_facts
        query = sa.select(f).where(f.c.submission_id == submission_id).order_by(f.c.slot)
        if conn is not None:
            return [self._run_row(r) for r in conn.execute(query)]
        with self.read() as c:
            return [self._run_row(r) for r in c.execute(query)]

    def run_facts(self, submission_id: str, conn: sa.Connection | None = None) -> list[dict[str, Any]]:
        """`run_rows` with what `stats.board` decides of each run: `scored`, `gated`, `included`."""
        out = []
        for row in self.run_rows(submission_id, conn):
            facts = from_row(row)
            out.append({**row, "scored": facts.scored, "gated": facts.gated, "included": facts.included})
        return out

    def release_run_rows(self, release_id: int, submission_ids: sa.Select[Any] | None = None,
                         ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """(submission, its run rows) for every submission of a release with a plan (or those the
        query `submission_ids` selects), in submission order: one query, no bound id per entry."""
        f = board_run_facts
        query = sa.select(f).where(f.c.release_id == release_id).order_by(f.c.submission_id, f.c.slot)
        if submission_ids is not None:
            query = query.where(f.c.submission_id.in_(submission_ids))
        with self.read() as conn:
            current: str | None = None
            held: list[dict[str, Any]] = []
            for row in conn.execution_options(yield_per=5000).execute(query):
                if row.submission_id != current:
                    if current is not None:
                        yield current, held
                    current, held = row.submission_id, []
                held.append(self._run_row(row))
            if current is not None:
                yield current, held

    @staticmethod
    def _latest(table: sa.Table, column: str, key: sa.ColumnElement[Any], value: sa.ColumnElement[Any]
                ) -> sa.ScalarSelect[Any]:
        """The latest row's `column` of an event stream for `key == value` ("the latest row wins")."""
        return (sa.select(table.c[column]).where(key == value).order_by(table.c.id.desc()).limit(1)
                .correlate_except(table).scalar_subquery())

    @classmethod
    def _info_columns(cls) -> list[Any]:
        """What a submission is besides its figures: who, what, whether published, listed, finalised,
        its era, its handle and note now (each the latest row of its stream)."""
        s, fz = submissions, submission_finalisations
        published = cls._latest(publication_events, "published", publication_events.c.submission_id, s.c.id)
        handle = cls._latest(account_handles, "handle", account_handles.c.account, s.c.account)
        note = cls._latest(variance_notes, "text", variance_notes.c.submission_id, s.c.id)
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

    @staticmethod
    def _info(row: sa.Row[Any]) -> dict[str, Any]:
        out = dict(row._mapping)
        for key in ("byok", "baseline", "publish_requested", "published", "finalised", "measurement_era_is_current",
                    "listed", "complete", "ranked"):
            if key in out:
                out[key] = _bool(out[key])
        return out

    def submission_info(self, submission_id: str, conn: sa.Connection | None = None) -> dict[str, Any] | None:
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
        return self._info(row) if row is not None else None

    def submission_listing(self, account: str | None, suite: str | None, release_id: int | None = None,
                           ) -> list[dict[str, Any]]:
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
            return [self._info(row) for row in conn.execute(query)]

    def last_change(self) -> tuple[str, datetime | None]:
        """What every public board, entry and card was last changed by, in one cheap query: a token
        that changes whenever a stored figure is replaced or an event that lists, labels or dates an
        entry is appended (publication, handle, variance note, era, unlisting, digest stamp, release),
        and the latest time among them (None on an empty store). Keys the web's read cache and ETags."""
        with self.read() as conn:
            row = list(conn.execute(_last_change_query()).one())
        times = [v for v in row if isinstance(v, datetime)]
        return "|".join(v.isoformat() if isinstance(v, datetime) else str(v) for v in row), max(times, default=None)

    # -- stored figures (derived: the one table whose rows are replaced) -------------------------

    def put_figures(self, rows: Sequence[dict[str, Any]], conn: sa.Connection | None = None) -> None:
        """Replace the stored figures of each row's submission (`entry_figures`: derived, recomputed
        from the rows, never a result)."""
        if not rows:
            return
        if conn is None:
            with self.write() as c:
                self.put_figures(rows, c)
            return
        now = utcnow()
        ids = sa.bindparam("ids", expanding=True)
        for i in range(0, len(rows), 1000):  # a bounded number of bound ids per statement
            chunk = rows[i:i + 1000]
            conn.execute(sa.delete(entry_figures).where(entry_figures.c.submission_id.in_(ids)),
                         {"ids": [r["submission_id"] for r in chunk]})
            conn.execute(sa.insert(entry_figures), [{**r, "listed": False, "created_at": now} for r in chunk])
            self.relist(conn, entry_figures.c.submission_id.in_(ids), {"ids": [r["submission_id"] for r in chunk]})

    @classmethod
    def relist(cls, conn: sa.Connection, where: sa.ColumnElement[bool], params: dict[str, Any] | None = None) -> None:
        """Recompute `entry_figures.listed` for the rows `where` selects, from the event rows: complete,
        published now, its account holding a handle now, not unlisted. Called by every write that
        appends one of those events (publication, handle), in its transaction."""
        e, s = entry_figures, submissions
        published = (sa.select(publication_events.c.published).where(publication_events.c.submission_id == e.c.submission_id)
                     .order_by(publication_events.c.id.desc()).limit(1).scalar_subquery())
        handle = (sa.select(account_handles.c.handle).select_from(account_handles.join(s, s.c.account == account_handles.c.account))
                  .where(s.c.id == e.c.submission_id).order_by(account_handles.c.id.desc()).limit(1).scalar_subquery())
        unlisted = sa.exists().where(unlisted_submissions.c.submission_id == e.c.submission_id)
        listed = sa.and_(e.c.complete, sa.func.coalesce(published, False) == sa.true(), handle.is_not(None),
                         sa.not_(unlisted))
        conn.execute(sa.update(e).where(where).values(listed=sa.case((listed, True), else_=False)), params or {})

    def stored_figures(self, release_id: int | None = None) -> Iterator[dict[str, Any]]:
        """Every stored figures row (of one release), in submission order."""
        query = sa.select(entry_figures).order_by(entry_figures.c.submission_id)
        if release_id is not None:
            query = query.where(entry_figures.c.release_id == release_id)
        with self.read() as conn:
            for row in conn.execution_options(yield_per=5000).execute(query):
                yield self._info(row)

    @staticmethod
    def unfigured(release_id: int, method: str) -> sa.Select[Any]:
        """The finalised submissions of a release whose figures are not stored under `method`."""
        e = entry_figures
        return (sa.select(submissions.c.id)
                .join(submission_finalisations, submission_finalisations.c.submission_id == submissions.c.id)
                .outerjoin(e, e.c.submission_id == submissions.c.id)
                .where(submissions.c.release_id == release_id,
                       sa.or_(e.c.submission_id.is_(None), e.c.method != method)))

    @staticmethod
    def finalised(release_id: int) -> sa.Select[Any]:
        """The finalised submissions of a release (the ones with stored figures)."""
        return (sa.select(submissions.c.id)
                .join(submission_finalisations, submission_finalisations.c.submission_id == submissions.c.id)
                .where(submissions.c.release_id == release_id))

    def has_unfigured(self, release_id: int, method: str) -> bool:
        with self.read() as conn:
            return conn.execute(self.unfigured(release_id, method).limit(1)).first() is not None

    def release_ids(self) -> list[int]:
        with self.read() as conn:
            return [int(i) for i in conn.execute(sa.select(suite_releases.c.id).order_by(suite_releases.c.id)).scalars()]

    # -- board entries: stored figures of the published, complete, handled entries --------------

    @classmethod
    def _entries_query(cls, release_id: int | None, *, listed: bool, digest_version: int,
                       figures: bool = True, whole: bool = False) -> sa.Select[Any]:
        """The board rows: what an entry shows besides its stored figures, and those figures. An
        entry's handle, note and digest are each the latest row of its stream: read row by row (a
        subquery an entry: a page, an entry) or, `whole`, joined once (each stream's latest rows
        grouped, then hash-joined: the whole board, where 100,000 subqueries took most of the read)."""
        e, s, fz = entry_figures, submissions, submission_finalisations
        era_now = sa.select(current_era.c.name).limit(1).scalar_subquery()
        source = (e.join(s, s.c.id == e.c.submission_id).join(batches, batches.c.id == s.c.id)
                  .outerjoin(fz, fz.c.submission_id == s.c.id))
        if whole:
            ah, vn = account_handles.alias("latest_handle"), variance_notes.alias("latest_note")
            handles = (sa.select(account_handles.c.account, sa.func.max(account_handles.c.id).label("id"))
                       .group_by(account_handles.c.account).subquery("handle_ids"))
            notes = (sa.select(variance_notes.c.submission_id, sa.func.max(variance_notes.c.id).label("id"))
                     .group_by(variance_notes.c.submission_id).subquery("note_ids"))
            ds = digest_stamps  # its key is (submission_id, digest_version): one row at most
            source = (source.outerjoin(handles, handles.c.account == s.c.account).outerjoin(ah, ah.c.id == handles.c.id)
                      .outerjoin(notes, notes.c.submission_id == s.c.id).outerjoin(vn, vn.c.id == notes.c.id)
                      .outerjoin(ds, sa.and_(ds.c.submission_id == s.c.id, ds.c.digest_version == digest_version)))
            handle, note, digest = ah.c.handle, vn.c.text, ds.c.digest
        else:
            handle = cls._latest(account_handles, "handle", account_handles.c.account, s.c.account)
            note = cls._latest(variance_notes, "text", variance_notes.c.submission_id, s.c.id)
            digest = (sa.select(digest_stamps.c.digest)
                      .where(digest_stamps.c.submission_id == s.c.id, digest_stamps.c.digest_version == digest_version)
                      .scalar_subquery())
        info = [  # what an entry shows besides its stored figures (no more: a full board reads every row)
            s.c.id.label("submission_id"), e.c.release_id, s.c.label, s.c.play_model,
            sa.case((s.c.baseline, "platform_verified"), (s.c.play_model.is_not(None), "self_reported"),
                    else_=None).label("model_provenance"),
            handle.label("public_handle"), sa.func.nullif(note, "").label("variance_note"), fz.c.measurement_era,
            sa.case((fz.c.submission_id.is_(None), None),
                    (sa.and_(fz.c.measurement_era.is_(None), era_now.is_(None)), True),
                    (fz.c.measurement_era == era_now, True), else_=False).label("measurement_era_is_current"),
        ]
        stored = (e.c.figures, e.c.shown) if figures else (e.c.shown,)  # the board's text needs `shown` only
        query = (sa.select(*info, *stored, e.c.ranked, e.c.rank_low, e.c.rank_high, e.c.order_key,
                           batches.c.harness_version, batches.c.config_signature, digest.label("digest"))
                 .select_from(source))
        if listed:  # the stored flag, kept by `relist`: an index range, whatever the board's size
            query = query.where(e.c.listed)
        else:  # published, complete and handled, but unlisted: by id only, read from the events
            published = cls._latest(publication_events, "published", publication_events.c.submission_id, s.c.id)
            unlisted = sa.exists().where(unlisted_submissions.c.submission_id == s.c.id)
            query = query.where(e.c.complete, published == sa.true(), handle.is_not(None), unlisted)
        if release_id is not None:
            query = query.where(e.c.release_id == release_id)
        return query

    def entries(self, release_id: int, *, digest_version: int, after: str | None = None, limit: int | None = None,
                search: str | None = None, figures: bool = True) -> list[dict[str, Any]]:
        """A release's listed entries in board order (`order_key`), from `after` on, at most `limit`,
        those whose handle or label contains `search` (case-insensitively); without `figures`, only
        the members a board shows of them (`shown`).

        The whole board (no `after`, `limit` or `search`) is read in one pass of joins, unordered,
        and sorted here; on PostgreSQL without JIT compilation, which took longer than the query it
        compiled (seconds at 100,000 entries, for a plan of joins over plain columns)."""
        e = entry_figures
        whole = after is None and limit is None and not search
        query = self._entries_query(release_id, listed=True, digest_version=digest_version, figures=figures,
                                    whole=whole)
        if not whole:
            query = query.order_by(e.c.order_key)
        if after is not None:
            query = query.where(e.c.order_key > after)
        if search:
            needle = search.lower()
            handle = self._latest(account_handles, "handle", account_handles.c.account, submissions.c.account)
            query = query.where(sa.or_(sa.func.lower(submissions.c.label).contains(needle, autoescape=True),
                                       sa.func.lower(handle).contains(needle, autoescape=True)))
        if limit is not None:
            query = query.limit(limit)
        with self.read() as conn:
            if whole:
                _no_jit(conn)
            names, rows = _plain_rows(conn, query)
        out = [dict(zip(names, row)) for row in rows]
        if whole:
            out.sort(key=operator.itemgetter("order_key"))
        return out

    def board_rows(self, release_id: int, *, digest_version: int) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A release's listed entries for the whole board's text: the columns' names and each row as
        the driver gives it (a tuple: no dict a row at 100,000 rows), in no order; the members a board
        shows of its figures only (`shown`). The same rows as `entries` without `after`, `limit` or
        `search`."""
        query = self._entries_query(release_id, listed=True, digest_version=digest_version, figures=False,
                                    whole=True)
        with self.read() as conn:
            _no_jit(conn)
            return _plain_rows(conn, query)

    def entry(self, submission_id: str, *, digest_version: int, unlisted: bool = False) -> dict[str, Any] | None:
        """A listed board entry by its full id (with `unlisted`, the unlisted one instead), or None."""
        query = self._entries_query(None, listed=not unlisted, digest_version=digest_version).where(
            entry_figures.c.submission_id == submission_id)
        with self.read() as conn:
            row = conn.execute(query).first()
        return self._info(row) if row is not None else None

    @classmethod
    @functools.cache
    def _ranked_above_query(cls) -> sa.Select[Any]:
        """Built once (a statement is costlier to build than to run): the count `ranked_above` runs."""
        e = entry_figures
        return (sa.select(sa.func.count()).select_from(e)
                .where(e.c.release_id == sa.bindparam("release_id"), e.c.listed, e.c.ranked,
                       e.c.rank_low > sa.bindparam("upper", type_=sa.Float())))

    def ranked_above(self, release_id: int, uppers: Sequence[float]) -> list[int]:
        """For each of `uppers`, how many ranked, listed entries of a release have a lower end above it
        (an index range over `(release_id, ranked, rank_low)`: the entries above it only)."""
        query = self._ranked_above_query()
        with self.read() as conn:
            return [int(conn.execute(query, {"release_id": release_id, "upper": u}).scalar_one()) for u in uppers]


def _plain_rows(conn: sa.Connection, query: sa.Select[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`query`'s column names and every row of it as the driver's tuple: executed by SQLAlchemy (bound
    parameters, as everywhere) and fetched by the driver's own cursor at once (psycopg: a client-side
    cursor, whose C loaders make the values; SQLite: its cursor), without a SQLAlchemy row a row: a
    whole board of 100,000 entries in a fraction of the time rows took. Values are the driver's:
    SQLite gives 0/1 for a boolean, which the callers read as truth values."""
    result = conn.execute(query)
    try:
        return list(result.keys()), list(result.cursor.fetchall())  # psycopg's and sqlite3's rows are tuples
    finally:
        result.close()


def _no_jit(conn: sa.Connection) -> None:
    """No JIT compilation for the rest of this (read) transaction, on PostgreSQL: a whole board's plan
    of joins over plain columns costs enough to be compiled, which took longer than the query ran
    (seconds at 100,000 entries)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL jit = off")


@functools.cache
def _last_change_query() -> sa.Select[Any]:
    """`BoardRepo.last_change`'s one statement, built once (it is asked before every public read).

    Only maxima of indexed columns (ids, and `created_at`, indexed by 0020), so it costs a few
    b-tree steps whatever the board's size, never a scan: stored figures are replaced with a new
    `created_at`, and the event tables are append-only, so each change moves a maximum."""
    def one(column: Any) -> Any:
        return sa.select(column).scalar_subquery()

    ef, us, ds = entry_figures, unlisted_submissions, digest_stamps
    return sa.select(one(sa.func.max(ef.c.created_at)),
                     one(sa.func.max(publication_events.c.id)), one(sa.func.max(publication_events.c.created_at)),
                     one(sa.func.max(account_handles.c.id)), one(sa.func.max(account_handles.c.created_at)),
                     one(sa.func.max(variance_notes.c.id)), one(sa.func.max(measurement_eras.c.id)),
                     one(sa.func.max(suite_releases.c.id)), one(sa.func.max(us.c.created_at)),
                     one(sa.func.max(ds.c.created_at)))
