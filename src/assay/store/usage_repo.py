"""Reads and appends of model usage (`usage_schema.run_usage`): plain rows, summed by the caller."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from assay.store.config_repo import ConfigRepo
from assay.store.schema import planned_runs, utcnow
from assay.store.usage_schema import run_usage

USAGE_COLUMNS = ("run_id", "role", "model", "prompt_tokens", "completion_tokens", "cached_tokens", "calls",
                 "latency_ms", "self_reported", "created_at")
_CHUNK = 500


class UsageRepo(ConfigRepo):
    """Append-only access to `run_usage`, over the board's engine and transactions."""

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Append usage rows (each `{run_id, role, model, tokens…, calls, latency_ms, self_reported}`)."""
        if not rows:
            return
        now = utcnow()
        with self.write() as conn:
            conn.execute(sa.insert(run_usage), [{**r, "created_at": now} for r in rows])

    def for_runs(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Every usage row of these runs, in the order they were recorded."""
        ids = list(dict.fromkeys(run_ids))
        out: list[dict[str, Any]] = []
        with self.read() as conn:
            for i in range(0, len(ids), _CHUNK):
                rows = conn.execute(sa.select(*[run_usage.c[c] for c in USAGE_COLUMNS])
                                    .where(run_usage.c.run_id.in_(ids[i:i + _CHUNK]))
                                    .order_by(run_usage.c.id)).all()
                out.extend(dict(r._mapping) for r in rows)
        return out

    def for_batch(self, batch_id: str) -> list[dict[str, Any]]:
        """Every usage row of the batch's planned runs, in the order they were recorded."""
        with self.read() as conn:
            rows = conn.execute(
                sa.select(*[run_usage.c[c] for c in USAGE_COLUMNS])
                .join(planned_runs, planned_runs.c.run_id == run_usage.c.run_id)
                .where(planned_runs.c.batch_id == batch_id).order_by(run_usage.c.id)).all()
        return [dict(r._mapping) for r in rows]

    def for_batches(self, batch_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """{batch_id: its usage rows}, for many batches in one query per chunk."""
        ids = list(dict.fromkeys(batch_ids))
        out: dict[str, list[dict[str, Any]]] = {b: [] for b in ids}
        with self.read() as conn:
            for i in range(0, len(ids), _CHUNK):
                rows = conn.execute(
                    sa.select(planned_runs.c.batch_id, *[run_usage.c[c] for c in USAGE_COLUMNS])
                    .join(planned_runs, planned_runs.c.run_id == run_usage.c.run_id)
                    .where(planned_runs.c.batch_id.in_(ids[i:i + _CHUNK])).order_by(run_usage.c.id)).all()
                for r in rows:
                    row = dict(r._mapping)
                    out[row.pop("batch_id")].append(row)
        return out

    def price_rows(self, prefix: str) -> list[dict[str, Any]]:
        """Every platform config row whose key starts with `prefix` (the price table), oldest first."""
        from assay.store.board_schema import platform_config

        with self.read() as conn:
            rows = conn.execute(sa.select(platform_config.c.key, platform_config.c.value, platform_config.c.created_at)
                                .where(platform_config.c.key.startswith(prefix, autoescape=True))
                                .order_by(platform_config.c.id)).all()
        return [dict(r._mapping) for r in rows]
