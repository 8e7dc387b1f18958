"""Keys: shown once, stored as HMAC-SHA256 under the server secret, compared in constant time,
refused when revoked or of the wrong kind; `assay key create|list|revoke`; the server secret."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.errors import BadInput, Conflict, Forbidden, NotFound, Unauthenticated
from assay.service import accounts, keys
from assay.service.actors import OPERATOR, PUBLIC, account_actor, agent_of
from assay.service.secret import secret_path, server_secret

from .conftest import SECRET
from tests.support.forkserver import assay_command



@pytest.fixture
def alice(web_store: Any) -> Any:
    accounts.create(web_store, "alice", None, actor=OPERATOR)
    accounts.create(web_store, "bob", None, actor=OPERATOR)
    return web_store


def _dump(store: Any) -> str:
    """Every row of the keys' tables, as text."""
    with store.engine.connect() as conn:
        rows = [*conn.execute(sa.text("SELECT * FROM api_keys")), *conn.execute(sa.text("SELECT * FROM key_revocations"))]
    return repr([tuple(r) for r in rows])


def test_a_key_is_shown_once_and_stored_only_as_its_hmac(alice: Any) -> None:
    view, key = keys.create(alice, "alice", "api", SECRET, actor=OPERATOR)
    agent_view, agent_key = keys.create(alice, "alice", "agent", SECRET, actor=OPERATOR)
    assert key.startswith("ak_") and agent_key.startswith("gk_") and len(key) > 40
    assert key.startswith(view["prefix"]) and view["kind"] == "api" and view["revoked"] is False
    stored = _dump(alice)
    assert key not in stored and agent_key not in stored
    assert hmac.new(SECRET, key.encode(), hashlib.sha256).hexdigest() in stored
    listed = keys.list_keys(alice, "alice", actor=OPERATOR)
    assert [k["id"] for k in listed] == [view["id"], agent_view["id"]]
    assert not any("digest" in k or key in json.dumps(k) for k in listed)


@pytest.mark.parametrize("kind,actor", [("api", account_actor("alice")), ("agent", agent_of("alice"))])
def test_a_key_authenticates_as_its_account_in_its_kind_only(alice: Any, kind: str, actor: Any) -> None:
    _, key = keys.create(alice, "alice", kind, SECRET, actor=OPERATOR)
    assert keys.authenticate(alice, SECRET, key, kind) == actor
    other = "agent" if kind == "api" else "api"
    with pytest.raises(Unauthenticated):
        keys.authenticate(alice, SECRET, key, other)


def test_revoked_unknown_altered_and_foreign_keys_are_refused_alike(alice: Any) -> None:
    view, key = keys.create(alice, "alice", "api", SECRET, actor=OPERATOR)
    refusals = []
    for presented, secret in ((key[:-1] + ("A" if key[-1] != "A" else "B"), SECRET),  # one character off
                              ("ak_" + "x" * 43, SECRET), ("", SECRET), (None, SECRET), ("ak_" * 200, SECRET),
                              (key, b"another-secret-" + b"z" * 32)):  # a key is valid only under its secret
        with pytest.raises(Unauthenticated) as refused:
            keys.authenticate(alice, secret, presented, "api")
        refusals.append(str(refused.value))
    keys.revoke(alice, view["id"], actor=OPERATOR)
    with pytest.raises(Unauthenticated) as refused:
        keys.authenticate(alice, SECRET, key, "api")
    refusals.append(str(refused.value))
    assert len(set(refusals)) == 1  # nothing tells a revoked key from one that never existed


def test_revocation_is_a_row_once_and_for_good(alice: Any) -> None:
    view, _ = keys.create(alice, "alice", "api", SECRET, actor=OPERATOR)
    revoked = keys.revoke(alice, view["id"], actor=OPERATOR)
    assert revoked["revoked"] is True and revoked["revoked_at"] is not None
    with pytest.raises(Conflict, match="already revoked"):
        keys.revoke(alice, view["id"], actor=OPERATOR)
    with pytest.raises(NotFound):
        keys.revoke(alice, "no-such-key", actor=OPERATOR)
    for statement in ("UPDATE api_keys SET kind = 'agent'", "DELETE FROM key_revocations", "DELETE FROM api_keys"):
        with pytest.raises(sa.exc.IntegrityError, match="append-only"):
            with alice.engine.begin() as conn:
                conn.execute(sa.text(statement))
    assert keys.list_keys(alice, "alice", actor=OPERATOR)[0]["revoked"] is True


