"""A new SQLite store built from a snapshot of the schema the migrations leave, not by running them.

Running the seventeen-odd migrations on an empty file costs about a third of a second (Alembic,
Mako, every revision's module), every time a new store is made: each test's, each `--db` given
for the first time. The snapshot is the DDL a migrated SQLite database holds (`sqlite_master`:
its tables, indexes, triggers and views, in the order they were made) and the revision it is at;
a new store replays it in one write transaction and is stamped at that revision. It is used only
when it is at `HEAD_REVISION` and the database is empty; otherwise (an existing store, a stale
snapshot, PostgreSQL, whose roles, grants and policies the migrations set) the migrations run as
before. `tests/store/test_snapshot.py` holds the snapshot equal to what the migrations build; after
a new migration, regenerate it:

    python -m assay.store.refresh_snapshot   # rewrites store/schema_sqlite.json from a migrated scratch file
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import sqlalchemy as sa

SNAPSHOT_PATH = Path(__file__).resolve().parent / "schema_sqlite.json"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A migrated SQLite database's schema: the revision it is at (None: not exactly one) and its
    DDL, in creation order. `schema_sqlite.json` is `as_json()`, these two keys in this order."""

    revision: str | None
    statements: tuple[str, ...]

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "statements": list(self.statements)}, indent=1) + "\n"


def capture(conn: sa.Connection) -> Snapshot:
    """The schema of a migrated SQLite database: its revision and its DDL, in creation order."""
    revision = [r[0] for r in conn.exec_driver_sql("SELECT version_num FROM alembic_version")]
    statements = tuple(r[0] for r in conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"))
    return Snapshot(revision[0] if len(revision) == 1 else None, statements)


def load() -> Snapshot | None:
    """The stored snapshot; None if it is missing or not a snapshot (the migrations then build)."""
    try:
        data = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    revision, statements = data.get("revision"), data.get("statements")
    if not isinstance(revision, str) or not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        return None
    return Snapshot(revision, tuple(statements))


def build(conn: sa.Connection, head: str) -> bool:
    """Build the schema on the empty SQLite database `conn` is a write transaction on, from the
    snapshot, if it is at `head`; False (nothing done) when there is no such snapshot or the
    database is not empty (another process made it meanwhile: the migrations decide)."""
    snapshot = load()
    if snapshot is None or snapshot.revision != head:
        return False
    if conn.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").scalar():
        return False
    for statement in snapshot.statements:
        conn.exec_driver_sql(statement)
    conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head})
    return True
