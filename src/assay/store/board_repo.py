"""Reads and appends for the board: releases, accounts, submissions, sweeps, events, config, eras.

`BoardRepo` wraps a `Store` and uses its engine; like the Store it only ever INSERTs (the
database refuses anything else). Every write is one transaction, and any refusal that depends on
what is stored (a release that differs, a fourth submission, a handle someone else holds) is
re-checked *inside* that transaction, under a lock, so two writers cannot both slip past it.
Reads of numbers go through the board views; there is nothing else to read them from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict, NotFound
from assay.records import PlannedRun
from assay.store.judge_schema import release_rubrics
from assay.store.board_schema import (
    account_handles,
    accounts,
    board_case_facts,
    board_entries,
    board_facilitator_models,
    board_run_facts,
    board_submission_facts,
    board_unlisted_entries,
    current_era,
    current_handles,
    measurement_eras,
    platform_config,
    publication_events,
    release_scenarios,
    run_sweeps,
    submission_finalisations,
    submission_runs,
    submissions,
    suite_releases,
    variance_notes,
    win_condition_outcomes,
)
from assay.store.repo import Repository, owned_by, resolve_prefix
from assay.store.schema import batches, planned_runs, runs, scenario_versions, utcnow


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

    # -- submissions --------------------------------------------------------------------------

    def create_submission(
        self,
        batch: dict[str, Any],
        planned: list[PlannedRun],
        submission: dict[str, Any],
        ranked_eligible: bool | None,
        capped: Callable[[sa.Connection], None],
        agent: dict[str, Any] | None = None,
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
            self.store.insert_plan(conn, batch, planned, agent, now)
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
    ) -> None:
        """Append sweep rows and win-condition outcomes, then let `finalise(conn)` decide.

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
                return
            decision = finalise(conn)
            if decision is None:
                return
            era, publish = decision
            conn.execute(sa.insert(submission_finalisations).values(
                submission_id=submission_id, measurement_era=era, created_at=now))
            if publish:
                conn.execute(sa.insert(publication_events).values(
                    submission_id=submission_id, published=True,
                    reason="published automatically on completion", created_at=now))

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

    # -- the views ----------------------------------------------------------------------------

    @staticmethod
    def _facts(row: sa.Row[Any]) -> dict[str, Any]:
        out = dict(row._mapping)
        for key in ("byok", "baseline", "publish_requested", "published", "finalised", "measurement_era_is_current",
                    "listed"):
            if key in out:
                out[key] = _bool(out[key])
        for key, value in list(out.items()):
            if key.startswith("n_") or key in ("win_total", "win_met", "rank", "release_id"):
                out[key] = None if value is None else int(value)
            elif key in ("pass_rate", "consistency", "false_success_rate", "objective_met_rate"):
                out[key] = None if value is None else float(value)
        return out

    def submission_facts(self, submission_id: str, conn: sa.Connection | None = None) -> dict[str, Any] | None:
        query = sa.select(board_submission_facts).where(board_submission_facts.c.submission_id == submission_id)
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with self.read() as c:
                row = c.execute(query).first()
        return self._facts(row) if row is not None else None

    def submissions_for_release(self, release_id: int) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(board_submission_facts).where(board_submission_facts.c.release_id == release_id)
                .order_by(board_submission_facts.c.submission_id)
            ).all()
        return [self._facts(r) for r in rows]

    def submission_listing(self, account: str | None, suite: str | None) -> list[dict[str, Any]]:
        """Submission facts with their suite key and version, newest first, optionally filtered."""
        f, r = board_submission_facts, suite_releases
        query = (sa.select(f, r.c.suite_key, r.c.version).join(r, r.c.id == f.c.release_id)
                 .order_by(f.c.created_at.desc(), f.c.submission_id.desc()))
        if account is not None:
            query = query.where(f.c.account == account)
        if suite is not None:
            query = query.where(r.c.suite_key == suite)
        with self.read() as conn:
            return [self._facts(row) for row in conn.execute(query)]

    def entries(self, release_id: int) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(board_entries).where(board_entries.c.release_id == release_id)
                .order_by(board_entries.c.submission_id)
            ).all()
        return [self._facts(r) for r in rows]

    def entry(self, submission_id: str, *, unlisted: bool = False) -> dict[str, Any] | None:
        """A listed board entry by its full id; with `unlisted`, the unlisted one instead."""
        view = board_unlisted_entries if unlisted else board_entries
        with self.read() as conn:
            row = conn.execute(sa.select(view).where(view.c.submission_id == submission_id)).first()
        return self._facts(row) if row is not None else None

    def run_facts(self, submission_id: str) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(board_run_facts).where(board_run_facts.c.submission_id == submission_id)
                .order_by(board_run_facts.c.slot)
            ).all()
        out = []
        for r in rows:
            d = dict(r._mapping)
            for key in ("has_run", "passed", "false_success", "swept", "scored", "gated", "included",
                        "claimed_success", "ranked_eligible"):
                d[key] = _bool(d[key])
            for key in ("n_checks", "score", "safety_failures", "win_total", "win_met", "slot", "rep", "seed"):
                d[key] = int(d[key])
            out.append(d)
        return out

    def case_counts(self, submission_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """Per submission, one row per planned case, in case order: the counts its per-case means
        are made of, over the runs that count (`included`, as every board figure is).

        `n_runs` counted runs, `n_passed`, `n_false_successes`, `win_total`, `win_met`, and
        `consistent` from `board_case_facts` (one definition of a consistent case). Counts only:
        the division happens in Python, so both backends give the same floats.
        """
        if not submission_ids:
            return {}
        f, c = board_run_facts, board_case_facts
        ids = list(submission_ids)
        per_case = (
            sa.select(
                f.c.submission_id, f.c.case_id,
                sa.func.min(f.c.slot).label("first_slot"),
                sa.func.sum(f.c.included).label("n_runs"),
                sa.func.sum(f.c.included * f.c.passed).label("n_passed"),
                sa.func.sum(f.c.included * f.c.false_success).label("n_false_successes"),
                sa.func.sum(f.c.included * f.c.win_total).label("win_total"),
                sa.func.sum(f.c.included * f.c.win_met).label("win_met"),
            )
            .where(f.c.submission_id.in_(ids))
            .group_by(f.c.submission_id, f.c.case_id)
            .subquery()
        )
        query = (
            sa.select(per_case, c.c.consistent)
            .join(c, sa.and_(c.c.submission_id == per_case.c.submission_id, c.c.case_id == per_case.c.case_id))
            .where(c.c.submission_id.in_(ids))
            .order_by(per_case.c.submission_id, per_case.c.first_slot)
        )
        found: dict[str, list[dict[str, Any]]] = {s: [] for s in ids}
        with self.read() as conn:
            for r in conn.execute(query):
                found[r.submission_id].append({
                    "case_id": r.case_id,
                    **{k: int(getattr(r, k) or 0) for k in
                       ("n_runs", "n_passed", "n_false_successes", "win_total", "win_met")},
                    "consistent": bool(r.consistent),
                })
        return found

    def facilitator_models(self, submission_ids: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, set[str]] = {s: set() for s in submission_ids}
        if not submission_ids:
            return {}
        with self.read() as conn:
            rows = conn.execute(
                sa.select(board_facilitator_models)
                .where(board_facilitator_models.c.submission_id.in_(list(submission_ids)))
            ).all()
        for r in rows:
            found[r.submission_id].add(str(r.facilitator_model))
        return {k: sorted(v) for k, v in found.items()}

    def pinned_agents(self, submission_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """{submission: {harness_version, config_signature}}: what its batch pinned of the agent."""
        if not submission_ids:
            return {}
        with self.read() as conn:
            rows = conn.execute(
                sa.select(batches.c.id, batches.c.harness_version, batches.c.config_signature)
                .where(batches.c.id.in_(list(submission_ids)))
            ).all()
        return {r.id: {"harness_version": r.harness_version, "config_signature": r.config_signature} for r in rows}
