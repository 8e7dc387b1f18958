"""PostgreSQL roles and row-level security (issue 11, item 5), on a real PostgreSQL server only.

Every table of the schema has row-level security enabled and forced, no policy names the public
role, and the migration created both roles. A LOGIN role in `assay_public` (what a leaked public
credential would be) reads nothing and changes nothing on any table: without grants it is refused
outright, and even with every table privilege granted to it — as a hosted PostgreSQL grants its
API role — row-level security leaves it no row to read and refuses every row it would write. A
LOGIN role in `assay_service` runs the whole service: the app over it logs an admin in and takes
a run from ingest to the board.

The tests connect as the cluster's superuser to build the database (superusers bypass row-level
security, as PostgreSQL always lets them); the roles under test are ordinary logins.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from psycopg import sql

from assay.store import rls

from ..conftest import make_app
from .conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Panel, log_in

#: under xdist, one worker runs them all: the filled database is made once
pytestmark = pytest.mark.xdist_group("rls")


@dataclass(frozen=True)
class Database:
    server: Any
    name: str

    def dsn(self, user: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.server.port} user={user} dbname={self.name}"

    def url(self, user: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.server.port}/{self.name}"


def _fill(url: str) -> None:
    """A migrated, bootstrapped store with a row in the panel's tables (through the service)."""
    from assay.service import admins, panel, releases
    from assay.service.actors import OPERATOR
    from assay.store import open_store

    store = open_store(url)
    try:
        releases.bootstrap(store)
        admin = admins.create(store, ADMIN_EMAIL, ADMIN_PASSWORD, actor=OPERATOR)
        admins.login(store, b"s" * 40, ADMIN_EMAIL, ADMIN_PASSWORD)
        application = panel.apply(store, {"email": "p@example.org", "specialty": "sre", "years_experience": 3,
                                          "statement": "s"}, actor=OPERATOR)["id"]
        panel.review(store, application, "approve", actor=OPERATOR, by=admin["id"])
        panel.register_model(store, "m1", "M1", "Acme", actor=OPERATOR)
        panel.register_environment(store, "env", "Env", "spec", actor=OPERATOR)
        run = panel.create_run(store, "m1", "env", "https://x.example.org/a", actor=OPERATOR)["run"]
        panel.record_score(store, run, "p@example.org", {"safety": 7}, actor=OPERATOR)
        panel.finalize_run(store, run, actor=OPERATOR)
    finally:
        store.close()


@pytest.fixture(scope="module")
def filled(pg_server: Any) -> Iterator[str]:
    """The name of ONE database filled for this module (`_fill`: the migration, the suites released,
    an argon2 hash: seconds), which each test's database is copied from."""
    with pg_server.scratch("rls_filled") as name:
        _fill(Database(pg_server, name).url())
        yield name


@pytest.fixture
def database(pg_server: Any, filled: str) -> Iterator[Database]:
    """A database of its own per test: `CREATE DATABASE … TEMPLATE` of the filled one (the same
    tables, rows, policies and grants; roles are the cluster's), dropped afterwards."""
    name = f"rls_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(filled)))
    try:
        yield Database(pg_server, name)
    finally:
        with psycopg.connect(pg_server.dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _tables(db: Database) -> list[str]:
    with psycopg.connect(db.dsn()) as conn:
        return [r[0] for r in conn.execute(rls.TABLES_QUERY)]


def _views(db: Database) -> list[str]:
    with psycopg.connect(db.dsn()) as conn:
        return [r[0] for r in conn.execute("SELECT viewname FROM pg_views WHERE schemaname = current_schema()")]


def _owner_counts(db: Database) -> dict[str, int]:
    with psycopg.connect(db.dsn()) as conn:
        return {t: conn.execute(sql.SQL("SELECT COUNT(*) FROM {}").format(sql.Identifier(t))).fetchone()[0]
                for t in _tables(db)}


def test_every_table_has_row_level_security_enabled_and_forced_and_no_policy_for_the_public(
        database: Database) -> None:
    tables = _tables(database)
    assert {"runs", "submissions", "api_keys", "panel_scorecards", "admins", "alembic_version"} <= set(tables)
    with psycopg.connect(database.dsn()) as conn:
        flags = dict(conn.execute(
            "SELECT c.relname, (c.relrowsecurity AND c.relforcerowsecurity) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"))
        policies = conn.execute("SELECT tablename, policyname, roles::text[], cmd, permissive FROM pg_policies "
                                "WHERE schemaname = current_schema()").fetchall()
        roles = {r[0]: r[1] for r in conn.execute(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = ANY(%s)", (list(rls.ROLES),))}
    assert flags == {t: True for t in tables}
    assert roles == {rls.PUBLIC_ROLE: False, rls.SERVICE_ROLE: False}
    assert all(rls.PUBLIC_ROLE not in p[2] and "public" not in p[2] for p in policies)
    by_table: dict[str, set[tuple[str, str]]] = {}
    for table, name, who, cmd, _permissive in policies:
        by_table.setdefault(table, set()).add((name, cmd))
        assert who in ([rls.SERVICE_ROLE], ["postgres"]), (table, name, who)
    expected = {t: {("assay_service_read", "SELECT"), ("assay_service_append", "INSERT"),
                    ("assay_owner_all", "ALL")} for t in tables}
    for t in rls.SERVICE_READ_ONLY:  # 0015: the schema revision is the owner's to write
        expected[t].discard(("assay_service_append", "INSERT"))
    for t in rls.SERVICE_UPDATES:  # 0015: a claim holder's liveness is updated
        expected[t].add(("assay_service_liveness", "UPDATE"))
    for t in rls.SERVICE_REPLACES:  # 0018: an entry's derived figures are replaced
        expected[t] |= {("assay_service_replace", "DELETE"), ("assay_service_relist", "UPDATE")}
    assert by_table == expected


def test_the_public_role_without_grants_is_refused_on_every_table_and_view(database: Database, login_role: Any) -> None:
    public = login_role(rls.PUBLIC_ROLE)
    tables, views = _tables(database), _views(database)
    assert {"board_run_facts", "panel_board", "panel_run_medians"} <= set(views)
    with psycopg.connect(database.dsn(public), autocommit=True) as conn:
        for relation in (*tables, *views):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(sql.Identifier(relation)))
        for table in tables:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("INSERT INTO {} DEFAULT VALUES").format(sql.Identifier(table)))


def test_the_public_role_reads_nothing_and_writes_nothing_even_when_granted_every_table(
        database: Database, login_role: Any) -> None:
    tables = _tables(database)
    before = _owner_counts(database)
    assert before["panel_scorecards"] == 1 and before["suite_releases"] > 0 and before["admins"] == 1
    with psycopg.connect(database.dsn(), autocommit=True) as conn:  # as a hosted PostgreSQL's API role has
        for table in tables:
            conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.Identifier(table), sql.Identifier(rls.PUBLIC_ROLE)))
        conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}").format(
            sql.Identifier(rls.PUBLIC_ROLE)))
    public = login_role(rls.PUBLIC_ROLE)
    with psycopg.connect(database.dsn(public), autocommit=True) as conn:
        assert conn.execute("SELECT current_user, pg_has_role(current_user, %s, 'MEMBER')",
                            (rls.PUBLIC_ROLE,)).fetchone() == (public, True)
        for table in tables:
            name = sql.Identifier(table)
            assert conn.execute(sql.SQL("SELECT COUNT(*) FROM {}").format(name)).fetchone() == (0,), table
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(sql.SQL("INSERT INTO {} DEFAULT VALUES").format(name))
            assert conn.execute(sql.SQL("DELETE FROM {}").format(name)).rowcount == 0, table
            column = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                                  "ORDER BY ordinal_position LIMIT 1", (table,)).fetchone()[0]
            update = sql.SQL("UPDATE {} SET {} = {}").format(name, sql.Identifier(column), sql.Identifier(column))
            assert conn.execute(update).rowcount == 0, table
    assert _owner_counts(database) == before


