"""Migrations are frozen history: none imports `assay` (a helper changed later would change what an
old revision does), and what they build on PostgreSQL is the schema a new SQLite store is built
from (the snapshot, `store/schema_sqlite.json`): the same tables, columns, indexes, views and
append-only tables, and on PostgreSQL every table under row-level security with the same policies.
(On SQLite, `test_snapshot.py` holds the migrated database equal to the snapshot-built one, DDL text
and all.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import open_store
from assay.store.db import MIGRATIONS_DIR, create_store_engine, migrate

VERSIONS = sorted((MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def _imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.append(node.module)
    return names


def test_there_are_migrations_to_check() -> None:
    assert len(VERSIONS) >= 20 and VERSIONS[0].name.startswith("0001")


@pytest.mark.parametrize("path", VERSIONS, ids=lambda p: p.name.split("_")[0])
def test_no_migration_imports_assay(path: Path) -> None:
    imported = [m for m in _imported_modules(path) if m == "assay" or m.startswith("assay.")]
    assert imported == [], f"{path.name} imports {imported}: inline the SQL it produced at that revision"


def test_the_check_sees_an_import_of_assay(tmp_path: Path) -> None:
    bad = tmp_path / "0099_bad.py"
    bad.write_text("from __future__ import annotations\n\ndef upgrade() -> None:\n"
                   "    from assay.store import rls  # inside a function counts too\n", encoding="utf-8")
    assert _imported_modules(bad) == ["__future__", "assay.store"]


_TRIGGER = re.compile(r"^(?P<table>[a-z_]+)_append_only(_update|_delete|_truncate)?$")


def _portable(engine: sa.Engine) -> dict[str, Any]:
    """What both backends must agree on: tables and their columns, keys and indexes, views, and
    which tables refuse UPDATE and DELETE (by the triggers' names, which differ by backend)."""
    inspector = sa.inspect(engine)
    tables = {}
    for name in sorted(inspector.get_table_names()):
        tables[name] = {
            "columns": [c["name"] for c in inspector.get_columns(name)],
            "nullable": [c["nullable"] for c in inspector.get_columns(name)],
            "pk": inspector.get_pk_constraint(name)["constrained_columns"],
            "fks": sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                          for f in inspector.get_foreign_keys(name)),
            "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                              for i in inspector.get_indexes(name) if not i.get("duplicates_constraint")),
            "uniques": sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(name)),
        }
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            triggers = [r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        else:
            triggers = [r[0] for r in conn.exec_driver_sql(
                "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")]
    append_only, others = set(), set()
    for trigger in triggers:
        match = _TRIGGER.match(trigger)
        if match is None:
            others.add(trigger)
        else:
            append_only.add(match["table"])
    return {"tables": tables, "views": sorted(inspector.get_view_names()), "append_only": sorted(append_only),
            "other_triggers": others}


def test_postgresql_migrated_from_0001_holds_the_snapshots_schema(pg_server: Any, tmp_path: Path) -> None:
    built = open_store(f"sqlite:///{tmp_path / 'from-snapshot.db'}")  # a new SQLite store: the snapshot
    with pg_server.scratch("frozen") as name:
        migrated = create_store_engine(pg_server.url(name))
        try:
            _compare(built.engine, migrated)
        finally:
            built.close()
            migrated.dispose()


def _compare(built: sa.Engine, migrated: sa.Engine) -> None:
    assert migrate(migrated)  # every revision, 0001 to head
    want, got = _portable(built), _portable(migrated)
    assert set(got["tables"]) == set(want["tables"])
    for name in want["tables"]:
        assert got["tables"][name] == want["tables"][name], name
    assert got["views"] == want["views"]
    assert got["append_only"] == want["append_only"]
    # PostgreSQL's one more: TRUNCATE of alembic_version refused (0015), which SQLite has no statement for
    assert want["other_triggers"] == set() and got["other_triggers"] == {"alembic_version_keep"}
    assert len(want["append_only"]) > 30 and len(want["views"]) > 5
    with migrated.connect() as conn:
        policies: dict[str, set[str]] = {}
        for table, policy in conn.exec_driver_sql(
                "SELECT tablename, policyname FROM pg_policies WHERE schemaname = current_schema()"):
            policies.setdefault(table, set()).add(policy)
        forced = {r[0] for r in conn.exec_driver_sql(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relrowsecurity AND relforcerowsecurity "
            "AND relnamespace = current_schema()::regnamespace")}
    # every table (the snapshot's, and alembic_version) is secured, with at least the three policies
    assert forced == set(want["tables"]) | {"alembic_version"}
    for table in forced:
        assert {"assay_service_read", "assay_owner_all"} <= policies.get(table, set()), table
