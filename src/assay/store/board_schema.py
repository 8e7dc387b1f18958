"""The board's tables (releases, accounts, submissions, sweeps, events) and its views, as Core.

The tables share `schema.metadata`, so Alembic and `compare_metadata` see one schema; they are
built by the `0002_board` migration. Everything here is append-only (enforced by triggers):
a handle change, a publication, a note, a config value, an era is a *new row*, and "current"
is always the latest row, computed in a view or a query, never UPDATEd.

No result row stores a rank, a score or a rate (docs/architecture.md, invariant 2). The figures are
computed in Python (`assay.stats.board`) from the per-run facts of the view `board_run_facts`
(revision 0018's generation, `assay.store.views.board_0018`), and kept per entry in
`entry_figures`: the one *derived* table, which the service replaces rows of (never a result
table), and which `assay board --recompute` and `assay verify` rebuild from the rows. The views are
the same SQL text on SQLite and PostgreSQL; the lightweight `sa.table` handles at the bottom of
this module let queries name them.
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
    sa.Index("ix_account_handles_created", "created_at"),  # 0020: the board's last change
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
    sa.Index("ix_publication_events_created", "created_at"),  # 0020
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
    sa.Index("ix_unlisted_submissions_created", "created_at"),  # 0020: the board's last change
)

#: Revision 0018: each finalised submission's figures, computed by `stats.board.entry_figures` from
#: its run facts when it completes (and again when a judgement, a sweep or the method changes them).
#: Derived, not a result: its rows are replaced (`BoardRepo.put_figures`), never appended to, and no
#: export holds it. `order_key` sorts a release's entries in the board's order (pages read a range
#: of it); `rank_low`/`rank_high` are the ranking figure's rounded interval of a `ranked` entry, from
#: which a statistical rank is counted at read time; `listed` says whether the public board lists
#: it now (complete, published, its account holding a handle, not unlisted), recomputed from the
#: event rows whenever one of them is appended (`board_repo.relist`).
entry_figures = sa.Table(
    "entry_figures",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
    sa.Column("method", sa.String, nullable=False),
    sa.Column("complete", sa.Boolean, nullable=False),
    sa.Column("ranked", sa.Boolean, nullable=False),
    sa.Column("listed", sa.Boolean, nullable=False),
    sa.Column("order_key", sa.String, nullable=False),
    sa.Column("rank_low", sa.Float, nullable=True),
    sa.Column("rank_high", sa.Float, nullable=True),
    sa.Column("figures", sa.Text, nullable=False),  # canonical JSON text: key order kept on both backends
    sa.Column("shown", sa.Text, nullable=False),  # the board's figure members, as the board text writes them
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_entry_figures_order", "release_id", "listed", "order_key"),
    sa.Index("ix_entry_figures_rank", "release_id", "listed", "ranked", "rank_low"),
    sa.Index("ix_entry_figures_created", "created_at"),  # 0020
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
        "player_messages", "actions", "min_player_messages", "min_actions_per_turn", "facilitator_model",
        "ranked_eligible", "win_total", "win_met", "judged",
    )),
)

board_facilitator_models = sa.table(
    "board_facilitator_models", sa.column("submission_id"), sa.column("facilitator_model"),
)

current_handles = sa.table("current_handles", sa.column("account"), sa.column("handle"))
current_publication = sa.table("current_publication", sa.column("submission_id"), sa.column("published"),
                               sa.column("reason"))
current_variance_notes = sa.table("current_variance_notes", sa.column("submission_id"), sa.column("variance_note"))
current_config = sa.table("current_config", sa.column("key"), sa.column("value"), _col("created_at"))
current_era = sa.table("current_era", sa.column("name"), _col("starts_at"))
