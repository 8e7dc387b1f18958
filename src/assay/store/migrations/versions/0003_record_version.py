"""Runs say which version of the run record wrote them.

Version 1 rows (before the episode engine) keep bare chat messages as their transcript and only
the applied tool calls as their actions; version 2 rows keep transcript events with a source and
the agent's whole assistant messages (`assay.records`). Readers take both; existing rows are
version 1 by the column's default, so no row is rewritten (the table stays append-only).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("schema_version", sa.Integer, nullable=False, server_default=sa.text("1")))


def downgrade() -> None:
    # SQLite drops a column in place since 3.35 (a table rebuild would trip over the board views)
    op.drop_column("runs", "schema_version")
