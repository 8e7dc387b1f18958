"""Admin sessions: Argon2id accounts, the signed cookie over a server-side session, CSRF on every
cookie-authenticated POST, keys and cookies never standing in for each other, one answer for every
failed login, and a login rate limit. On SQLite and PostgreSQL (issue 11, item 1)."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.errors import Conflict, Forbidden, Invalid
from assay.service import accounts, admins
from assay.service.actors import OPERATOR, PUBLIC, account_actor
from assay.store.panel_schema import admin_session_ends, admin_sessions
from assay.store.panel_schema import admins as admins_table
from assay.web.admin import COOKIE, LoginThrottle, seal, unseal

from ..conftest import SECRET, bearer, issue_key
from .conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Session, log_in
from tests.support.forkserver import assay_command
from tests.support.passwords import production_argon2

MODEL = {"action": "register-model", "slug": "m1", "name": "Model One", "vendor": "Acme"}


def _set_cookie(answer: Any) -> str:
    headers = [v for k, v in answer.headers.multi_items() if k.lower() == "set-cookie"]
    assert len(headers) == 1, headers
    return headers[0]


def _models(store: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM panel_models")).scalar_one())


# -- accounts -------------------------------------------------------------------------------------


def test_an_admin_is_stored_with_an_argon2id_hash_never_the_password(web_store: Any) -> None:
    view = admins.create(web_store, " Root@Example.ORG ", ADMIN_PASSWORD, actor=OPERATOR)
    assert view["email"] == ADMIN_EMAIL and "password" not in str(view) and "hash" not in view
    with web_store.engine.connect() as conn:
        (stored,) = conn.execute(sa.select(admins_table.c.password_hash)).one()
        dump = " ".join(str(v) for row in conn.execute(sa.select(admins_table)) for v in row)
    assert stored.startswith("$argon2id$") and ADMIN_PASSWORD not in dump
    with pytest.raises(Conflict):
        admins.create(web_store, ADMIN_EMAIL, "another long password", actor=OPERATOR)
    with pytest.raises(Invalid, match="at least 12"):
        admins.create(web_store, "short@example.org", "too short", actor=OPERATOR)
    for actor in (PUBLIC, account_actor("alice")):
        with pytest.raises(Forbidden):
            admins.create(web_store, "x@example.org", ADMIN_PASSWORD, actor=actor)


def test_production_admins_are_hashed_at_the_documented_argon2id_parameters(web_store: Any) -> None:
    # the other web tests hash at Argon2's cheapest parameters (tests/support/passwords.py)
    with production_argon2():
        admins.create(web_store, ADMIN_EMAIL, ADMIN_PASSWORD, actor=OPERATOR)
        with web_store.engine.connect() as conn:
            (stored,) = conn.execute(sa.select(admins_table.c.password_hash)).one()
        assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
        assert admins._DUMMY_HASH.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
        assert admins._verify(stored, ADMIN_PASSWORD) and not admins._verify(stored, ADMIN_PASSWORD + "x")


@pytest.mark.heavy  # starts a process
def test_assay_admin_create_reads_the_password_from_stdin_and_never_echoes_it(tmp_path: Any) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    done = subprocess.run([*assay_command(), "admin", "create", ADMIN_EMAIL, "--password-stdin", "--db", db],
                          input=ADMIN_PASSWORD + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ADMIN_EMAIL in done.stdout and ADMIN_PASSWORD not in done.stdout + done.stderr
    again = subprocess.run([*assay_command(), "admin", "create", "b@example.org", "--password-stdin", "--db", db],
                           input="short\n", capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1 and "short" not in again.stderr
    listed = subprocess.run([*assay_command(), "admin", "list", "--json", "--db", db], capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0 and ADMIN_EMAIL in listed.stdout and "argon2" not in listed.stdout
    from assay.store import open_store

    store = open_store(db)
    try:
        login = admins.login(store, SECRET, ADMIN_EMAIL, ADMIN_PASSWORD)  # the stdin line, newline dropped
        assert login.session.email == ADMIN_EMAIL
    finally:
        store.close()


# -- login ----------------------------------------------------------------------------------------


def test_login_sets_an_httponly_secure_samesite_strict_cookie_and_answers_the_csrf_token(
        https: TestClient, admin: Any) -> None:
    answer = https.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    assert answer.status_code == 200
    body = answer.json()
    assert len(body["csrf_token"]) >= 32 and body["email"] == ADMIN_EMAIL
    cookie = _set_cookie(answer)
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert attributes[0].startswith(f"{COOKIE}=")
    assert "httponly" in attributes and "secure" in attributes and "samesite=strict" in attributes
    assert "path=/" in attributes and any(a.startswith("max-age=") for a in attributes)
    assert answer.headers["cache-control"] == "no-store"
    assert https.get("/api/panel/applications").status_code == 200  # the cookie is the session


def test_a_form_login_from_a_browser_lands_on_the_admin_page(https: TestClient, admin: Any) -> None:
    answer = https.post("/admin/login", data={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD},
                        headers={"Accept": "text/html"}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/admin"
    assert "samesite=strict" in _set_cookie(answer).lower()
    home = https.get("/admin")
    assert home.status_code == 200 and ADMIN_EMAIL in home.text and 'name="csrf_token"' in home.text
    form = https.post("/admin/login", data={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})  # curl-like
    assert form.status_code == 200 and "csrf_token" in form.json()


def test_a_wrong_password_and_an_unknown_email_get_one_and_the_same_refusal(https: TestClient, admin: Any) -> None:
    answers = [https.post("/admin/login", json=body) for body in (
        {"email": ADMIN_EMAIL, "password": "wrong password, long enough"},
        {"email": "nobody@example.org", "password": ADMIN_PASSWORD},
        {"email": ADMIN_EMAIL.upper(), "password": ADMIN_PASSWORD + "x"},
        {"email": "not an email", "password": ADMIN_PASSWORD},
        {"email": ADMIN_EMAIL, "password": ""},
        {"email": ADMIN_EMAIL},
    )]
    assert {a.status_code for a in answers} == {401}
    assert {a.text for a in answers} == {'{"detail":"wrong email or password","field":"credentials"}'}
    assert all("set-cookie" not in a.headers for a in answers)
    html = https.post("/admin/login", data={"email": "nobody@example.org", "password": "x" * 20},
                      headers={"Accept": "text/html"})
    assert html.status_code == 401 and "wrong email or password" in html.text
    assert https.get("/api/panel/applications").status_code == 401


def test_logins_are_rate_limited_per_address_and_email(https: TestClient, admin: Any, panel_app: Any) -> None:
    panel_app.state.login_throttle = LoginThrottle(rate=1 / 600, burst=3)
    wrong = {"email": ADMIN_EMAIL, "password": "wrong password, long enough"}
    assert [https.post("/admin/login", json=wrong).status_code for _ in range(3)] == [401, 401, 401]
    limited = https.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert "set-cookie" not in limited.headers
    # other emails from the same address draw on the address's larger bucket (3 × 3), then stop too
    others = [https.post("/admin/login", json={"email": f"x{i}@example.org", "password": "y" * 12}).status_code
              for i in range(6)]
    assert others[:5] == [401] * 5 and others[5] == 429


def test_the_default_login_limit_stops_a_guesser(https: TestClient, admin: Any, panel_app: Any) -> None:
    """The default limit lets 10 guesses through, then 429. Its clock is held still, so a slow
    machine (a 64 MiB Argon2id check per guess) does not earn the guesser a refill mid-test."""
    throttle = panel_app.state.login_throttle = LoginThrottle()
    throttle.buckets.clock = lambda: 1000.0
    wrong = {"email": ADMIN_EMAIL, "password": "wrong password, long enough"}
    statuses = [https.post("/admin/login", json=wrong).status_code for _ in range(12)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]


# -- the cookie and the session -------------------------------------------------------------------


def test_ingest_without_the_csrf_token_is_403_and_changes_nothing(session: Session, web_store: Any) -> None:
    wrong = session.csrf[:-1] + ("1" if session.csrf[-1] == "0" else "0")  # a different token, always
    for headers in ({}, {"X-CSRF-Token": ""}, {"X-CSRF-Token": wrong}, {"X-CSRF-Token": "x" * 999}):
        answer = session.client.post("/api/benchmark/ingest", json=MODEL, headers=headers)
        assert answer.status_code == 403 and "CSRF" in answer.json()["detail"], headers
    assert _models(web_store) == 0
    assert session.ingest(**MODEL).status_code == 200 and _models(web_store) == 1


def test_every_cookie_authenticated_post_needs_the_csrf_token(session: Session, pipeline: Any) -> None:
    application = pipeline.apply("p@example.org")
    for path in (f"/api/panel/applications/{application}/approve", f"/api/panel/applications/{application}/reject",
                 "/admin/logout"):
        assert session.client.post(path).status_code == 403, path
    assert session.client.get("/api/panel/applications").json()[0]["status"] == "pending"
    assert session.client.get("/api/panel/applications").status_code == 200  # the session is still open


def test_a_tampered_cookie_is_refused_on_ingest(session: Session, web_store: Any) -> None:
    real = session.client.cookies[COOKIE]
    body, signature = real.rsplit(".", 1)
    # the first character: base64's last one may only carry padding bits, and decode the same
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    forged = seal(b"another secret entirely, 32 chars long", unseal(SECRET, real) or "")
    for value in (body + "." + flipped, forged, real[:-3], "garbage", seal(SECRET, "a token never issued")):
        client = TestClient(session.client.app, base_url="https://testserver", cookies={COOKIE: value})
        answer = client.post("/api/benchmark/ingest", json=MODEL, headers=session.headers())
        assert answer.status_code == 401, value
        assert answer.json()["field"] == "session"
    assert _models(web_store) == 0


def test_an_api_or_agent_key_is_refused_where_the_cookie_is_needed_and_the_cookie_where_a_key_is(
        session: Session, web_store: Any, anon: TestClient) -> None:
    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    for kind in ("api", "agent"):
        key = issue_key(web_store, "alice", kind)
        answer = anon.post("/api/benchmark/ingest", json=MODEL, headers={**bearer(key), **session.headers()})
        assert answer.status_code == 401
        assert anon.get("/api/panel/applications", headers=bearer(key)).status_code == 401
        cookie = {COOKIE: session.client.cookies[COOKIE]}
        keyed = TestClient(session.client.app, base_url="https://testserver", cookies=cookie)
        route = "/api/submissions" if kind == "api" else "/api/agent/suites"
        assert keyed.get(route).status_code == 401, route  # the cookie is no key
    assert _models(web_store) == 0


def test_an_expired_or_ended_session_is_refused(session: Session, web_store: Any, monkeypatch: Any) -> None:
    from assay.service import admins as admins_module

    later = admins_module.utcnow() + admins.SESSION_TTL + timedelta(seconds=1)
    monkeypatch.setattr(admins_module, "utcnow", lambda: later)
    assert session.ingest(**MODEL).status_code == 401
    monkeypatch.undo()
    assert session.client.get("/api/benchmark/runs").status_code == 200
    assert session.client.post("/admin/logout", headers=session.headers()).json() == {"ended": True}
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.select(admin_session_ends.c.reason)).scalars().all() == ["logout"]
    # the browser drops the cookie; a copy kept elsewhere opens nothing any more
    stale = TestClient(session.client.app, base_url="https://testserver",
                       cookies={COOKIE: session.login.cookies[COOKIE]})
    assert stale.post("/api/benchmark/ingest", json=MODEL, headers=session.headers()).status_code == 401
    assert stale.get("/api/panel/applications").status_code == 401


def test_each_login_rotates_the_session(https: TestClient, admin: Any, web_store: Any) -> None:
    first = log_in(https)
    old_cookie = https.cookies[COOKIE]
    second = log_in(https)  # the request carries the first session's cookie
    assert https.cookies[COOKIE] != old_cookie and second.csrf != first.csrf
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(admin_sessions)).scalar_one() == 2
        assert conn.execute(sa.select(admin_session_ends.c.reason)).scalars().all() == ["rotated"]
    old = TestClient(https.app, base_url="https://testserver", cookies={COOKIE: old_cookie})
    assert old.get("/api/panel/applications").status_code == 401
    assert https.post("/api/benchmark/ingest", json=MODEL, headers={"X-CSRF-Token": first.csrf}).status_code == 403
    assert second.ingest(**MODEL).status_code == 200
    # the store keeps only digests of session tokens, never a token
    token = unseal(SECRET, https.cookies[COOKIE])
    with web_store.engine.connect() as conn:
        stored = " ".join(str(v) for row in conn.execute(sa.select(admin_sessions)) for v in row)
    assert token and token not in stored


def test_admin_sessions_are_append_only(session: Session, web_store: Any) -> None:
    for statement in ("UPDATE admin_sessions SET expires_at = created_at", "DELETE FROM admin_sessions",
                      "UPDATE admins SET email = 'x@y.org'", "DELETE FROM admins"):
        with pytest.raises(sa.exc.IntegrityError, match="append-only"):
            with web_store.engine.begin() as conn:
                conn.execute(sa.text(statement))
