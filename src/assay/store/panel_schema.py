"""The human panel's and the admins' tables, and the panel board's views, as Core (issue 11).

Built by migration `0008_panel`, which spells the tables out itself (frozen); these mirror them on
the shared metadata so queries are written against them and `compare_metadata` stays empty.

Every table is append-only (triggers), like the rest of the store; state is always "the latest
row", computed in a query or a view:

- `admins`: one row per admin account: email and its Argon2id password hash (never the password).
- `admin_sessions`: one row per login: the keyed digest of the session token (never the token),
  and when it expires; `admin_session_ends` ends one (logout, or rotated away by a new login).
- `eval_categories`: the evaluation categories, seeded from the one taxonomy file
  (`assay/service/panel_categories.yaml`) that the pages read too.
- `panel_applications`: who applied to the panel (an email applies once); `panel_reviews` the
  admins' decisions on them (`approved` | `rejected`, the latest one in force), each with the
  reviewing admin and a timestamp. An approved application is what makes its email a panelist.
- `panel_models`, `panel_environments`: what is evaluated, and on which task.
- `panel_runs`: one model's attempt at one environment (its artifact URL); a run is `pending`
  until its `panel_run_finalizations` row makes it `scored` (there is no status column to edit).
- `panel_scorecards`: one panelist's scorecard for one run (comment, minutes); re-submitting adds
  a new scorecard and the latest one per (run, panelist) counts, the earlier stay as history.
  Its ratings are rows of `panel_ratings` (category → 0..10), so the medians are plain SQL on both
  backends (no JSON functions). No column is named "score" (docs/architecture.md, invariant 2): the numbers
  on the panel board are the views below.

The views (`assay.store.views.panel_0008`), in dependency order: `panel_current_decisions` (the
decision in force per application), `panel_counted_cards` (the scorecards that count: latest per
run and panelist, on a scored run, by a panelist approved now), `panel_run_medians` (per run and
category: the median across its panelists), `panel_model_categories` (per model and category: the
mean of its runs' medians), `panel_board` (per model: runs, panelists, the mean over categories).
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, metadata

DECISIONS = ("approved", "rejected")
SESSION_END_REASONS = ("logout", "rotated")

admins = sa.Table(
    "admins",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("email", sa.String(254), nullable=False),
    sa.Column("password_hash", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("email", name="uq_admins_email"),
)

admin_sessions = sa.Table(
    "admin_sessions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("admin_id", sa.String(32), sa.ForeignKey("admins.id"), nullable=False),
    sa.Column("token_digest", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("token_digest", name="uq_admin_sessions_token_digest"),
    sa.Index("ix_admin_sessions_admin", "admin_id"),
)

admin_session_ends = sa.Table(
    "admin_session_ends",
    metadata,
    sa.Column("session_id", sa.String(32), sa.ForeignKey("admin_sessions.id"), primary_key=True),
    sa.Column("reason", sa.String, nullable=False),
    sa.Column("ended_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("reason IN ('logout', 'rotated')", name="ck_admin_session_ends_reason"),
)

eval_categories = sa.Table(
    "eval_categories",
    metadata,
    sa.Column("slug", sa.String(64), primary_key=True),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

panel_applications = sa.Table(
    "panel_applications",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("email", sa.String(254), nullable=False),
    sa.Column("specialty", sa.String, nullable=False),
    sa.Column("years_experience", sa.Integer, nullable=False),
    sa.Column("statement", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("email", name="uq_panel_applications_email"),
    sa.CheckConstraint("years_experience >= 0", name="ck_panel_applications_years"),
)

panel_reviews = sa.Table(
    "panel_reviews",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("application_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
    sa.Column("decision", sa.String, nullable=False),
    sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
    sa.Column("reviewed_at", UTCDateTime(), nullable=False),
    sa.Index("ix_panel_reviews_application", "application_id"),
    sa.CheckConstraint("decision IN ('approved', 'rejected')", name="ck_panel_reviews_decision"),
)

panel_models = sa.Table(
    "panel_models",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("slug", sa.String(64), nullable=False),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("vendor", sa.String, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("slug", name="uq_panel_models_slug"),
)

panel_environments = sa.Table(
    "panel_environments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("slug", sa.String(64), nullable=False),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("slug", name="uq_panel_environments_slug"),
)

panel_runs = sa.Table(
    "panel_runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("model_id", sa.Integer, sa.ForeignKey("panel_models.id"), nullable=False),
    sa.Column("environment_id", sa.Integer, sa.ForeignKey("panel_environments.id"), nullable=False),
    sa.Column("artifact_url", sa.Text, nullable=False),
    sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_panel_runs_model", "model_id"),
)

panel_run_finalizations = sa.Table(
    "panel_run_finalizations",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), primary_key=True),
    sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
    sa.Column("finalized_at", UTCDateTime(), nullable=False),
)

panel_scorecards = sa.Table(
    "panel_scorecards",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
    sa.Column("panelist_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
    sa.Column("comment", sa.Text, nullable=False),
    sa.Column("minutes", sa.Integer, nullable=False),
    sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_panel_scorecards_run_panelist", "run_id", "panelist_id"),
    sa.CheckConstraint("minutes >= 0", name="ck_panel_scorecards_minutes"),
)

panel_ratings = sa.Table(
    "panel_ratings",
    metadata,
    sa.Column("card_id", sa.Integer, sa.ForeignKey("panel_scorecards.id"), primary_key=True),
    sa.Column("category", sa.String(64), sa.ForeignKey("eval_categories.slug"), primary_key=True),
    sa.Column("rating", sa.Float, nullable=False),
    sa.CheckConstraint("rating >= 0 AND rating <= 10", name="ck_panel_ratings_range"),
)

PANEL_TABLES: tuple[str, ...] = (
    "admins", "admin_sessions", "admin_session_ends", "eval_categories", "panel_applications",
    "panel_reviews", "panel_models", "panel_environments", "panel_runs", "panel_run_finalizations",
    "panel_scorecards", "panel_ratings",
)
"""Tables 0008 creates, every one append-only (see `triggers.py`)."""

# -- the views, for queries (lightweight: not part of the metadata, never created from here) ----

panel_current_decisions = sa.table(
    "panel_current_decisions", sa.column("application_id"), sa.column("decision"), sa.column("by_admin"),
    sa.column("reviewed_at", UTCDateTime()),
)
panel_counted_cards = sa.table(
    "panel_counted_cards", sa.column("card_id"), sa.column("run_id"), sa.column("panelist_id"),
    sa.column("model_id"),
)
panel_run_medians = sa.table(
    "panel_run_medians", sa.column("run_id"), sa.column("model_id"), sa.column("category"),
    sa.column("n_panelists"), sa.column("median_rating"),
)
panel_model_categories = sa.table(
    "panel_model_categories", sa.column("model_id"), sa.column("category"), sa.column("n_runs"),
    sa.column("mean_rating"),
)
panel_board = sa.table(
    "panel_board", sa.column("model_id"), sa.column("slug"), sa.column("name"), sa.column("vendor"),
    sa.column("n_runs"), sa.column("n_panelists"), sa.column("overall_rating"),
)

# -- pairwise preferences (revision 0010, issue 12 item 5) ---------------------------------------

panel_preferences = sa.Table(
    "panel_preferences",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("panelist_id", sa.String(32), sa.ForeignKey("panel_applications.id"), nullable=False),
    sa.Column("run_a", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
    sa.Column("run_b", sa.String(32), sa.ForeignKey("panel_runs.id"), nullable=False),
    sa.Column("preferred", sa.String(8), nullable=False),
    sa.Column("by_admin", sa.String(32), sa.ForeignKey("admins.id"), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_panel_preferences_panelist", "panelist_id"),
    sa.CheckConstraint("preferred IN ('a', 'b', 'tie')", name="ck_panel_preferences_preferred"),
    sa.CheckConstraint("run_a <> run_b", name="ck_panel_preferences_distinct"),
)
"""One panelist's preference between two runs of one environment: `a` (run_a was better), `b`, or
`tie`. Re-submitting for the same unordered pair adds a row; the latest per (panelist, pair) counts
on the board (`assay.stats.panel.latest_preferences`), the earlier ones stay as history."""

PREFERENCE_TABLES: tuple[str, ...] = ("panel_preferences",)
"""Tables 0010 creates, append-only and (on PostgreSQL) under row-level security."""

# -- links to Assay runs (revision 0012, issue 12 item 7) ----------------------------------------

panel_run_links = sa.Table(
    "panel_run_links",
    metadata,
    sa.Column("panel_run_id", sa.String(32), sa.ForeignKey("panel_runs.id"), primary_key=True),
    sa.Column("assay_run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_panel_run_links_assay_run", "assay_run_id"),
)
"""The Assay run a panel run scored (`assay_run` on `create-run`), so the judge's trait means and
the panel's medians can be compared on the same runs (`assay agreement`). At most one per panel
run, written in the transaction that creates it; `panel_runs` itself is left as 0008 made it."""

LINK_TABLES: tuple[str, ...] = ("panel_run_links",)
"""Tables 0012 creates, append-only and (on PostgreSQL) under row-level security."""
