"""Reads and appends for suite releases: a release, the scenarios it pins, and the rubric it pins.

A release is appended once per `(suite key, version)`, and never changed; `add_release` re-checks
inside its transaction, under a lock, whether the version is already released.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias, TypedDict, cast

import sqlalchemy as sa

from assay.jsontypes import JsonObject
from assay.store.board_schema import release_scenarios, suite_releases
from assay.store.judge_schema import release_rubrics
from assay.store.repo import Repository
from assay.store.schema import scenario_versions, utcnow


class ReleaseRow(TypedDict):
    """A release as read: a `suite_releases` row (store/board_schema.py) with the document of the rubric
    it pins (`rubric`, or None). A TypedDict rather than a dataclass because ~15 modules (board,
    submissions, scoring, judgements, agreement, cards, CLI, web) read it by key: this types every one of
    those reads and leaves each call site as it is."""

    id: int
    suite_key: str
    version: str
    title: str
    language: str
    visibility: str
    reps_per_scenario: int
    facilitator_model: str | None
    judge: JsonObject | None  # a `JudgeConfig` as JSON
    baselines: list[JsonObject]  # `Baseline`s as JSON
    known_limitations: list[str]
    card: str
    owner: str | None
    document: JsonObject  # the suite document as released (its scenarios by id, its rubric by hash)
    release_hash: str
    builtin: bool
    created_at: datetime
    rubric: JsonObject | None  # the pinned `Rubric` document


class NewRelease(TypedDict):
    """A release computed from documents, to append (`add_release`): the row's columns without its id and
    time, with the rubric to pin and that rubric's hash (both None for an oracle-only suite)."""

    suite_key: str
    version: str
    title: str
    language: str
    visibility: str
    reps_per_scenario: int
    facilitator_model: str | None
    judge: JsonObject | None
    rubric: JsonObject | None
    rubric_hash: str | None
    baselines: list[JsonObject]
    known_limitations: list[str]
    card: str
    owner: str | None
    document: JsonObject
    release_hash: str
    builtin: bool


#: A release stored or only prepared (a built-in version not yet released): what reads of the keys
#: both have (suite_key, judge, rubric, ...) accept.
AnyRelease: TypeAlias = "ReleaseRow | NewRelease"


class NewPin(TypedDict):
    """A scenario a new release pins, in release order (`release_scenarios` without release and ordinal)."""

    case_id: str
    scenario_hash: str
    scenario_version: int


@dataclass(frozen=True, slots=True)
class PinnedScenario:
    """A scenario a release pins (`release_scenarios`), with its stored scenario version's facts."""

    release_id: int
    ordinal: int
    case_id: str
    scenario_hash: str
    scenario_version: int
    title: str
    document: JsonObject  # the scenario document as stored
    frozen_on: str | None
    language: str
    kit: str


def _release(row: sa.Row[Any]) -> ReleaseRow:
    return cast(ReleaseRow, dict(row._mapping))


class ReleasesRepo(Repository):
    """Suite releases and their pinned scenarios."""

    LOCKS = "board"  # the board's lock names (one namespace for every repository the board split into)

    @staticmethod
    def _releases() -> sa.Select[Any]:
        """Release rows with the trait rubric they pin (`rubric`: its document, or None)."""
        return sa.select(suite_releases, release_rubrics.c.document.label("rubric")).select_from(
            suite_releases.outerjoin(release_rubrics, release_rubrics.c.release_id == suite_releases.c.id))

    def release(self, key: str, version: str, conn: sa.Connection | None = None) -> ReleaseRow | None:
        query = self._releases().where(
            suite_releases.c.suite_key == key, suite_releases.c.version == version
        )
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with self.read() as c:
                row = c.execute(query).first()
        return _release(row) if row is not None else None

    def release_by_id(self, release_id: int) -> ReleaseRow | None:
        with self.read() as conn:
            row = conn.execute(self._releases().where(suite_releases.c.id == release_id)).first()
        return _release(row) if row is not None else None

    def releases(self, key: str | None = None) -> list[ReleaseRow]:
        """Every release (of one key), oldest first."""
        query = self._releases().order_by(suite_releases.c.suite_key, suite_releases.c.id)
        if key is not None:
            query = query.where(suite_releases.c.suite_key == key)
        with self.read() as conn:
            return [_release(r) for r in conn.execute(query)]

    def release_scenarios(self, release_id: int) -> list[PinnedScenario]:
        """The pinned scenarios of a release, in release order, each with its stored document."""
        rs, sv = release_scenarios, scenario_versions
        query = (
            sa.select(rs, sv.c.title, sv.c.document, sv.c.frozen_on, sv.c.language, sv.c.kit)
            .join(sv, sv.c.content_hash == rs.c.scenario_hash)
            .where(rs.c.release_id == release_id)
            .order_by(rs.c.ordinal)
        )
        with self.read() as conn:
            return [PinnedScenario(**r._mapping) for r in conn.execute(query)]

    def add_release(
        self, row: NewRelease, pinned: Sequence[NewPin], refuse: Callable[[ReleaseRow], None],
    ) -> tuple[ReleaseRow, bool]:
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
            if row["rubric"] is not None:
                conn.execute(sa.insert(release_rubrics).values(
                    release_id=release_id, rubric_hash=row["rubric_hash"], document=row["rubric"], created_at=now))
            created = conn.execute(self._releases().where(suite_releases.c.id == release_id)).one()
        return _release(created), True


    def release_ids(self) -> list[int]:
        with self.read() as conn:
            return [int(i) for i in conn.execute(sa.select(suite_releases.c.id).order_by(suite_releases.c.id)).scalars()]

