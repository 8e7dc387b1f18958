"""The store's tables, as SQLAlchemy Core metadata.

This module is what queries are written against; the database itself is built by the Alembic
migrations in `migrations/versions/`, which spell every table out explicitly so that later
migrations can chain after them. `tests/store/test_migrations.py` checks the two agree.

No score, pass or composite column can be edited (docs/architecture.md, invariant 2, "Derived, never
written"): every number on a board is computed from these append-only rows. The one row that holds
a score is the scorer's verdict on a run (`run_verdicts`, 0013): appended once, with the run, by
the one rule (`score.oracle.run_verdict`), stamped with the scorer's version, refused UPDATE and
DELETE like every result row, and held by `assay verify` to the rule applied to the run's check
outcomes; the board and the results JSON only sum verdict rows.
The plan (`planned_runs`) is kept apart from what happened (`runs`) so that a slot whose run
never arrived still counts in every denominator (invariant 5, "Failures count").
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from assay.records import STATUSES

metadata = sa.MetaData()


class JsonDocument(sa.TypeDecorator[Any]):
    """JSON everywhere, JSONB on PostgreSQL (indexable, and validated on the way in).

    JSONB keeps numbers as `numeric`, which prints a float of magnitude >= 1e16 with no decimal
    point, so such a float reads back as an int (equal only when the float is an exact
    integer, e.g. 1e16 but not 1e23). Smaller floats, all ints, strings, bools and null
    round-trip exactly on both backends. `jsonvalue.dumps` refuses what JSONB cannot hold.

    JSONB is chosen when a PostgreSQL connection asks, so a SQLite store never imports the
    PostgreSQL dialect (a `with_variant` would, on every command).
    """

    impl = sa.JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


def json_type() -> sa.types.TypeEngine[Any]:
    """The type of every JSON column (`JsonDocument`)."""
    return JsonDocument()


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware timestamp that always comes back in UTC.

    SQLite has no timestamp-with-time-zone, so SQLAlchemy stores its text without the offset and
    hands back a naive datetime; PostgreSQL hands back the session's time zone. Normalising both
    to aware UTC keeps the two backends indistinguishable to callers. Naive datetimes are refused
    on the way in: a timestamp whose zone is a guess is not a pinned timestamp.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("assay stores timezone-aware timestamps only")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


def utcnow() -> datetime:
    """The one clock the store uses for `created_at`: Python's, in UTC (never the server's)."""
    return datetime.now(timezone.utc)


STATUS_CHECK = "status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")"
"""Every run ends in exactly one of the contract's statuses (docs/architecture.md, Run outcomes)."""

