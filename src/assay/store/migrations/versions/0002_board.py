"""The board: releases, accounts, submissions, completion sweeps, events — and the board views.

Every new table is append-only (triggers from `triggers.py`). Facts that look mutable — a public
handle, a publication, a variance note, a config value, an era — are new rows, and "current"
is the latest row, computed by the `current_*` views below. No table holds a rank or a score:
the board's numbers are the `board_*` views, whose text as of this revision is frozen in
`assay.store.views.board_0002` (portable SQL, the same on SQLite and PostgreSQL).

Tables are spelled out here, not taken from `board_schema`, so this revision stays what it was.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-21
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from assay.store.triggers import append_only, drop_append_only
from assay.store.views.board_0002 import VIEWS

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "suite_releases",
    "release_scenarios",
    "accounts",
    "account_handles",
    "submissions",
    "submission_runs",
    "run_sweeps",
    "win_condition_outcomes",
    "submission_finalisations",
    "publication_events",
    "variance_notes",
    "platform_config",
    "measurement_eras",
)

def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "suite_releases",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("suite_key", sa.String, nullable=False),
        sa.Column("version", sa.String, nullable=False),
        sa.Column("title", sa.String, nullable=False),
        sa.Column("language", sa.String, nullable=False),
        sa.Column("visibility", sa.String, nullable=False),
        sa.Column("reps_per_scenario", sa.Integer, nullable=False),
        sa.Column("facilitator_model", sa.String, nullable=True),
        sa.Column("judge", _json(), nullable=True),
        sa.Column("baselines", _json(), nullable=False),
        sa.Column("known_limitations", _json(), nullable=False),
        sa.Column("card", sa.Text, nullable=False),
        sa.Column("owner", sa.String, nullable=True),
        sa.Column("document", _json(), nullable=False),
        sa.Column("release_hash", sa.String(64), nullable=False),
        sa.Column("builtin", sa.Boolean, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("suite_key", "version", name="uq_suite_releases_key_version"),
        sa.CheckConstraint(
            "visibility IN ('public', 'unlisted', 'internal')", name="ck_suite_releases_visibility"
        ),
    )
    op.create_table(
        "release_scenarios",
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("case_id", sa.String, nullable=False),
        sa.Column(
            "scenario_hash", sa.String(64), sa.ForeignKey("scenario_versions.content_hash"), nullable=False
        ),
        sa.Column("scenario_version", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("release_id", "ordinal"),
        sa.UniqueConstraint("release_id", "case_id", name="uq_release_scenarios_case"),
    )
    op.create_table(
        "accounts",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "account_handles",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
        sa.Column("handle", sa.String, nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_account_handles_account", "account_handles", ["account"])
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
        sa.Column("label", sa.String, nullable=False),
        sa.Column("play_model", sa.String, nullable=True),
        sa.Column("byok", sa.Boolean, nullable=False),
        sa.Column("baseline", sa.Boolean, nullable=False),
        sa.Column("publish_requested", sa.Boolean, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_submissions_account_release", "submissions", ["account", "release_id"])
    op.create_table(
        "submission_runs",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("ranked_eligible", sa.Boolean, nullable=True),
    )
    op.create_index("ix_submission_runs_submission", "submission_runs", ["submission_id"])
    op.create_table(
        "run_sweeps",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("player_messages", sa.Integer, nullable=False),
        sa.Column("actions", sa.Integer, nullable=False),
        sa.Column("min_player_messages", sa.Integer, nullable=False),
        sa.Column("min_actions_per_turn", sa.Float, nullable=False),
        sa.Column("facilitator_model", sa.String, nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_run_sweeps_submission", "run_sweeps", ["submission_id"])
    op.create_table(
        "win_condition_outcomes",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("condition_id", sa.String, nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("met", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "condition_id"),
    )
    op.create_table(
        "submission_finalisations",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("measurement_era", sa.String, nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "publication_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("published", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_publication_events_submission", "publication_events", ["submission_id"])
    op.create_table(
        "variance_notes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_variance_notes_submission", "variance_notes", ["submission_id"])
    op.create_table(
        "platform_config",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String, nullable=False),
        sa.Column("value", _json(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_platform_config_key", "platform_config", ["key"])
    op.create_table(
        "measurement_eras",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("starts_at", _ts(), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("name", name="uq_measurement_eras_name"),
    )

    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)

    for name, body in VIEWS:
        op.execute(f"CREATE VIEW {name} AS {body.strip()}")


def downgrade() -> None:
    for name, _ in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
