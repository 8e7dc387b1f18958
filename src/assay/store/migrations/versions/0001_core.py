"""Core result tables: scenario versions, batches, the plan, runs and check outcomes.

Every table is append-only, enforced by database triggers (docs/architecture.md, invariant 2). Tables are
spelled out here rather than taken from `schema.metadata` so this revision stays what it was
when later revisions (0002_board, …) chain after it and `schema.py` moves on.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("scenario_versions", "batches", "planned_runs", "runs", "check_outcomes")

# Frozen copy of the contract's statuses (assay.records.STATUSES) as of this revision.
_STATUSES = ("completed", "timeout", "turn_limit", "crashed", "empty", "error")


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


def _timestamp() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "scenario_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("case_id", sa.String, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("checks_hash", sa.String(64), nullable=False),
        sa.Column("frozen_on", sa.String(10), nullable=True),
        sa.Column("kit", sa.String, nullable=False),
        sa.Column("title", sa.String, nullable=False),
        sa.Column("language", sa.String, nullable=False),
        sa.Column("document", _json(), nullable=False),
        sa.Column("world_fingerprint", sa.String(64), nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.UniqueConstraint("content_hash", name="uq_scenario_versions_content_hash"),
        sa.UniqueConstraint("case_id", "version", name="uq_scenario_versions_case_version"),
    )
    op.create_index("ix_scenario_versions_case_id", "scenario_versions", ["case_id"])

    op.create_table(
        "batches",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("suite_key", sa.String, nullable=False),
        sa.Column("suite_version", sa.String, nullable=True),
        sa.Column("agent_spec", sa.String, nullable=False),
        sa.Column("agent_label", sa.String, nullable=False),
        sa.Column("config_signature", sa.String(64), nullable=False),
        sa.Column("harness_version", sa.String, nullable=False),
        sa.Column("trials", sa.Integer, nullable=False),
        sa.Column("base_seed", sa.BigInteger, nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
    )
    op.create_index("ix_batches_created_at", "batches", ["created_at"])

    op.create_table(
        "planned_runs",
        sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), nullable=False),
        sa.Column("slot", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("case_id", sa.String, nullable=False),
        sa.Column(
            "scenario_hash",
            sa.String(64),
            sa.ForeignKey("scenario_versions.content_hash"),
            nullable=False,
        ),
        sa.Column("trial", sa.Integer, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("batch_id", "slot"),
        sa.UniqueConstraint("run_id", name="uq_planned_runs_run_id"),
    )

    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("claimed_success", sa.Boolean, nullable=True),
        sa.Column("claim_summary", sa.Text, nullable=True),
        sa.Column("turns", sa.Integer, nullable=False),
        sa.Column("final_state_hash", sa.String(64), nullable=False),
        sa.Column("final_state", _json(), nullable=False),
        sa.Column("transcript", _json(), nullable=False),
        sa.Column("actions", _json(), nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in _STATUSES) + ")", name="ck_runs_status"
        ),
    )

    op.create_table(
        "check_outcomes",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("check_id", sa.String, nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("weight", sa.Integer, nullable=False),
        sa.Column("safety", sa.Boolean, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "check_id"),
    )

    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)


def downgrade() -> None:
    # DROP TABLE fires neither row nor TRUNCATE triggers, so no trigger needs lifting first;
    # they are dropped explicitly anyway so the downgrade reads as the inverse of the upgrade.
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS assay_append_only()")
