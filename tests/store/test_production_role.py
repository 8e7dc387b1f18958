"""The production role on PostgreSQL (issue 23, item 3): the service and the CLI run as a LOGIN role
that is a member of `assay_service`, as the README recommends, and `alembic_version` stays out of
reach of every role but the owner.

The database is migrated and bootstrapped by its owner (the cluster's superuser here, as the tests
build every database); then a fresh `CREATE ROLE assay_web_… LOGIN IN ROLE assay_service` plays a
remote submission to completion through the real web app, and runs `assay run` to exit 0. The
grants the migrations give `assay_service` are held to exactly what the code needs: SELECT and
INSERT everywhere, UPDATE of the two liveness columns of `claim_holders` and nothing else, and
read-only `alembic_version`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from assay.agents.loader import load_agent
from assay.service.releases import bootstrap
from assay.store import open_store
from assay.store import rls
from tests.board.test_cli_board import Cli
from tests.web._remote import RemoteAgent, accounts_and_keys, one_rep_forge, submit_remote
from tests.web.conftest import bearer, make_app


@pytest.fixture
def owned(pg_server: Any, templates: Any) -> Iterator[str]:
    """A database migrated and bootstrapped by its owner; yields its name."""
    with pg_server.scratch("prodrole") as name:
        templates.copy_into(pg_server.url(name), "bootstrapped")
        yield name


def _url(pg_server: Any, user: str, database: str) -> str:
    return f"postgresql+psycopg://{user}@127.0.0.1:{pg_server.port}/{database}"


def test_a_remote_submission_completes_when_the_service_runs_as_the_production_role(
        pg_server: Any, owned: str, login_role: Any, tmp_path: Path) -> None:
    """On forge's five cases at one rep (`forge-1`, released by the owner as an operator would):
    what the role must be allowed shows in any complete submission; five runs show it as fifteen do."""
    owner_store = open_store(pg_server.url(owned))
    try:
        suite_key, _path = one_rep_forge(owner_store, tmp_path)
    finally:
        owner_store.close()
    web = login_role(rls.SERVICE_ROLE)
    store = open_store(_url(pg_server, web, owned))
    try:
        bootstrap(store)  # what `assay serve` does at start-up: nothing to release, nothing refused
        keys = accounts_and_keys(store)
        client = TestClient(make_app(store, rate_limit=0))
        created = submit_remote(client, keys.alice_api, "diligent", suite=suite_key, publish=True)
        assert created.status_code == 201, created.text
        submission_id = created.json()["id"]
        agent = RemoteAgent(client, keys.alice_agent, lambda _lease: load_agent("reference:diligent"))
        assert agent.play_all() == 5
        view = client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.alice_api))
        assert view.status_code == 200, view.text
        owner = view.json()
        assert owner["status"] == "complete" and owner["finalised"] is True and owner["published"] is True
        assert all(run["score"] is not None for run in owner["runs"]) and len(owner["runs"]) == 5
        board = client.get(f"/api/leaderboard/{suite_key}").json()
        entry = next(e for e in board["entries"] if e["submission_id"] == submission_id)
        assert entry["pass_rate"] == 1.0
        with store.engine.connect() as conn:  # its figures were stored by the service role on completion
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM entry_figures WHERE submission_id = %(s)s",
                                        {"s": submission_id}).scalar_one() == 1
        from assay.service import board as boards
        from assay.service.actors import OPERATOR
        assert boards.recompute(store, actor=OPERATOR)["differences"] == []  # replaced as the service role
        with store.engine.connect() as conn:  # every lease holder was ended by the service role
            assert conn.exec_driver_sql("SELECT current_user").scalar_one() == web
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM claim_holders WHERE ended_at IS NULL").scalar_one() == 0
    finally:
        store.close()


def test_assay_run_exits_0_as_the_production_role(pg_server: Any, owned: str, login_role: Any, tmp_path: Path) -> None:
    web = login_role(rls.SERVICE_ROLE)
    done = Cli(_url(pg_server, web, owned), tmp_path)("run", "forge", "--agent", "reference:diligent",
                                                       "--trials", "1", "--json")
    assert "Traceback" not in done.stderr
    assert done.json()["summary"]["pass_rate"] == 1.0


def _table_grants(pg_server: Any, database: str, role: str) -> dict[str, set[str]]:
    with psycopg.connect(pg_server.dsn(database)) as conn:
        rows = conn.execute("SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                            "WHERE grantee = %s AND table_schema = current_schema()", (role,)).fetchall()
        columns = conn.execute("SELECT table_name, column_name, privilege_type FROM "
                               "information_schema.column_privileges WHERE grantee = %s "
                               "AND table_schema = current_schema() AND privilege_type = 'UPDATE'",
                               (role,)).fetchall()
    grants: dict[str, set[str]] = {}
    for table, privilege in rows:
        grants.setdefault(table, set()).add(privilege)
    for table, column, privilege in columns:
        grants.setdefault(table, set()).add(f"{privilege}({column})")
    return grants


def test_the_service_role_has_exactly_the_grants_the_code_needs(pg_server: Any, owned: str) -> None:
    grants = _table_grants(pg_server, owned, rls.SERVICE_ROLE)
    assert grants.pop("alembic_version") == {"SELECT"}
    assert grants.pop("claim_holders") == {"SELECT", "INSERT", "UPDATE(heartbeat_at)", "UPDATE(ended_at)"}
    for table in rls.SERVICE_REPLACES:  # 0018: derived rows are replaced (DELETE, then INSERT)
        assert grants.pop(table) == {"SELECT", "INSERT", "DELETE", "UPDATE(listed)"}
    assert grants and all(privileges == {"SELECT", "INSERT"} for privileges in grants.values()), grants


def test_the_service_role_edits_no_claim_holder_column_but_liveness_and_no_result_row(
        pg_server: Any, owned: str, login_role: Any) -> None:
    web = login_role(rls.SERVICE_ROLE)
    with psycopg.connect(pg_server.dsn(owned).replace("user=postgres", f"user={web}"), autocommit=True) as conn:
        conn.execute("INSERT INTO claim_holders (id, host, pid, started_at, heartbeat_at) "
                     "VALUES ('h1', 'here', 1, now(), now())")
        assert conn.execute("UPDATE claim_holders SET heartbeat_at = now(), ended_at = now() "
                            "WHERE id = 'h1'").rowcount == 1
        for statement in ("UPDATE claim_holders SET host = 'elsewhere'", "DELETE FROM claim_holders",
                          "TRUNCATE claim_holders", "UPDATE runs SET turns = 0", "DELETE FROM run_claims",
                          "UPDATE alembic_version SET version_num = 'x'", "DELETE FROM alembic_version",
                          "INSERT INTO alembic_version VALUES ('x')", "TRUNCATE alembic_version",
                          "UPDATE entry_figures SET ranked = true", "TRUNCATE entry_figures",
                          "UPDATE entry_figures SET figures = '{}'",
                          "DELETE FROM run_verdicts"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_alembic_version_is_not_writable_by_the_public_role_even_after_grant_all(
        pg_server: Any, owned: str, login_role: Any) -> None:
    with psycopg.connect(pg_server.dsn(owned), autocommit=True) as conn:
        before = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        conn.execute(sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA public TO {}").format(sql.Identifier(rls.PUBLIC_ROLE)))
    public = login_role(rls.PUBLIC_ROLE, "leaked")
    with psycopg.connect(pg_server.dsn(owned).replace("user=postgres", f"user={public}"), autocommit=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM alembic_version").fetchone() == (0,)
        assert conn.execute("UPDATE alembic_version SET version_num = 'x'").rowcount == 0
        assert conn.execute("DELETE FROM alembic_version").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO alembic_version VALUES ('x')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not be truncated"):
            conn.execute("TRUNCATE alembic_version")
    with psycopg.connect(pg_server.dsn(owned), autocommit=True) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == before
    open_store(pg_server.url(owned)).close()  # still opens
