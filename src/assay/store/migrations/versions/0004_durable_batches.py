"""Durable batches: the agent a batch was planned for, leases on its slots, and its completion.

A batch used to live and die with the process that ran it. Now it is created (plan and agent
stored together), executed by whichever processes claim its pending slots, and completed once
every slot is recorded, so a killed batch can be resumed:

- `batch_agents`: how to load the batch's agent again (the spec as another process loads it, the
  loader options — never an API key — and the run limits); one row per batch, append-only.
- `run_claims`: a process's claim on a planned slot, `(run_id, attempt)` unique, so two processes
  that race for a slot cannot both win it; a slot whose latest claim is held by a process that is
  gone may be claimed again with the next attempt number. Append-only.
- `claim_holders`: the processes that claim, with a heartbeat. The one table here that is updated:
  it holds operational liveness, never a result, and nothing on a board is read from it.
- `batch_completions`: when a batch had every planned slot recorded; append-only.
- One planned slot per (batch, scenario, rep), enforced by a unique index.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("batch_agents", "run_claims", "batch_completions")


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.triggers`) produced at this revision, copied here so that a
# later change to them cannot change what this migration does
# (tests/store/test_frozen_migrations.py).

_PG_APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def append_only(table: str) -> list[str]:
    """What `assay.store.triggers.append_only(table)` gave at this revision: DDL that makes `table`
    refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL)."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
        ]
    return [
        _PG_APPEND_ONLY_FUNCTION,
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
        f"CREATE TRIGGER {table}_append_only_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    ]


def drop_append_only(table: str) -> list[str]:
    """What `assay.store.triggers.drop_append_only(table)` gave at this revision."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only_update",
            f"DROP TRIGGER IF EXISTS {table}_append_only_delete",
        ]
    return [
        f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
        f"DROP TRIGGER IF EXISTS {table}_append_only_truncate ON {table}",
    ]


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_index("uq_planned_runs_scenario_rep", "planned_runs", ["batch_id", "scenario_hash", "trial"],
                    unique=True)
    op.create_table(
        "batch_agents",
        sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("load_spec", sa.String, nullable=False),
        sa.Column("options", _json(), nullable=False),
        sa.Column("turn_limit", sa.Integer, nullable=False),
        sa.Column("time_limit", sa.Float, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "claim_holders",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("host", sa.String, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", _ts(), nullable=False),
        sa.Column("heartbeat_at", _ts(), nullable=False),
        sa.Column("ended_at", _ts(), nullable=True),
    )
    op.create_table(
        "run_claims",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("holder", sa.String(32), sa.ForeignKey("claim_holders.id"), nullable=False),
        sa.Column("claimed_at", _ts(), nullable=False),
    )
    op.create_table(
        "batch_completions",
        sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    for table in APPEND_ONLY:
        for statement in append_only(table):
            op.execute(statement)


def downgrade() -> None:
    for table in APPEND_ONLY:
        for statement in drop_append_only(table):
            op.execute(statement)
    for table in ("batch_completions", "run_claims", "claim_holders", "batch_agents"):
        op.drop_table(table)
    op.drop_index("uq_planned_runs_scenario_rep", "planned_runs")