scenario_versions = sa.Table(
    "scenario_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("case_id", sa.String, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("checks_hash", sa.String(64), nullable=False),
    sa.Column("frozen_on", sa.String(10), nullable=True),
    sa.Column("kit", sa.String, nullable=False),
    sa.Column("title", sa.String, nullable=False),
    sa.Column("language", sa.String, nullable=False),
    sa.Column("document", json_type(), nullable=False),
    sa.Column("world_fingerprint", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_scenario_versions_case_id", "case_id"),
    sa.UniqueConstraint("content_hash", name="uq_scenario_versions_content_hash"),
    sa.UniqueConstraint("case_id", "version", name="uq_scenario_versions_case_version"),
)

batches = sa.Table(
    "batches",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("suite_key", sa.String, nullable=False),
    sa.Column("suite_version", sa.String, nullable=True),
    sa.Column("agent_spec", sa.String, nullable=False),
    sa.Column("agent_label", sa.String, nullable=False),
    sa.Column("config_signature", sa.String(64), nullable=False),
    sa.Column("harness_version", sa.String, nullable=False),
    sa.Column("trials", sa.Integer, nullable=False),
    sa.Column("base_seed", sa.BigInteger, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_batches_created_at", "created_at"),
)

planned_runs = sa.Table(
    "planned_runs",
    metadata,
    sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
    sa.Column("slot", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("case_id", sa.String, nullable=False),
    sa.Column(
        "scenario_hash",
        sa.String(64),
        sa.ForeignKey("scenario_versions.content_hash"),
        nullable=False,
    ),
    sa.Column("trial", sa.Integer, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("run_id", name="uq_planned_runs_run_id"),
    # 0004: one slot per (batch, scenario, rep), by the database
    sa.Index("uq_planned_runs_scenario_rep", "batch_id", "scenario_hash", "trial", unique=True),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("status", sa.String, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("claimed_success", sa.Boolean, nullable=True),
    sa.Column("claim_summary", sa.Text, nullable=True),
    sa.Column("turns", sa.Integer, nullable=False),
    sa.Column("final_state_hash", sa.String(64), nullable=False),
    sa.Column("final_state", json_type(), nullable=False),
    sa.Column("transcript", json_type(), nullable=False),
    sa.Column("actions", json_type(), nullable=False),
    sa.Column("duration_ms", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    # 0003: which version of assay.records wrote the row (older rows are version 1)
    sa.Column("schema_version", sa.Integer, nullable=False, server_default=sa.text("1")),
    sa.CheckConstraint(STATUS_CHECK, name="ck_runs_status"),
    sa.Index("ix_runs_created_at", "created_at"),  # 0021: the runs recorded lately (the sweeper's)
)

check_outcomes = sa.Table(
    "check_outcomes",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("check_id", sa.String, primary_key=True),
    # Position in the list the scorer produced: neither backend promises row order without one,
    # and "checks in stored order" is part of the read contract.
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("weight", sa.Integer, nullable=False),
    sa.Column("safety", sa.Boolean, nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
)

# -- 0013: one rule, one place -----------------------------------------------------------------

#: The scorer's verdict on a recorded run (issue 8, item 5), appended in the transaction that
#: records the run and its check outcomes. A planned run with no run has no verdict: it stays a
#: failure in every denominator (invariant 5).
run_verdicts = sa.Table(
    "run_verdicts",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
    sa.Column("scorer_version", sa.String, nullable=False),
    sa.Column("score", sa.Integer, nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
    # how many safety checks failed (the board sums counts; their ids are the check outcomes')
    sa.Column("safety_failures", sa.Integer, nullable=False),
    sa.Column("false_success", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

VERDICT_APPEND_ONLY_TABLES: tuple[str, ...] = ("run_verdicts",)
"""Tables 0013 makes append-only."""

# -- 0004: durable batches ---------------------------------------------------------------------

batch_agents = sa.Table(
    "batch_agents",
    metadata,
    sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
    # the spec as another process loads it (a python file's path made absolute)
    sa.Column("load_spec", sa.String, nullable=False),
    # what load_agent was given besides the spec; never an API key
    sa.Column("options", json_type(), nullable=False),
    sa.Column("turn_limit", sa.Integer, nullable=False),
    sa.Column("time_limit", sa.Float, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

#: Processes that claim slots, with a heartbeat: operational liveness, the one updated table.
claim_holders = sa.Table(
    "claim_holders",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
    sa.Column("ended_at", UTCDateTime(), nullable=True),
    # 0021: the holders not ended, by host (remote play's live leases, without a scan); its
    # PostgreSQL predicate is named by `name_postgresql_options`, when a PostgreSQL engine is made
    sa.Index("ix_claim_holders_live", "host", sqlite_where=sa.text("ended_at IS NULL")),
)


def name_postgresql_options() -> None:
    """Give the metadata its PostgreSQL-only options (the live holders' partial index predicate).
    Naming one imports SQLAlchemy's PostgreSQL dialect (every driver module of it), so it is done
    when a PostgreSQL engine is made (`store.db.make_engine`), not at import: a command on a
    SQLite store never loads that dialect, a few tens of ms of every process. Idempotent."""
    for index in claim_holders.indexes:
        if index.name == "ix_claim_holders_live":
            index.dialect_options["postgresql"]["where"] = sa.text("ended_at IS NULL")

run_claims = sa.Table(
    "run_claims",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("holder", sa.String(32), sa.ForeignKey("claim_holders.id"), nullable=False),
    sa.Column("claimed_at", UTCDateTime(), nullable=False),
    sa.Index("ix_run_claims_holder", "holder"),  # 0021: a holder's claims
)

batch_completions = sa.Table(
    "batch_completions",
    metadata,
    sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

APPEND_ONLY_TABLES: tuple[str, ...] = (
    "scenario_versions",
    "batches",
    "planned_runs",
    "runs",
    "check_outcomes",
)
"""Tables 0001_core makes append-only in the database itself (see `triggers.py`)."""

DURABLE_APPEND_ONLY_TABLES: tuple[str, ...] = ("batch_agents", "run_claims", "batch_completions")
"""Tables 0004 makes append-only (`claim_holders` is the one operational, updated table)."""
