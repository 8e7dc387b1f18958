"""Remote play against a model facilitator: the lines it spoke, kept as they were first spoken.

- `remote_lines`: one row per facilitator line of a remote run, `(run_id, seq)`, written the first
  time a replay of the run speaks it, so that later replays (one per step) say it again instead of
  asking the model anew. Append-only, and on PostgreSQL under row-level security like every other
  table (`rls.secure`).

The table is spelled out here, not taken from `remote_schema`, so this revision stays what it was.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("remote_lines",)


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.triggers`, `assay.store.rls`) produced at this revision,
# copied here so that a later change to them cannot change what this migration does
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


def _secure(table: str) -> list[str]:
    """What `assay.store.rls.secure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY assay_service_read ON {table} FOR SELECT TO assay_service USING (true)",
        f"CREATE POLICY assay_service_append ON {table} FOR INSERT TO assay_service WITH CHECK (true)",
        f"CREATE POLICY assay_owner_all ON {table} FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
    ]


def _unsecure(table: str) -> list[str]:
    """What `assay.store.rls.unsecure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"DROP POLICY IF EXISTS assay_service_read ON {table}",
        f"DROP POLICY IF EXISTS assay_service_append ON {table}",
        f"DROP POLICY IF EXISTS assay_owner_all ON {table}",
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
    ]


def upgrade() -> None:
    op.create_table(
        "remote_lines",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("facilitator", sa.String, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("seq >= 0", name="ck_remote_lines_seq"),
    )
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            for statement in _secure(table):
                op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        if postgresql:
            for statement in _unsecure(table):
                op.execute(statement)
        for statement in drop_append_only(table):
            op.execute(statement)
    for table in reversed(TABLES):
        op.drop_table(table)
