"""A new SQLite store is built from the schema snapshot (`store/snapshot.py`), and what it builds is
what the migrations build: the same tables, columns, keys, indexes, views and triggers, by
inspection of both databases, so a migration added without regenerating the snapshot fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import db as store_db
from assay.store import open_store, snapshot
from assay.store.db import create_store_engine, migrate


def _schema(engine: sa.Engine) -> dict[str, Any]:
    """Everything inspection says of a database's schema, in comparable form."""
    inspector = sa.inspect(engine)
    tables = {}
    for name in sorted(inspector.get_table_names()):
        tables[name] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in inspector.get_columns(name)],
            "pk": inspector.get_pk_constraint(name)["constrained_columns"],
            "fks": sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                          for f in inspector.get_foreign_keys(name)),
            "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(name)),
            "uniques": sorted((u["name"] or "", tuple(u["column_names"])) for u in inspector.get_unique_constraints(name)),
            "checks": sorted((c["name"] or "", c["sqltext"]) for c in inspector.get_check_constraints(name)),
        }
    with engine.connect() as conn:
        master = {(r.type, r.name): r.sql for r in conn.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master WHERE type IN ('view', 'trigger')")}
        revision = [r[0] for r in conn.exec_driver_sql("SELECT version_num FROM alembic_version")]
    return {"tables": tables, "views_and_triggers": master, "revision": revision}


def test_the_snapshot_is_at_head_and_is_what_the_migrations_build(tmp_path: Path) -> None:
    migrated = create_store_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    built = create_store_engine(f"sqlite:///{tmp_path / 'built.db'}")
    try:
        assert migrate(migrated, snapshot=False)
        with migrated.connect() as conn:
            fresh = snapshot.capture(conn)
        # a migration added without `python -m assay.store.refresh_snapshot` fails here
        assert snapshot.load() == fresh, "the schema snapshot is stale: run python -m assay.store.refresh_snapshot"
        assert fresh.revision == store_db.HEAD_REVISION
        assert snapshot.SNAPSHOT_PATH.read_text(encoding="utf-8") == fresh.as_json()  # the file, byte for byte
        assert migrate(built)  # from the snapshot
        assert _schema(built) == _schema(migrated)
        assert len(_schema(built)["views_and_triggers"]) > 0
    finally:
        migrated.dispose()
        built.dispose()


@pytest.mark.heavy  # starts a process
def test_a_new_sqlite_store_is_built_without_alembic_and_then_opens_at_head(tmp_path: Path) -> None:
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'new.db'}"
    code = ("import sys; from assay.store import open_store; open_store(sys.argv[1]).close(); "
            "sys.exit('alembic' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr or "alembic was imported to make a new store"
    store = open_store(url)
    try:
        with store.engine.connect() as conn:
            assert store_db.current_revisions(conn) == store_db.head_revisions()
    finally:
        store.close()


def test_a_stale_snapshot_or_a_database_not_empty_leaves_it_to_the_migrations(tmp_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with engine.connect().execution_options(**{store_db.Store.WRITE_OPTION: True}) as conn, conn.begin():
            assert not snapshot.build(conn, "0000")  # not the snapshot's revision: nothing done
            assert conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar() == 0
            conn.exec_driver_sql("CREATE TABLE other (x INTEGER)")
            assert not snapshot.build(conn, store_db.HEAD_REVISION)  # not empty: nothing done
            assert [r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master")] == ["other"]
    finally:
        engine.dispose()
