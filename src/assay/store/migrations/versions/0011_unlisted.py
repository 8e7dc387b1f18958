"""Unlisted entries: a self-hosted submission published by its id, never listed (issue 9, item 2).

- `unlisted_submissions`: one row per submission its owner asked to publish *unlisted* (only a
  bring-your-own submission may: its own facilitator, its own rubric, or `--byok`). Append-only,
  and on PostgreSQL under row-level security like every other table (`rls.secure`).
- The board views become generation `board_0011`: `board_submission_facts` gains `listed`, the
  public `board_entries` keep only listed entries, and `board_unlisted_entries` holds the rest of
  the published ones, reachable by submission id and never listed.

The table is spelled out here, not taken from `board_schema`, so this revision stays what it was.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only
from assay.store.views import board_0005, board_0011, recreate

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("unlisted_submissions",)


def upgrade() -> None:
    op.create_table(
        "unlisted_submissions",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            for statement in rls.secure(table):
                op.execute(statement)
    recreate(op.execute, board_0005.VIEWS, board_0011.VIEWS)


def downgrade() -> None:
    recreate(op.execute, board_0011.VIEWS, board_0005.VIEWS)
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        if postgresql:
            for statement in rls.unsecure(table):
                op.execute(statement)
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
