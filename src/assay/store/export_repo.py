"""Reads for exports and digests: whole tables in primary-key order, a suite's share of them, the
rows a submission's digest covers, and the digests themselves (`digest_schema`).

Nothing here decides what a digest is or which tables an export holds: the service hands in the
parts (`assay.stats.digest.PARTS`: a table, how its rows belong to a submission) and the tables,
and this module turns them into SQL. Order is the primary key's, text compared by code point on
both backends (SQLite's BINARY collation; PostgreSQL's "C", whatever the database's own), so an
export and a digest list rows in the order a pure function would sort them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypedDict

import sqlalchemy as sa

from assay.store.usage_schema import run_usage

from assay.stats.digest import DIGEST_VERSION
from assay.store.releases_repo import ReleasesRepo
from assay.store.board_schema import (
    account_handles,
    accounts,
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
from assay.store.digest_schema import digest_stamps, seed_salts, submission_digests
from assay.store.judge_schema import (
    batch_facilitators,
    judge_configs,
    judge_passes,
    release_rubrics,
    submission_rubrics,
)
from assay.store.remote_schema import remote_lines, remote_steps
from assay.store.schema import (
    batch_agents,
    batch_completions,
    batches,
    check_outcomes,
    metadata,
    planned_runs,
    run_claims,
    run_verdicts,
    runs,
    scenario_versions,
    utcnow,
)
from assay.stats.digest import Row

#: Rows fetched per round trip when streaming a table.
BATCH = 500


class DigestRelease(TypedDict):
    """What a digest pins of a submission's release (`stats.digest.RELEASE_FIELDS`; a TypedDict:
    hashed as it is)."""

    suite_key: str
    version: str
    release_hash: str


class PartSpec(Protocol):
    """What the store needs to know of a digest part (`assay.stats.digest.Part`)."""

    @property
    def table(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def column(self) -> str: ...


def ordered(table: sa.Table, dialect: str) -> list[sa.ColumnElement[Any]]:
    """The table's primary key columns as ORDER BY terms, text by code point on both backends."""
    terms: list[sa.ColumnElement[Any]] = []
    for column in table.primary_key.columns:
        text = isinstance(column.type, sa.String)
        terms.append(column.collate("C") if text and dialect == "postgresql" else column)
    return terms


