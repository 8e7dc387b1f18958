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

from assay.store.triggers import append_only, drop_append_only

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("remote_steps",)


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