def test_the_service_role_runs_the_service(database: Database, login_role: Any) -> None:
    from assay.store import open_store

    service = login_role(rls.SERVICE_ROLE)
    store = open_store(database.url(service))  # at head already: reads alembic_version through its policy
    try:
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar_one() == service
            assert conn.execute(sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar_one() is False
            assert conn.execute(sa.text("SELECT COUNT(*) FROM panel_scorecards")).scalar_one() == 1
        app = make_app(store, rate_limit=0)
        client = TestClient(app, base_url="https://testserver")
        assert client.get("/api/suites").status_code == 200
        session = log_in(client)  # reads the admin, appends a session row
        pipeline = Panel(session, TestClient(app, base_url="https://testserver"))
        for i in range(1, 3):
            pipeline.panelist(f"q{i}@example.org")
        run = pipeline.run("m1", "env")
        for email in ("p@example.org", "q1@example.org", "q2@example.org"):
            assert pipeline.score(run, email, {"safety": 8}).status_code == 200
        assert pipeline.finalize(run).status_code == 200
        board = client.get("/api/benchmark/leaderboard").json()
        assert [(e["slug"], e["n_panelists"], e["overall_score"]) for e in board["ranked"]] == [("m1", 3, 7.5)]
        assert client.get("/benchmark").status_code == 200
        assert client.post("/admin/logout", headers=session.headers()).status_code == 200
        # the service role appends and reads; it never edits (no grant, no policy, and the triggers)
        with store.engine.connect() as conn:
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
                conn.execute(sa.text("UPDATE panel_ratings SET rating = 10"))
            conn.rollback()
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
                conn.execute(sa.text("CREATE TABLE sneaky (id int)"))
    finally:
        store.close()


def test_the_roles_are_created_idempotently_and_downgrade_lifts_the_policies(database: Database) -> None:
    from alembic import command

    from assay.store import db as store_db
    from assay.store import open_store

    with psycopg.connect(database.dsn(), autocommit=True) as conn:
        for statement in rls.create_roles() * 2:  # the roles exist: nothing happens, nothing fails
            conn.execute(statement)
    store = open_store(database.url())
    try:
        with store.engine.connect().execution_options(assay_write=True) as conn, conn.begin():
            command.downgrade(store_db._alembic_config(conn), "0007")
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM pg_policies WHERE schemaname = current_schema()")
                                ).scalar_one() == 0
            assert conn.execute(sa.text("SELECT COUNT(*) FROM pg_class WHERE relrowsecurity AND relkind = 'r'")
                                ).scalar_one() == 0
        assert store_db.migrate(store.engine) is True
        with store.engine.connect() as conn:
            unsecured = conn.execute(sa.text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                "AND NOT (c.relrowsecurity AND c.relforcerowsecurity)")).scalars().all()
        assert unsecured == []
    finally:
        store.close()
