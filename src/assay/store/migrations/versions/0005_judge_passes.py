"""Trait judging: the rubric a release pins, the judge a submission is scored with, every pass.

- `release_rubrics`: a release's trait rubric (document and hash); append-only.
- `submission_rubrics`: a submission's own rubric (`--rubric`); append-only.
- `batch_facilitators`: a batch's own facilitator (`--facilitator`, never a key); append-only.
- `judge_configs`: the judge pinned at a submission's first scoring; append-only, one per submission.
- `judge_passes`: every pass over every run, valid or failed, with the raw reply; append-only,
  `(run_id, pass_index)` unique so a pass is never recorded twice.
- The board views become generation `board_0005`: a run of a rubric release is scored once judged.

Tables are spelled out here, not taken from `judge_schema`, so this revision stays what it was.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from assay.store.triggers import append_only, drop_append_only
from assay.store.views import board_0002, board_0005, recreate

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("release_rubrics", "submission_rubrics", "batch_facilitators", "judge_configs", "judge_passes")


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "release_rubrics",
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), primary_key=True),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("document", _json(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "submission_rubrics",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("document", _json(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "batch_facilitators",
        sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("spec", sa.String, nullable=False),
        sa.Column("base_url", sa.String, nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "judge_configs",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("spec", sa.String, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("prompt_version", sa.Integer, nullable=False),
        sa.Column("prompt_hash", sa.String(64), nullable=False),
        sa.Column("passes", sa.Integer, nullable=False),
        sa.Column("min_valid", sa.Integer, nullable=False),
        sa.Column("temperature", sa.Float, nullable=False),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "judge_passes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("pass_index", sa.Integer, nullable=False),
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("verdicts", _json(), nullable=True),
        sa.Column("rationale", _json(), nullable=False),
        sa.Column("raw", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("error_kind", sa.String, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("run_id", "pass_index", name="uq_judge_passes_run_pass"),
    )
    op.create_index("ix_judge_passes_submission", "judge_passes", ["submission_id"])
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    recreate(op.execute, board_0002.VIEWS, board_0005.VIEWS)


def downgrade() -> None:
    recreate(op.execute, board_0005.VIEWS, board_0002.VIEWS)
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