class ExportRepo(ReleasesRepo):
    """Whole-table reads in a consistent snapshot, and the digests' reads and appends."""

    # -- exports ------------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[sa.Connection]:
        """One read transaction that sees the store as of its first read, on every table: SQLite's
        deferred transaction under WAL, PostgreSQL's REPEATABLE READ."""
        with self._engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                yield conn

    @staticmethod
    def table(name: str) -> sa.Table:
        return metadata.tables[name]

    @staticmethod
    def count(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool] | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(table)
        if where is not None:
            query = query.where(where)
        return int(conn.execute(query).scalar_one())

    @staticmethod
    def stream(conn: sa.Connection, table: sa.Table,
               where: sa.ColumnElement[bool] | None = None) -> Iterator[Row]:
        """Every row of `table` (matching `where`), in primary-key order, a batch at a time."""
        query = sa.select(table).order_by(*ordered(table, conn.dialect.name))
        if where is not None:
            query = query.where(where)
        for row in conn.execution_options(yield_per=BATCH).execute(query):
            yield dict(row._mapping)

    @staticmethod
    def _scope(release_ids: Any, submission_ids: Any) -> dict[str, sa.ColumnElement[bool]]:
        """{table: condition} for the releases `release_ids` with their pinned scenarios and
        rubrics, the submissions `submission_ids` with everything recorded for them, and the
        platform's config and eras: what both kinds of scoped export hold."""
        ids = submission_ids
        run_ids = sa.select(planned_runs.c.run_id).where(planned_runs.c.batch_id.in_(ids))
        hashes = sa.union(
            sa.select(release_scenarios.c.scenario_hash).where(release_scenarios.c.release_id.in_(release_ids)),
            sa.select(planned_runs.c.scenario_hash).where(planned_runs.c.batch_id.in_(ids)),
        )
        everything = sa.true()
        return {
            "scenario_versions": scenario_versions.c.content_hash.in_(hashes),
            "batches": batches.c.id.in_(ids),
            "planned_runs": planned_runs.c.batch_id.in_(ids),
            "runs": runs.c.run_id.in_(run_ids),
            "check_outcomes": check_outcomes.c.run_id.in_(run_ids),
            "run_verdicts": run_verdicts.c.run_id.in_(run_ids),
            "batch_agents": batch_agents.c.batch_id.in_(ids),
            "batch_completions": batch_completions.c.batch_id.in_(ids),
            "suite_releases": suite_releases.c.id.in_(release_ids),
            "release_scenarios": release_scenarios.c.release_id.in_(release_ids),
            "submissions": submissions.c.id.in_(ids),
            "submission_runs": submission_runs.c.submission_id.in_(ids),
            "run_sweeps": run_sweeps.c.submission_id.in_(ids),
            "win_condition_outcomes": win_condition_outcomes.c.run_id.in_(run_ids),
            "submission_finalisations": submission_finalisations.c.submission_id.in_(ids),
            "publication_events": publication_events.c.submission_id.in_(ids),
            "variance_notes": variance_notes.c.submission_id.in_(ids),
            platform_config.name: everything,
            measurement_eras.name: everything,
            "release_rubrics": release_rubrics.c.release_id.in_(release_ids),
            "submission_rubrics": submission_rubrics.c.submission_id.in_(ids),
            "batch_facilitators": batch_facilitators.c.batch_id.in_(ids),
            "judge_configs": judge_configs.c.submission_id.in_(ids),
            "judge_passes": judge_passes.c.submission_id.in_(ids),
            "remote_steps": remote_steps.c.run_id.in_(run_ids),
            "remote_lines": remote_lines.c.run_id.in_(run_ids),
            "digest_stamps": digest_stamps.c.submission_id.in_(ids),
            "run_usage": run_usage.c.run_id.in_(run_ids),
        }

    @staticmethod
    def suite_scope(key: str) -> dict[str, sa.ColumnElement[bool]]:
        """{table: the condition its rows meet to belong to suite `key`}: its releases (every
        version and visibility), their pinned scenarios and rubrics, their submissions with
        everything recorded for them and their accounts' handles, and the platform's config and
        eras (in force for every suite). Tables absent here hold nothing of any suite."""
        release_ids = sa.select(suite_releases.c.id).where(suite_releases.c.suite_key == key)
        submission_ids = sa.select(submissions.c.id).where(submissions.c.release_id.in_(release_ids))
        run_ids = sa.select(planned_runs.c.run_id).where(planned_runs.c.batch_id.in_(submission_ids))
        account_names = sa.select(submissions.c.account).where(submissions.c.id.in_(submission_ids))
        return {
            **ExportRepo._scope(release_ids, submission_ids),
            "run_claims": run_claims.c.run_id.in_(run_ids),
            "accounts": accounts.c.name.in_(account_names),
            "account_handles": account_handles.c.account.in_(account_names),
            "submission_digests": submission_digests.c.submission_id.in_(submission_ids),
            "seed_salts": seed_salts.c.run_id.in_(run_ids),
            "unlisted_submissions": unlisted_submissions.c.submission_id.in_(submission_ids),
        }

    @staticmethod
    def public_scope(key: str | None, submission_ids: list[str],
                     visibilities: Collection[str]) -> dict[str, sa.ColumnElement[bool]]:
        """{table: the condition its rows meet to be in a public export}: the releases of suite `key`
        (of every suite when None) of the `visibilities` listed to the public (the service's rule:
        `actors.listed_visibilities`; every version, since a board names them all) with
        their pinned scenarios and rubrics, the submissions `submission_ids` (the entries of their
        public boards) with everything recorded for them, and the platform's config and eras.
        Which columns of these rows the public sees is the caller's to say."""
        release: sa.ColumnElement[bool] = suite_releases.c.visibility.in_(sorted(visibilities))
        if key is not None:
            release = sa.and_(release, suite_releases.c.suite_key == key)
        return ExportRepo._scope(sa.select(suite_releases.c.id).where(release), list(submission_ids))

    @staticmethod
    def public_handles(conn: sa.Connection, submission_ids: list[str]) -> dict[str, str | None]:
        """{submission: its account's current public handle} (None when it has none)."""
        if not submission_ids:
            return {}
        latest = (sa.select(account_handles.c.account, sa.func.max(account_handles.c.id).label("id"))
                  .group_by(account_handles.c.account).subquery())
        rows = conn.execute(
            sa.select(submissions.c.id, account_handles.c.handle)
            .select_from(submissions.outerjoin(latest, latest.c.account == submissions.c.account)
                         .outerjoin(account_handles, account_handles.c.id == latest.c.id))
            .where(submissions.c.id.in_(submission_ids))).all()
        return {r.id: r.handle for r in rows}

    @staticmethod
    def schema_revision(conn: sa.Connection) -> str | None:
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one_or_none()

    # -- digests ------------------------------------------------------------------------------

    @staticmethod
    def digest_rows(conn: sa.Connection, submission_id: str, parts: Iterable[PartSpec]) -> dict[str, list[Row]]:
        """{table: the submission's rows of it} for each digest part, as `conn` sees them now."""
        run_ids = sa.select(planned_runs.c.run_id).where(planned_runs.c.batch_id == submission_id)
        found: dict[str, list[Row]] = {}
        for part in parts:
            table = metadata.tables[part.table]
            column = table.c[part.column]
            where = column == submission_id if part.owner == "submission" else column.in_(run_ids)
            found[part.table] = [dict(r._mapping) for r in conn.execute(sa.select(table).where(where))]
        return found

    @staticmethod
    def release_of(conn: sa.Connection, submission_id: str) -> DigestRelease:
        row = conn.execute(
            sa.select(suite_releases.c.suite_key, suite_releases.c.version, suite_releases.c.release_hash)
            .join(submissions, submissions.c.release_id == suite_releases.c.id)
            .where(submissions.c.id == submission_id)
        ).one()
        return DigestRelease(suite_key=row.suite_key, version=row.version, release_hash=row.release_hash)

    @staticmethod
    def salts(conn: sa.Connection, batch_ids: list[str]) -> dict[str, str]:
        """{run id: its seed's salt} for the planned runs of the batches, as `conn` sees them now."""
        if not batch_ids:
            return {}
        run_ids = sa.select(planned_runs.c.run_id).where(planned_runs.c.batch_id.in_(batch_ids))
        return {r.run_id: r.salt for r in conn.execute(
            sa.select(seed_salts.c.run_id, seed_salts.c.salt).where(seed_salts.c.run_id.in_(run_ids)))}

    def batch_salts(self, batch_id: str) -> dict[str, str]:
        with self.read() as conn:
            return self.salts(conn, [batch_id])

    @staticmethod
    def add_stamp(conn: sa.Connection, submission_id: str, version: int, digest: str) -> bool:
        """Stamp the submission with its digest of `version` (>= 2) unless it has one; True when
        this call stamped it."""
        seen = conn.execute(sa.select(digest_stamps.c.submission_id).where(
            digest_stamps.c.submission_id == submission_id, digest_stamps.c.digest_version == version)).first()
        if seen is not None:
            return False
        conn.execute(sa.insert(digest_stamps).values(submission_id=submission_id, digest_version=version,
                                                     digest=digest, created_at=utcnow()))
        return True

    @staticmethod
    def add_digest(conn: sa.Connection, submission_id: str, digest: str) -> bool:
        """Stamp the submission with `digest` unless it has one; True when this call stamped it."""
        seen = conn.execute(sa.select(submission_digests.c.submission_id)
                            .where(submission_digests.c.submission_id == submission_id)).first()
        if seen is not None:
            return False
        conn.execute(sa.insert(submission_digests).values(submission_id=submission_id, digest=digest,
                                                          created_at=utcnow()))
        return True

    def digests(self, submission_ids: Iterable[str], version: int = DIGEST_VERSION) -> dict[str, str]:
        """{submission: its digest of `version` (by default the one boards show)} for those of
        `submission_ids` stamped with one."""
        ids = list(submission_ids)
        if not ids:
            return {}
        with self.read() as conn:
            if version == 1:
                query = (sa.select(submission_digests.c.submission_id, submission_digests.c.digest)
                         .where(submission_digests.c.submission_id.in_(ids)))
            else:
                query = (sa.select(digest_stamps.c.submission_id, digest_stamps.c.digest)
                         .where(digest_stamps.c.submission_id.in_(ids), digest_stamps.c.digest_version == version))
            rows = conn.execute(query).all()
        return {r.submission_id: r.digest for r in rows}
