"""Exports anyone can verify: seed salts, and digests over what the public may see (issue 23, item 2).

- `seed_salts`: one random salt per planned run (32 bytes from `secrets`, 64 hex digits). A run's
  *seed commitment* is SHA-256 over `b"assay-seed-commitment/1:" + <seed, decimal> + b":" + <salt>`;
  a public export shows the commitment, never the seed. Every planned run stored before this
  revision gets its salt here.
- `digest_stamps`: a submission's digest per digest version (>= 2). Digest version 2 hashes what a
  public export holds: planned runs with their seed commitment instead of their seed, and none of
  the secret or private columns (base seed, agent spec and load options, facilitator endpoint,
  account name, final state). Every submission finalised before this revision whose rows still add
  up to its version-1 stamp (`submission_digests`) is stamped with version 2 here, so the new stamp
  vouches for exactly the rows the old one did; one without a version-1 stamp (finalised before
  0009), or whose rows no longer add up to it, is not stamped (a stamp made now would vouch for
  rows as they are today). Version-1 stamps stay as they were.

Both tables are append-only (triggers), and on PostgreSQL under row-level security like every
other table. Everything is spelled out here (tables, triggers, policies, the canonical JSON and
both digest versions, frozen as they stood), not taken from the live modules, so this revision
stays what it was.

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import rfc8785
import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("seed_salts", "digest_stamps")
_CHUNK = 500
_MAX_SAFE_INT = 2**53 - 1

# -- the parts of digest versions 1 and 2, as they stood -------------------------------------------

#: (table, owner, owner column, primary key, version-1 columns)
_PARTS: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("submissions", "submission", "id", ("id",),
     ("id", "account", "release_id", "label", "play_model", "byok", "baseline", "publish_requested", "created_at")),
    ("batches", "submission", "id", ("id",),
     ("id", "kind", "suite_key", "suite_version", "agent_spec", "agent_label", "config_signature", "harness_version",
      "trials", "base_seed", "created_at")),
    ("batch_agents", "submission", "batch_id", ("batch_id",),
     ("batch_id", "load_spec", "options", "turn_limit", "time_limit", "created_at")),
    ("batch_facilitators", "submission", "batch_id", ("batch_id",), ("batch_id", "spec", "base_url", "created_at")),
    ("submission_rubrics", "submission", "submission_id", ("submission_id",),
     ("submission_id", "rubric_hash", "document", "created_at")),
    ("planned_runs", "submission", "batch_id", ("batch_id", "slot"),
     ("batch_id", "slot", "run_id", "case_id", "scenario_hash", "trial", "seed")),
    ("submission_runs", "submission", "submission_id", ("run_id",), ("run_id", "submission_id", "ranked_eligible")),
    ("runs", "run", "run_id", ("run_id",),
     ("run_id", "status", "reason", "claimed_success", "claim_summary", "turns", "final_state_hash", "final_state",
      "transcript", "actions", "duration_ms", "created_at", "schema_version")),
    ("check_outcomes", "run", "run_id", ("run_id", "check_id"),
     ("run_id", "check_id", "ordinal", "weight", "safety", "passed")),
    ("remote_steps", "run", "run_id", ("run_id", "step"),
     ("run_id", "step", "kind", "reply", "reason", "digest", "elapsed", "created_at")),
    ("run_sweeps", "submission", "submission_id", ("run_id",),
     ("run_id", "submission_id", "player_messages", "actions", "min_player_messages", "min_actions_per_turn",
      "facilitator_model", "created_at")),
    ("win_condition_outcomes", "run", "run_id", ("run_id", "condition_id"), ("run_id", "condition_id", "ordinal", "met")),
    ("judge_configs", "submission", "submission_id", ("submission_id",),
     ("submission_id", "spec", "model", "prompt_version", "prompt_hash", "passes", "min_valid", "temperature",
      "rubric_hash", "created_at")),
    ("judge_passes", "submission", "submission_id", ("id",),
     ("id", "submission_id", "run_id", "pass_index", "valid", "verdicts", "rationale", "raw", "error", "error_kind",
      "attempts", "created_at")),
)
_V2_DROPPED = {"submissions": ("account",), "batches": ("agent_spec", "base_seed"),
               "batch_agents": ("load_spec", "options"), "batch_facilitators": ("base_url",),
               "planned_runs": ("seed",), "runs": ("final_state",)}


def _columns(table: str, cols: tuple[str, ...], version: int) -> tuple[str, ...]:
    if version == 1:
        return cols
    kept = tuple(c for c in cols if c not in _V2_DROPPED.get(table, ()))
    return kept + ("seed_commitment",) if table == "planned_runs" else kept


# -- the bytes, as they stood ---------------------------------------------------------------------


def _plain(value: Any) -> Any:
    t = type(value)
    if value is None or t is str or t is bool:
        return value
    if t is int:
        return value if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT else str(value)
    if t is float:
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        return str(int(value)) if _MAX_SAFE_INT < abs(value) < 1e21 else value
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
        return moment.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int):
        return _plain(int(value))
    raise TypeError(f"{t.__name__} has no JSON form")


def _canonical(value: Any) -> bytes:
    return rfc8785.dumps(value)


def _commitment(seed: int, salt: str) -> str:
    return hashlib.sha256(b"assay-seed-commitment/1:" + str(int(seed)).encode("ascii") + b":"
                          + salt.encode("ascii")).hexdigest()


def _object(members: list[tuple[str, bytes]]) -> bytes:
    return b"{" + b",".join(json.dumps(k).encode("ascii") + b":" + v for k, v in sorted(members)) + b"}"


#: A stored row as the digest reads it: any table's, by column name (values as the store's types read them).
_Row = Mapping[str, Any]


def _digest(release: dict[str, str], era: str | None, rows: dict[str, list[_Row]], version: int) -> str:
    tables = []
    for table, _owner, _column, key, cols in _PARTS:
        wanted = _columns(table, cols, version)
        given = sorted(rows.get(table, []), key=lambda r: tuple(_plain(r[c]) for c in key))
        tables.append((table, b"[" + b",".join(_canonical(_plain({c: r[c] for c in wanted})) for r in given) + b"]"))
    document = _object([
        ("digest_version", _canonical(version)),
        ("finalisation", _canonical({"measurement_era": era})),
        ("release", _canonical(_plain({f: release[f] for f in ("suite_key", "version", "release_hash")}))),
        ("rows", _object(tables)),
    ])
    return hashlib.sha256(document).hexdigest()


# -- the rows, read as the store's types read them --------------------------------------------------


class _UTC(sa.TypeDecorator[datetime]):
    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class _Json(sa.TypeDecorator[Any]):
    impl = sa.JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


_TYPES: dict[str, type[sa.types.TypeEngine[Any]]] = {
    "created_at": _UTC, "document": _Json, "options": _Json, "final_state": _Json, "transcript": _Json,
    "actions": _Json, "reply": _Json, "verdicts": _Json, "rationale": _Json,
    "byok": sa.Boolean, "baseline": sa.Boolean, "publish_requested": sa.Boolean, "ranked_eligible": sa.Boolean,
    "claimed_success": sa.Boolean, "safety": sa.Boolean, "passed": sa.Boolean, "met": sa.Boolean,
    "valid": sa.Boolean, "time_limit": sa.Float, "elapsed": sa.Float, "min_actions_per_turn": sa.Float,
    "temperature": sa.Float,
}


_INTEGERS = {"release_id", "slot", "trial", "turns", "duration_ms", "schema_version", "ordinal", "weight", "step",
             "player_messages", "min_player_messages", "prompt_version", "passes", "min_valid", "id",
             "pass_index", "attempts", "seed", "base_seed"}


def _type(table: str, column: str) -> sa.types.TypeEngine[Any]:
    if table == "run_sweeps" and column == "actions":  # a count there, the actions themselves in runs
        return sa.Integer()
    if column in _TYPES:
        return _TYPES[column]()
    return sa.Integer() if column in _INTEGERS else sa.String()


def _table(meta: sa.MetaData, name: str, cols: tuple[str, ...]) -> sa.Table:
    return sa.Table(name, meta, *(sa.Column(c, _type(name, c)) for c in cols))


def _restamp(conn: sa.Connection, now: datetime) -> None:
    meta = sa.MetaData()
    parts = [(name, owner, column, _table(meta, name, cols)) for name, owner, column, _key, cols in _PARTS]
    planned = sa.table("planned_runs", sa.column("batch_id"), sa.column("run_id"))
    salts = sa.table("seed_salts", sa.column("run_id"), sa.column("salt"))
    stamps = conn.execute(sa.text(
        "SELECT d.submission_id, d.digest, f.measurement_era, r.suite_key, r.version, r.release_hash "
        "FROM submission_digests d JOIN submission_finalisations f ON f.submission_id = d.submission_id "
        "JOIN submissions s ON s.id = d.submission_id JOIN suite_releases r ON r.id = s.release_id "
        "ORDER BY d.submission_id")).all()
    for stamp in stamps:
        sid = stamp.submission_id
        run_ids = sa.select(planned.c.run_id).where(planned.c.batch_id == sid)
        rows: dict[str, list[_Row]] = {}
        for name, owner, column, table in parts:
            where = table.c[column] == sid if owner == "submission" else table.c[column].in_(run_ids)
            rows[name] = [dict(r._mapping) for r in conn.execute(sa.select(table).where(where))]
        release = {"suite_key": stamp.suite_key, "version": stamp.version, "release_hash": stamp.release_hash}
        if _digest(release, stamp.measurement_era, rows, 1) != stamp.digest:
            continue  # its rows no longer add up to the stamp it was finalised with: vouch for nothing
        salt_of = dict(conn.execute(sa.select(salts.c.run_id, salts.c.salt).where(salts.c.run_id.in_(run_ids))).all())
        rows["planned_runs"] = [{**r, "seed_commitment": _commitment(r["seed"], salt_of[r["run_id"]])}
                                for r in rows["planned_runs"]]
        conn.execute(sa.text("INSERT INTO digest_stamps (submission_id, digest_version, digest, created_at) "
                             "VALUES (:s, 2, :d, :now)").bindparams(
            sa.bindparam("now", now, type_=sa.DateTime(timezone=True))),
            {"s": sid, "d": _digest(release, stamp.measurement_era, rows, 2)})


def _backfill_salts(conn: sa.Connection, now: datetime) -> None:
    missing = list(conn.execute(sa.text(
        "SELECT p.run_id FROM planned_runs p WHERE NOT EXISTS (SELECT 1 FROM seed_salts s WHERE s.run_id = p.run_id) "
        "ORDER BY p.run_id")).scalars())
    insert = sa.text("INSERT INTO seed_salts (run_id, salt, created_at) VALUES (:r, :salt, :now)").bindparams(
        sa.bindparam("now", type_=sa.DateTime(timezone=True)))
    for i in range(0, len(missing), _CHUNK):
        conn.execute(insert, [{"r": r, "salt": secrets.token_hex(32), "now": now} for r in missing[i:i + _CHUNK]])


# -- append-only and row-level security, as they stood ----------------------------------------------

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def _append_only(t: str, postgresql: bool) -> list[str]:
    if not postgresql:
        return [f"CREATE TRIGGER {t}_append_only_update BEFORE UPDATE ON {t} "
                f"BEGIN SELECT RAISE(ABORT, 'assay: {t} is append-only'); END",
                f"CREATE TRIGGER {t}_append_only_delete BEFORE DELETE ON {t} "
                f"BEGIN SELECT RAISE(ABORT, 'assay: {t} is append-only'); END"]
    return [_PG_FUNCTION,
            f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t} "
            "FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
            f"CREATE TRIGGER {t}_append_only_truncate BEFORE TRUNCATE ON {t} "
            "FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()"]


def _drop_append_only(t: str, postgresql: bool) -> list[str]:
    if not postgresql:
        return [f"DROP TRIGGER IF EXISTS {t}_append_only_update", f"DROP TRIGGER IF EXISTS {t}_append_only_delete"]
    return [f"DROP TRIGGER IF EXISTS {t}_append_only ON {t}", f"DROP TRIGGER IF EXISTS {t}_append_only_truncate ON {t}"]


def _secure(t: str) -> list[str]:
    return [f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY", f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY assay_service_read ON {t} FOR SELECT TO assay_service USING (true)",
            f"CREATE POLICY assay_service_append ON {t} FOR INSERT TO assay_service WITH CHECK (true)",
            f"CREATE POLICY assay_owner_all ON {t} FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)"]


def _unsecure(t: str) -> list[str]:
    return [*(f"DROP POLICY IF EXISTS {p} ON {t}" for p in ("assay_service_read", "assay_service_append",
                                                            "assay_owner_all")),
            f"ALTER TABLE {t} NO FORCE ROW LEVEL SECURITY", f"ALTER TABLE {t} DISABLE ROW LEVEL SECURITY"]


def upgrade() -> None:
    op.create_table(
        "seed_salts",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
        sa.Column("salt", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "digest_stamps",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("digest_version", sa.Integer, primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("digest_version >= 2", name="ck_digest_stamps_version"),
    )
    conn = op.get_bind()
    now = datetime.now(timezone.utc)
    _backfill_salts(conn, now)
    _restamp(conn, now)
    postgresql = conn.dialect.name == "postgresql"
    for table in TABLES:
        for statement in _append_only(table, postgresql):
            op.execute(statement)
    if postgresql:
        for table in TABLES:
            for statement in _secure(table):
                op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        if postgresql:
            for statement in _unsecure(table):
                op.execute(statement)
        for statement in _drop_append_only(table, postgresql):
            op.execute(statement)
        op.drop_table(table)
