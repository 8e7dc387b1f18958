"""Reads and appends for platform config (keyed values, the latest row in force) and measurement eras.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict
from assay.jsontypes import JsonValue
from assay.store.board_schema import (
    current_era,
    measurement_eras,
    platform_config,
    submission_finalisations,
    submissions,
)
from assay.store.repo import Repository
from assay.store.schema import utcnow


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """One `platform_config` row: a value set for a key (as stored: free-form JSON, validated by the
    key's model when read through `service.platform_config`)."""

    id: int
    key: str
    value: JsonValue
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EraRow:
    """A measurement era (`measurement_eras`) and whether it is the one in force now."""

    id: int
    name: str
    starts_at: datetime
    reason: str
    created_at: datetime
    current: bool


class ConfigRepo(Repository):
    """Platform config values and the eras of measurement."""

    LOCKS = "board"  # the board's lock names (one namespace for every repository the board split into)

    def add_config(self, key: str, value: Any) -> None:
        with self.write() as conn:
            conn.execute(sa.insert(platform_config).values(key=key, value=value, created_at=utcnow()))

    def config_history(self, key: str) -> list[ConfigRow]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(platform_config).where(platform_config.c.key == key).order_by(platform_config.c.id)
            ).all()
        return [ConfigRow(**r._mapping) for r in rows]

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

    def eras(self) -> list[EraRow]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(measurement_eras).order_by(measurement_eras.c.starts_at, measurement_eras.c.id)
            ).all()
            current = conn.execute(sa.select(current_era.c.name)).scalar_one_or_none()
        return [EraRow(**r._mapping, current=r.name == current) for r in rows]

    @staticmethod
    def era_at(conn: sa.Connection, moment: datetime) -> str | None:
        """The era in force at `moment`: the latest boundary at or before it."""
        return conn.execute(
            sa.select(measurement_eras.c.name).where(measurement_eras.c.starts_at <= moment)
            .order_by(measurement_eras.c.starts_at.desc(), measurement_eras.c.id.desc()).limit(1)
        ).scalar_one_or_none()

