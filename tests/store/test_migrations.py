"""Migrations build the schema on an empty database, on both backends, and re-opening is cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from assay.errors import BadInput
from assay.store import Store, open_store
from assay.store import db as store_db
from assay.store.board_schema import BOARD_TABLES
from assay.store.schema import APPEND_ONLY_TABLES, DURABLE_APPEND_ONLY_TABLES, metadata
from assay.store.triggers import append_only
from assay.store.runs_repo import RunsRepo

from ._factories import scenario

TABLES = {"scenario_versions", "batches", "planned_runs", "runs", "check_outcomes"}
DURABLE = {"batch_agents", "claim_holders", "run_claims", "batch_completions"}
#: The newest migration file's revision: the chain is numbered, one file per revision.
LATEST = max(p.name.split("_")[0] for p in (store_db.MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def test_empty_database_migrates_to_head(db_url: str) -> None:
    engine = sa.create_engine(db_url)
    assert sa.inspect(engine).get_table_names() == []
    engine.dispose()

    store = open_store(db_url)
    try:
        inspector = sa.inspect(store.engine)
        # every table the code queries was built, and nothing else (later issues' tables join
        # `metadata` through their own schema modules)
        assert TABLES | set(BOARD_TABLES) | DURABLE <= set(metadata.tables)
        assert set(inspector.get_table_names()) == set(metadata.tables) | {"alembic_version"}
        with store.engine.connect() as conn:
            assert store_db.current_revisions(conn) == store_db.head_revisions() == {LATEST}
        assert [c["name"] for c in inspector.get_columns("runs")] == [
            "run_id", "status", "reason", "claimed_success", "claim_summary", "turns",
            "final_state_hash", "final_state", "transcript", "actions", "duration_ms",
            "created_at", "schema_version",
        ]
        assert inspector.get_pk_constraint("planned_runs")["constrained_columns"] == [
            "batch_id", "slot",
        ]
        assert inspector.get_pk_constraint("check_outcomes")["constrained_columns"] == [
            "run_id", "check_id",
        ]
    finally:
        store.close()


def test_schema_module_matches_what_migrations_built(db_url: str) -> None:
    """Queries are written against schema.py; the database is built by 0001_core. Same shape."""
    store = open_store(db_url)
    try:
        with store.engine.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diffs == []
    finally:
        store.close()


def test_no_score_column_anywhere_but_the_scorers_verdicts(store: Store) -> None:
    """Derived, never written: nothing stores a score, pass mark or composite, but the scorer's own
    verdict on a run (issue 8, item 5: one rule, one place), which is append-only (`test_append_only`),
    stamped with the scorer's version, and held by `assay verify` to the rule over the run's checks."""
    inspector = sa.inspect(store.engine)
    for table in inspector.get_table_names():
        for column in inspector.get_columns(table):
            if table == "run_verdicts":
                continue
            assert not any(w in column["name"] for w in ("score", "composite", "pass_rate")), (
                table, column["name"],
            )
    assert {c["name"] for c in inspector.get_columns("run_verdicts")} == {
        "run_id", "scorer_version", "score", "passed", "safety_failures", "false_success", "created_at"}


def test_reopen_is_idempotent_and_skips_the_upgrade(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_store(db_url)
    version = RunsRepo(first).add_scenario_version(**scenario())
    first.close()

    def no_upgrade(*args: object, **kwargs: object) -> None:
        raise AssertionError("upgrade ran on a database already at head")

    monkeypatch.setattr(command, "upgrade", no_upgrade)
    again = open_store(db_url)
    try:
        assert RunsRepo(again).scenario_versions("estate-001")[0].version == version == 1
        assert store_db.migrate(again.engine) is False
    finally:
        again.close()


def test_the_known_head_is_alembics_head() -> None:
    """`HEAD_REVISION` lets an up-to-date store open without Alembic; it must be the real head."""
    assert {store_db.HEAD_REVISION} == store_db.head_revisions() == {LATEST}


def test_opening_an_up_to_date_store_does_not_import_alembic(db_url: str) -> None:
    """Opening happens on every command: the fast path is one query, not Alembic and Mako."""
    open_store(db_url).close()
    probe = ("import sys; from assay.store import open_store; s = open_store(sys.argv[1]); s.close(); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))")
    shown = subprocess.run([sys.executable, "-c", probe, db_url], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


def test_migrations_downgrade_and_run_forward_again(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.engine.connect().execution_options(assay_write=True) as conn, conn.begin():
            command.downgrade(store_db._alembic_config(conn), "base")
        assert set(sa.inspect(store.engine).get_table_names()) <= {"alembic_version"}
        assert store_db.migrate(store.engine) is True
        assert TABLES <= set(sa.inspect(store.engine).get_table_names())
    finally:
        store.close()


def test_a_schema_newer_than_the_code_is_refused(db_url: str) -> None:
    open_store(db_url).close()
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    with pytest.raises(BadInput, match="revision 0099, newer than this assay knows"):
        open_store(db_url)


def test_every_core_table_is_declared_append_only() -> None:
    assert set(APPEND_ONLY_TABLES) == TABLES
    assert set(DURABLE_APPEND_ONLY_TABLES) == DURABLE - {"claim_holders"}




@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_append_only_helper_gives_ddl_for_later_migrations(dialect: str) -> None:
    ddl = " ".join(append_only("submissions", dialect))
    assert "submissions" in ddl and "append-only" in ddl
    if dialect == "postgresql":
        assert "TRUNCATE" in ddl and "FOR EACH ROW" in ddl and "FOR EACH STATEMENT" in ddl
    else:
        assert "BEFORE UPDATE" in ddl and "BEFORE DELETE" in ddl


def test_append_only_helper_refuses_names_it_cannot_quote() -> None:
    with pytest.raises(ValueError):
        append_only("runs; DROP TABLE runs", "sqlite")
    with pytest.raises(ValueError):
        append_only("runs", "mysql")


def test_the_postgresql_options_are_named_once_a_postgresql_engine_is_made() -> None:
    """The live holders' partial index keeps its PostgreSQL predicate in the metadata (named when
    a PostgreSQL engine is made, so that a SQLite command never imports that dialect)."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex

    from assay.store.db import create_store_engine
    from assay.store.schema import claim_holders

    create_store_engine("postgresql+psycopg://nobody@127.0.0.1:1/none").dispose()  # makes, never connects
    (index,) = [i for i in claim_holders.indexes if i.name == "ix_claim_holders_live"]
    ddl = str(CreateIndex(index).compile(dialect=postgresql.dialect()))
    assert ddl.endswith("WHERE ended_at IS NULL"), ddl