def test_an_account_manages_its_own_keys_and_no_one_elses(alice: Any) -> None:
    as_alice = account_actor("alice")
    view, key = keys.create(alice, "alice", "agent", SECRET, actor=as_alice)
    assert keys.list_keys(alice, "alice", actor=as_alice)[0]["id"] == view["id"]
    with pytest.raises(Forbidden):
        keys.create(alice, "bob", "api", SECRET, actor=as_alice)
    with pytest.raises(NotFound):  # another account's keys do not exist for alice
        keys.list_keys(alice, "bob", actor=as_alice)
    with pytest.raises(NotFound):
        keys.revoke(alice, view["id"], actor=account_actor("bob"))
    with pytest.raises(NotFound):
        keys.revoke(alice, view["id"], actor=PUBLIC)
    with pytest.raises(Forbidden):
        keys.create(alice, "alice", "api", SECRET, actor=agent_of("alice"))  # an agent issues no keys
    assert keys.authenticate(alice, SECRET, key, "agent") == agent_of("alice")


def test_bad_kinds_and_accounts_are_refused_before_anything_is_stored(alice: Any) -> None:
    with pytest.raises(BadInput, match="api, agent"):
        keys.create(alice, "alice", "admin", SECRET, actor=OPERATOR)
    with pytest.raises(NotFound, match="no such account"):
        keys.create(alice, "ghost", "api", SECRET, actor=OPERATOR)
    assert "ak_" not in _dump(alice) and _dump(alice) == "[]"


# -- the server secret ---------------------------------------------------------------------------


def test_the_secret_file_is_made_once_with_mode_0600_beside_a_sqlite_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_SECRET", raising=False)
    url = f"sqlite:///{tmp_path / 'db' / 'assay.db'}"
    assert secret_path(url) == tmp_path / "db" / "secret"
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(server_secret(url))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results[0]) >= 32  # racing first starts agree on one secret
    assert stat.S_IMODE((tmp_path / "db" / "secret").stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "db").iterdir()] == ["secret"]  # nothing left aside
    assert server_secret(url) == results[0]


def test_assay_secret_wins_and_a_weak_or_exposed_secret_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'assay.db'}"
    monkeypatch.setenv("ASSAY_SECRET", "e" * 40)
    assert server_secret(url) == b"e" * 40 and not (tmp_path / "secret").exists()
    monkeypatch.setenv("ASSAY_SECRET", "short")
    with pytest.raises(BadInput, match="at least 32"):
        server_secret(url)
    monkeypatch.delenv("ASSAY_SECRET")
    server_secret(url)
    os.chmod(tmp_path / "secret", 0o644)
    with pytest.raises(BadInput, match="chmod 600"):
        server_secret(url)


def test_other_stores_keep_their_secret_in_the_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("platformdirs.user_data_dir", lambda name: str(tmp_path / name))
    assert secret_path("postgresql+psycopg://u@h/db") == tmp_path / "assay" / "secret"
    assert secret_path(None) == tmp_path / "assay" / "secret"


# -- the CLI -------------------------------------------------------------------------------------


def _assay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*assay_command(), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.heavy  # starts a process
def test_assay_key_create_list_revoke(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("ASSAY_SECRET", "ASSAY_DB")}
    assert _assay("account", "create", "alice", "--db", db, env=env).returncode == 0
    created = _assay("key", "create", "--account", "alice", "--kind", "agent", "--db", db, env=env)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("gk_")

    from assay.store import open_store

    with open_store(db) as store:  # the key works under the secret created beside the store
        assert keys.authenticate(store, server_secret(db), key, "agent") == agent_of("alice")

    listed = _assay("key", "list", "--account", "alice", "--json", "--db", db, env=env)
    rows = json.loads(listed.stdout)
    assert [(r["kind"], r["revoked"]) for r in rows] == [("agent", False)] and key not in listed.stdout
    assert _assay("key", "revoke", rows[0]["id"], "--db", db, env=env).returncode == 0
    with open_store(db) as store:
        assert keys.list_keys(store, "alice", actor=OPERATOR)[0]["revoked"] is True

    for args, says in ((("key", "create", "--account", "alice", "--kind", "robot"), "--kind robot:"),
                       (("key", "create", "--account", "ghost", "--kind", "api"), "--account ghost: no such account"),
                       (("key", "revoke", rows[0]["id"]), "already revoked")):
        refused = _assay(*args, "--db", db, env=env)
        assert refused.returncode == 2, args
        assert refused.stderr.count("\n") == 1 and says in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
