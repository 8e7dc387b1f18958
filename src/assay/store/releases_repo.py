"""Reads and appends for suite releases: a release, the scenarios it pins, and the rubric it pins.

A release is appended once per `(suite key, version)`, and never changed; `add_release` re-checks
inside its transaction, under a lock, whether the version is already released.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from assay.store.board_schema import release_scenarios, suite_releases
from assay.store.judge_schema import release_rubrics
from assay.store.repo import Repository
from assay.store.schema import scenario_versions, utcnow


class ReleasesRepo(Repository):
    """Suite releases and their pinned scenarios."""

    LOCKS = "board"  # the board's lock names (one namespace for every repository the board split into)

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


    def release_ids(self) -> list[int]:
        with self.read() as conn:
            return [int(i) for i in conn.execute(sa.select(suite_releases.c.id).order_by(suite_releases.c.id)).scalars()]

