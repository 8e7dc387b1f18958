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

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("remote_lines",)


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
            for statement in rls.secure(table):
                op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        if postgresql:
            for statement in rls.unsecure(table):
                op.execute(statement)
        for statement in drop_append_only(table):
            op.execute(statement)
    for table in reversed(TABLES):
        op.drop_table(table)
