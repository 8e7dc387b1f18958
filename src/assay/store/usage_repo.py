"""Reads and appends of model usage (`usage_schema.run_usage`): plain rows, summed by the caller."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import sqlalchemy as sa

from assay.jsontypes import JsonValue
from assay.store.config_repo import ConfigRepo
from assay.store.schema import planned_runs, utcnow
from assay.store.usage_schema import run_usage

USAGE_COLUMNS = ("run_id", "role", "model", "prompt_tokens", "completion_tokens", "cached_tokens", "calls",
                 "latency_ms", "self_reported", "created_at")
_CHUNK = 500


class NewUsageRow(TypedDict):
    """A usage row as it is appended: one (run, role, model)'s tokens, calls and time.

    A TypedDict, not a dataclass: the same row is read by key from a run's record (`Usage.as_row`),
    from the store and from an export's `run_usage` file, by `stats.cost` alike."""

    run_id: str
    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    calls: int
    latency_ms: int
    self_reported: bool


class UsageRow(NewUsageRow):
    """A stored usage row: with the moment it was recorded (which prices it)."""

    created_at: datetime


@dataclass(frozen=True, slots=True)
class PriceRow:
    """A stored price (a platform config row under `price/MODEL`): its key, its value as stored
    (`service.usage` reads it through `PriceValue`'s fields) and when it was set."""

    key: str
    value: JsonValue
    created_at: datetime


def _usage(r: sa.Row[Any]) -> UsageRow:
    return UsageRow(run_id=r.run_id, role=r.role, model=r.model, prompt_tokens=r.prompt_tokens,
                    completion_tokens=r.completion_tokens, cached_tokens=r.cached_tokens, calls=r.calls,
                    latency_ms=r.latency_ms, self_reported=r.self_reported, created_at=r.created_at)


class UsageRepo(ConfigRepo):
    """Append-only access to `run_usage`, over the board's engine and transactions."""

    def add(self, rows: list[NewUsageRow]) -> None:
        """Append usage rows (each `{run_id, role, model, tokens…, calls, latency_ms, self_reported}`)."""
        if not rows:
            return
        now = utcnow()
        with self.write() as conn:
            conn.execute(sa.insert(run_usage), [{**r, "created_at": now} for r in rows])

    def for_runs(self, run_ids: Iterable[str]) -> list[UsageRow]:
        """Every usage row of these runs, in the order they were recorded."""
        ids = list(dict.fromkeys(run_ids))
        out: list[UsageRow] = []
        with self.read() as conn:
            for i in range(0, len(ids), _CHUNK):
                rows = conn.execute(sa.select(*[run_usage.c[c] for c in USAGE_COLUMNS])
                                    .where(run_usage.c.run_id.in_(ids[i:i + _CHUNK]))
                                    .order_by(run_usage.c.id)).all()
                out.extend(_usage(r) for r in rows)
        return out

    def for_batch(self, batch_id: str) -> list[UsageRow]:
        """Every usage row of the batch's planned runs, in the order they were recorded."""
        with self.read() as conn:
            rows = conn.execute(
                sa.select(*[run_usage.c[c] for c in USAGE_COLUMNS])
                .join(planned_runs, planned_runs.c.run_id == run_usage.c.run_id)
                .where(planned_runs.c.batch_id == batch_id).order_by(run_usage.c.id)).all()
        return [_usage(r) for r in rows]

    def price_rows(self, prefix: str) -> list[PriceRow]:
        """Every platform config row whose key starts with `prefix` (the price table), oldest first."""
        from assay.store.board_schema import platform_config

        with self.read() as conn:
            rows = conn.execute(sa.select(platform_config.c.key, platform_config.c.value, platform_config.c.created_at)
                                .where(platform_config.c.key.startswith(prefix, autoescape=True))
                                .order_by(platform_config.c.id)).all()
        return [PriceRow(r.key, r.value, r.created_at) for r in rows]
