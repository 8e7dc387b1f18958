"""Tamper-evident submissions: the digest each submission is stamped with when finalised (issue 12).

- `submission_digests`: one SHA-256 per finalised submission (see `assay.store.digest_schema`);
  append-only, and on PostgreSQL under row-level security like every other table (`rls.secure`).

Submissions finalised before this revision have no digest: nothing is backfilled, since a digest
stamped now would vouch for rows as they are today, not as they were when the entry was finalised.

The table is spelled out here, not taken from `digest_schema`, so this revision stays what it was.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("submission_digests",)


def upgrade() -> None:
    op.create_table(
        "submission_digests",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
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
        op.drop_table(table)
