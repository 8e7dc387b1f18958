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


revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    "admins", "admin_sessions", "admin_session_ends", "eval_categories", "panel_applications",
    "panel_reviews", "panel_models", "panel_environments", "panel_runs", "panel_run_finalizations",
    "panel_scorecards", "panel_ratings",
)


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.triggers`, `assay.store.rls`, the view generations of
# `assay.store.views`) produced at this revision, copied here so that a later change to them cannot
# change what this migration does (tests/store/test_frozen_migrations.py).

_PG_APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def append_only(table: str) -> list[str]:
    """What `assay.store.triggers.append_only(table)` gave at this revision: DDL that makes `table`
    refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL)."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
        ]
    return [
        _PG_APPEND_ONLY_FUNCTION,
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
        f"CREATE TRIGGER {table}_append_only_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    ]


def drop_append_only(table: str) -> list[str]:
    """What `assay.store.triggers.drop_append_only(table)` gave at this revision."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only_update",
            f"DROP TRIGGER IF EXISTS {table}_append_only_delete",
        ]
    return [
        f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
        f"DROP TRIGGER IF EXISTS {table}_append_only_truncate ON {table}",
    ]


def _secure(table: str) -> list[str]:
    """What `assay.store.rls.secure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY assay_service_read ON {table} FOR SELECT TO assay_service USING (true)",
        f"CREATE POLICY assay_service_append ON {table} FOR INSERT TO assay_service WITH CHECK (true)",
        f"CREATE POLICY assay_owner_all ON {table} FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
    ]


def _unsecure(table: str) -> list[str]:
    """What `assay.store.rls.unsecure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"DROP POLICY IF EXISTS assay_service_read ON {table}",
        f"DROP POLICY IF EXISTS assay_service_append ON {table}",
        f"DROP POLICY IF EXISTS assay_owner_all ON {table}",
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
    ]


#: `rls.create_roles()`
_CREATE_ROLES: tuple[str, ...] = (
    """
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'assay_public') THEN
    BEGIN
      CREATE ROLE assay_public NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- another database's migration created it first
    END;
  END IF;
END
$roles$""",
    """
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'assay_service') THEN
    BEGIN
      CREATE ROLE assay_service NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- another database's migration created it first
    END;
  END IF;
END
$roles$""",
)

#: `rls.grant_service()`
_GRANT_SERVICE: tuple[str, ...] = (
    "GRANT USAGE ON SCHEMA public TO assay_service",
    "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO assay_service",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO assay_service",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO assay_service",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO assay_service",
)

#: `rls.revoke_service()`
_REVOKE_SERVICE: tuple[str, ...] = (
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE USAGE, SELECT ON SEQUENCES FROM assay_service",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT ON TABLES FROM assay_service",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM assay_service",
    "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM assay_service",
    "REVOKE USAGE ON SCHEMA public FROM assay_service",
)

#: `rls.TABLES_QUERY`
_TABLES_QUERY = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"

#: views upgrade: `recreate(op.execute, (), panel_0008.VIEWS)` (`assay.store.views`)
_UP_VIEWS: tuple[str, ...] = (
    """CREATE VIEW panel_current_decisions AS SELECT r.application_id AS application_id, r.decision AS decision, r.by_admin AS by_admin,
  r.reviewed_at AS reviewed_at
FROM panel_reviews r
WHERE r.id = (SELECT MAX(r2.id) FROM panel_reviews r2 WHERE r2.application_id = r.application_id)""",
    """CREATE VIEW panel_counted_cards AS SELECT c.id AS card_id, c.run_id AS run_id, c.panelist_id AS panelist_id, pr.model_id AS model_id
FROM panel_scorecards c
JOIN panel_runs pr ON pr.id = c.run_id
JOIN panel_run_finalizations f ON f.run_id = c.run_id
JOIN panel_current_decisions d ON d.application_id = c.panelist_id AND d.decision = 'approved'
WHERE c.id = (
  SELECT MAX(c2.id) FROM panel_scorecards c2
  WHERE c2.run_id = c.run_id AND c2.panelist_id = c.panelist_id
)""",
    """CREATE VIEW panel_run_medians AS SELECT x.run_id AS run_id, x.model_id AS model_id, x.category AS category,
  MAX(x.n) AS n_panelists, AVG(x.rating) AS median_rating
FROM (
  SELECT k.run_id AS run_id, k.model_id AS model_id, g.category AS category, g.rating AS rating,
    ROW_NUMBER() OVER (PARTITION BY k.run_id, g.category ORDER BY g.rating) AS position,
    COUNT(*) OVER (PARTITION BY k.run_id, g.category) AS n
  FROM panel_counted_cards k
  JOIN panel_ratings g ON g.card_id = k.card_id
) x
WHERE x.position = (x.n + 1) / 2 OR x.position = (x.n + 2) / 2
GROUP BY x.run_id, x.model_id, x.category""",
    """CREATE VIEW panel_model_categories AS SELECT m.model_id AS model_id, m.category AS category, COUNT(*) AS n_runs, AVG(m.median_rating) AS mean_rating
FROM panel_run_medians m
GROUP BY m.model_id, m.category""",
    """CREATE VIEW panel_board AS SELECT pm.id AS model_id, pm.slug AS slug, pm.name AS name, pm.vendor AS vendor,
  (SELECT COUNT(DISTINCT k.run_id) FROM panel_counted_cards k WHERE k.model_id = pm.id) AS n_runs,
  (SELECT COUNT(DISTINCT k.panelist_id) FROM panel_counted_cards k WHERE k.model_id = pm.id) AS n_panelists,
  (SELECT AVG(mc.mean_rating) FROM panel_model_categories mc WHERE mc.model_id = pm.id) AS overall_rating
FROM panel_models pm
WHERE EXISTS (SELECT 1 FROM panel_counted_cards k WHERE k.model_id = pm.id)""",
)

#: views downgrade: `recreate(op.execute, panel_0008.VIEWS, ())` (`assay.store.views`)
_DOWN_VIEWS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS panel_board",
    "DROP VIEW IF EXISTS panel_model_categories",
    "DROP VIEW IF EXISTS panel_run_medians",
    "DROP VIEW IF EXISTS panel_counted_cards",
    "DROP VIEW IF EXISTS panel_current_decisions",
)


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _by_admin() -> sa.Column[str]:
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
    return [str(name) for name in op.get_bind().execute(sa.text(_TABLES_QUERY)).scalars()]


def upgrade() -> None:
    _create_tables()
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    for statement in _UP_VIEWS:
        op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*_CREATE_ROLES, *_GRANT_SERVICE):
            op.execute(statement)
        for table in _all_tables():
            for statement in _secure(table):
                op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _all_tables():
            for statement in _unsecure(table):
                op.execute(statement)
        for statement in _REVOKE_SERVICE:
            op.execute(statement)
    for statement in _DOWN_VIEWS:
        op.execute(statement)
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
    for index, table in (("ix_panel_scorecards_run_panelist", "panel_scorecards"), ("ix_panel_runs_model", "panel_runs"),
                         ("ix_panel_reviews_application", "panel_reviews"), ("ix_admin_sessions_admin", "admin_sessions")):
        op.drop_index(index, table)
    for table in reversed(TABLES):
        op.drop_table(table)
