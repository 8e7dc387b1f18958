"""Judge–panel agreement: a panel run may name the Assay run it scored (issue 12, item 7).

- `panel_run_links`: one row per panel run created with `assay_run`, naming that recorded Assay
  run; append-only, and on PostgreSQL under row-level security like every other table
  (`rls.secure`). `panel_runs` is left as 0008 made it.

The table is spelled out here, not taken from `panel_schema`, so this revision stays what it was.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("panel_run_links",)


def upgrade() -> None:
    op.create_table(
        "panel_run_links",
        sa.Column("panel_run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), primary_key=True),
        sa.Column("assay_run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_panel_run_links_assay_run", "panel_run_links", ["assay_run_id"])
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
    op.drop_index("ix_panel_run_links_assay_run", "panel_run_links")
    for table in reversed(TABLES):
        op.drop_table(table)
