"""Model usage, one row per (run, role, model) as it was recorded (0019).

A run's agent usage is appended with the run (measured by the built-in `openai:` agent, or reported
by the agent itself and marked `self_reported`); a judge's with each pass it makes (role `judge`);
a model facilitator's with the run it worded (role `facilitator`). Rows are never changed: a later
scoring appends more. Tokens and calls only, never a price: a cost is derived when read, from the
price (`platform_config` key `price/MODEL`) in force when the row was recorded (`stats.cost`).
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, metadata

run_usage = sa.Table(
    "run_usage",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), nullable=False),
    sa.Column("role", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
    sa.Column("completion_tokens", sa.BigInteger, nullable=False),
    sa.Column("cached_tokens", sa.BigInteger, nullable=False),
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("latency_ms", sa.BigInteger, nullable=False),
    sa.Column("self_reported", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_run_usage_run", "run_id"),
)
