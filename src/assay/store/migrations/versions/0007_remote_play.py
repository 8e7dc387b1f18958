"""Remote play: the steps a remote agent sent for a leased run, recorded as they arrive so a
restarted server resumes the run from them (issue 10).

`remote_steps` is append-only; see `assay.store.remote_schema` for what each row means. The
lease is a durable-batch claim (0004's `run_claims`), so this revision adds no lease table.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("remote_steps",)


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


def upgrade() -> None:
    op.create_table(
        "remote_steps",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("reply", _json(), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("elapsed", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('message', 'failed', 'expired')", name="ck_remote_steps_kind"),
        sa.CheckConstraint("step >= 1", name="ck_remote_steps_step"),
    )
    for table in APPEND_ONLY:
        for statement in append_only(table):
            op.execute(statement)


def downgrade() -> None:
    for table in APPEND_ONLY:
        for statement in drop_append_only(table):
            op.execute(statement)
    op.drop_table("remote_steps")
