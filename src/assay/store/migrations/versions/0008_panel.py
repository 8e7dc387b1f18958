"""The human panel and admin sessions; PostgreSQL roles and row-level security (issue 11).

- Admins (`admins`, Argon2id hashes), their server-side sessions (`admin_sessions`, keyed token
  digests with an expiry) and the sessions' ends (`admin_session_ends`: logout, rotated).
- The panel: `eval_categories` (seeded by the service from the taxonomy file), applications and
  their reviews, models, environments, runs and their finalisations, scorecards and their ratings.
  See `assay.store.panel_schema` for what each row means. Every table is append-only.
- The panel board's views (`assay.store.views.panel_0008`): per-run, per-category medians and the
  per-model rollup, the same SQL on SQLite and PostgreSQL.
- On PostgreSQL only: the roles `assay_public` and `assay_service` (created idempotently), and
  row-level security enabled and forced on EVERY table of the schema, this revision's and all the
  earlier ones', with policies for the service role and the owner and none for the public role
  (`assay.store.rls`).

Tables are spelled out here, not taken from `panel_schema`, so this revision stays what it was.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only
from assay.store.views import panel_0008, recreate

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "admins", "admin_sessions", "admin_session_ends", "eval_categories", "panel_applications",
    "panel_reviews", "panel_models", "panel_environments", "panel_runs", "panel_run_finalizations",
    "panel_scorecards", "panel_ratings",
)


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _by_admin() -> sa.Column:
    return sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True)


def _create_tables() -> None:
    op.create_table(
        "admins",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("email", name="uq_admins_email"),
    )
    op.create_table(
        "admin_sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("admin_id", sa.String(32), sa.ForeignKey("admins.id"), nullable=False),
        sa.Column("token_digest", sa.String(64), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("expires_at", _ts(), nullable=False),
        sa.UniqueConstraint("token_digest", name="uq_admin_sessions_token_digest"),
    )
    op.create_index("ix_admin_sessions_admin", "admin_sessions", ["admin_id"])
    op.create_table(
        "admin_session_ends",
        sa.Column("session_id", sa.String(32), sa.ForeignKey("admin_sessions.id"), primary_key=True),
        sa.Column("reason", sa.String, nullable=False),
        sa.Column("ended_at", _ts(), nullable=False),
        sa.CheckConstraint("reason IN ('logout', 'rotated')", name="ck_admin_session_ends_reason"),
    )
    op.create_table(
        "eval_categories",
        sa.Column("slug", sa.String(64), primary_key=True),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "panel_applications",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("specialty", sa.String, nullable=False),
        sa.Column("years_experience", sa.Integer, nullable=False),
        sa.Column("statement", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("email", name="uq_panel_applications_email"),
        sa.CheckConstraint("years_experience >= 0", name="ck_panel_applications_years"),
    )
    op.create_table(
        "panel_reviews",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("application_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
        sa.Column("decision", sa.String, nullable=False),
        _by_admin(),
        sa.Column("reviewed_at", _ts(), nullable=False),
        sa.CheckConstraint("decision IN ('approved', 'rejected')", name="ck_panel_reviews_decision"),
    )
    op.create_index("ix_panel_reviews_application", "panel_reviews", ["application_id"])
    op.create_table(
        "panel_models",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("vendor", sa.String, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("slug", name="uq_panel_models_slug"),
    )
    op.create_table(
        "panel_environments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("slug", name="uq_panel_environments_slug"),
    )
    op.create_table(
        "panel_runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("model_id", sa.Integer, sa.ForeignKey("panel_models.id"), nullable=False),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("panel_environments.id"), nullable=False),
        sa.Column("artifact_url", sa.Text, nullable=False),
        _by_admin(),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_index("ix_panel_runs_model", "panel_runs", ["model_id"])
    op.create_table(
        "panel_run_finalizations",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), primary_key=True),
        _by_admin(),
        sa.Column("finalized_at", _ts(), nullable=False),
    )
    op.create_table(
        "panel_scorecards",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
        sa.Column("panelist_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("minutes", sa.Integer, nullable=False),
        _by_admin(),
        sa.Column("created_at", _ts(), nullable=False),
        sa.CheckConstraint("minutes >= 0", name="ck_panel_scorecards_minutes"),
    )
    op.create_index("ix_panel_scorecards_run_panelist", "panel_scorecards", ["run_id", "panelist_id"])
    op.create_table(
        "panel_ratings",
        sa.Column("card_id", sa.Integer, sa.ForeignKey("panel_scorecards.id"), primary_key=True),
        sa.Column("category", sa.String(64), sa.ForeignKey("eval_categories.slug"), primary_key=True),
        sa.Column("rating", sa.Float, nullable=False),
        sa.CheckConstraint("rating >= 0 AND rating <= 10", name="ck_panel_ratings_range"),
    )


def _all_tables() -> list[str]:
    return [str(name) for name in op.get_bind().execute(sa.text(rls.TABLES_QUERY)).scalars()]


def upgrade() -> None:
    _create_tables()
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    recreate(op.execute, (), panel_0008.VIEWS)
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*rls.create_roles(), *rls.grant_service()):
            op.execute(statement)
        for table in _all_tables():
            for statement in rls.secure(table):
                op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _all_tables():
            for statement in rls.unsecure(table):
                op.execute(statement)
        for statement in rls.revoke_service():
            op.execute(statement)
    recreate(op.execute, panel_0008.VIEWS, ())
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
    for index, table in (("ix_panel_scorecards_run_panelist", "panel_scorecards"), ("ix_panel_runs_model", "panel_runs"),
                         ("ix_panel_reviews_application", "panel_reviews"), ("ix_admin_sessions_admin", "admin_sessions")):
        op.drop_index(index, table)
    for table in reversed(TABLES):
        op.drop_table(table)
