"""Pairwise preferences between panel runs, for the Bradley–Terry ranking (issue 12, item 5).

- `panel_preferences`: one row per preference a panelist gave between two runs of one environment
  (`a`, `b` or `tie`); append-only, the latest per (panelist, unordered run pair) counts, and on
  PostgreSQL under row-level security like every other table (`rls.secure`).

The table is spelled out here, not taken from `panel_schema`, so this revision stays what it was.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("panel_preferences",)


def upgrade() -> None:
    op.create_table(
        "panel_preferences",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("panelist_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
        sa.Column("run_a", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
        sa.Column("run_b", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
        sa.Column("preferred", sa.String(8), nullable=False),
        sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("preferred IN ('a', 'b', 'tie')", name="ck_panel_preferences_preferred"),
        sa.CheckConstraint("run_a <> run_b", name="ck_panel_preferences_distinct"),
    )
    op.create_index("ix_panel_preferences_panelist", "panel_preferences", ["panelist_id"])
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
    op.drop_index("ix_panel_preferences_panelist", "panel_preferences")
    for table in reversed(TABLES):
        op.drop_table(table)
