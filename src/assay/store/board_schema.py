"""The board's tables (releases, accounts, submissions, sweeps, events) and its views, as Core.

The tables share `schema.metadata`, so Alembic and `compare_metadata` see one schema; they are
built by the `0002_board` migration. Everything here is append-only (enforced by triggers):
a handle change, a publication, a note, a config value, an era is a *new row*, and "current"
is always the latest row, computed in a view or a query, never UPDATEd.

Nothing here stores a rank, a score or a rate (docs/architecture.md, invariant 2). Those come from the SQL
views created by `0002_board` — `board_run_facts`, `board_case_facts`, `board_submission_facts`,
`board_entries` and friends — which the lightweight `sa.table` handles at the bottom of this
module let queries name. The views are the same SQL text on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, json_type, metadata

VISIBILITIES = ("public", "unlisted", "internal")

suite_releases = sa.Table(
    "suite_releases",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("suite_key", sa.String, nullable=False),
    sa.Column("version", sa.String, nullable=False),
    sa.Column("title", sa.String, nullable=False),
    sa.Column("language", sa.String, nullable=False),
    sa.Column("visibility", sa.String, nullable=False),
    sa.Column("reps_per_scenario", sa.Integer, nullable=False),
    sa.Column("facilitator_model", sa.String, nullable=True),
    sa.Column("judge", json_type(), nullable=True),
    sa.Column("baselines", json_type(), nullable=False),
    sa.Column("known_limitations", json_type(), nullable=False),
    sa.Column("card", sa.Text, nullable=False),
    sa.Column("owner", sa.String, nullable=True),
    sa.Column("document", json_type(), nullable=False),
    sa.Column("release_hash", sa.String(64), nullable=False),
    sa.Column("builtin", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("suite_key", "version", name="uq_suite_releases_key_version"),
    sa.CheckConstraint("visibility IN ('public', 'unlisted', 'internal')", name="ck_suite_releases_visibility"),
)

release_scenarios = sa.Table(
    "release_scenarios",
    metadata,
    sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), primary_key=True),
    sa.Column("ordinal", sa.Integer, primary_key=True),
    sa.Column("case_id", sa.String, nullable=False),
    sa.Column("scenario_hash", sa.String(64), sa.ForeignKey("scenario_versions.content_hash"), nullable=False),
    sa.Column("scenario_version", sa.Integer, nullable=False),
    sa.UniqueConstraint("release_id", "case_id", name="uq_release_scenarios_case"),
)

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

account_handles = sa.Table(
    "account_handles",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
    # NULL is a revocation: the account has no public handle from this row on.
    sa.Column("handle", sa.String, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_account_handles_account", "account"),
)

submissions = sa.Table(
    "submissions",
    metadata,
    sa.Column("id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
    sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
    sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
    sa.Column("label", sa.String, nullable=False),
    sa.Column("play_model", sa.String, nullable=True),
    sa.Column("byok", sa.Boolean, nullable=False),
    sa.Column("baseline", sa.Boolean, nullable=False),
    sa.Column("publish_requested", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_submissions_account_release", "account", "release_id"),
)

submission_runs = sa.Table(
    "submission_runs",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    # NULL marks a legacy run that predates the field: its submission is `unclassified`.
    sa.Column("ranked_eligible", sa.Boolean, nullable=True),
    sa.Index("ix_submission_runs_submission", "submission_id"),
)

run_sweeps = sa.Table(
    "run_sweeps",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    # What the run did (observed) next to the participation floor in force when it was swept;
    # whether it is gated is computed by `board_run_facts`, not stored.
    sa.Column("player_messages", sa.Integer, nullable=False),
    sa.Column("actions", sa.Integer, nullable=False),
    sa.Column("min_player_messages", sa.Integer, nullable=False),
    sa.Column("min_actions_per_turn", sa.Float, nullable=False),
    sa.Column("facilitator_model", sa.String, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_run_sweeps_submission", "submission_id"),
)

win_condition_outcomes = sa.Table(
    "win_condition_outcomes",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("condition_id", sa.String, primary_key=True),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("met", sa.Boolean, nullable=False),
)

submission_finalisations = sa.Table(
    "submission_finalisations",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    # The era stamp, applied once: the era in force at the submission's creation time.
    sa.Column("measurement_era", sa.String, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

publication_events = sa.Table(
    "publication_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    sa.Column("published", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_publication_events_submission", "submission_id"),
)

variance_notes = sa.Table(
    "variance_notes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    # An empty text withdraws the note.
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_variance_notes_submission", "submission_id"),
)

platform_config = sa.Table(
    "platform_config",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String, nullable=False),
    sa.Column("value", json_type(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_platform_config_key", "key"),
)

measurement_eras = sa.Table(
    "measurement_eras",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("starts_at", UTCDateTime(), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("name", name="uq_measurement_eras_name"),
)

#: Revision 0011: a bring-your-own submission its owner published *unlisted* (reachable by its id,
#: never listed on the public board). One row per such submission, never removed.
unlisted_submissions = sa.Table(
    "unlisted_submissions",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

BOARD_TABLES: tuple[str, ...] = (
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
"""Tables 0002_board creates, every one append-only."""

BOARD_VIEWS: tuple[str, ...] = (
    "current_handles",
    "current_publication",
    "current_variance_notes",
    "current_config",
    "current_era",
    "board_run_facts",
    "board_case_facts",
    "board_submission_facts",
    "board_entries",
    "board_unlisted_entries",
    "board_facilitator_models",
)
"""The board views (`assay.store.views.CURRENT`), in dependency order."""

# -- the views, for queries (lightweight: not part of the metadata, never created from here) ----
# Timestamps are typed so they come back as aware UTC datetimes on both backends, as from tables.

_TIMESTAMPS = {"created_at", "starts_at"}


def _col(name: str) -> sa.ColumnClause[object]:
    return sa.column(name, UTCDateTime()) if name in _TIMESTAMPS else sa.column(name)


board_run_facts = sa.table(
    "board_run_facts",
    *(_col(n) for n in (
        "submission_id", "release_id", "run_id", "slot", "case_id", "rep", "seed", "status", "has_run",
        "n_checks", "score", "safety_failures", "passed", "claimed_success", "false_success", "swept",
        "scored", "gated", "included", "ranked_eligible", "win_total", "win_met", "player_messages",
        "actions", "judged",
    )),
)

board_case_facts = sa.table(
    "board_case_facts",
    *(_col(n) for n in ("submission_id", "case_id", "n_included", "n_passed", "consistent")),
)

board_submission_facts = sa.table(
    "board_submission_facts",
    *(_col(n) for n in (
        "submission_id", "release_id", "account", "label", "play_model", "byok", "baseline",
        "publish_requested", "created_at", "n_planned", "n_recorded", "n_scored", "n_gated", "n_runs",
        "n_passed", "n_false_successes", "n_cases", "n_consistent_cases", "win_total", "win_met",
        "pass_rate", "consistency", "false_success_rate", "objective_met_rate", "status",
        "leaderboard_class", "model_provenance", "published", "public_handle", "variance_note",
        "finalised", "measurement_era", "measurement_era_is_current", "listed",
    )),
)

_ENTRY_COLUMNS = (*(c.name for c in board_submission_facts.c if c.name != "listed"), "rank")

board_entries = sa.table("board_entries", *(_col(n) for n in _ENTRY_COLUMNS))
board_unlisted_entries = sa.table("board_unlisted_entries", *(_col(n) for n in _ENTRY_COLUMNS))

board_facilitator_models = sa.table(
    "board_facilitator_models", sa.column("submission_id"), sa.column("facilitator_model"),
)

current_handles = sa.table("current_handles", sa.column("account"), sa.column("handle"))
current_config = sa.table("current_config", sa.column("key"), sa.column("value"), _col("created_at"))
current_era = sa.table("current_era", sa.column("name"), _col("starts_at"))
