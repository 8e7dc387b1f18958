"""What the service refuses, and how: keys of the wrong kind or revoked, oversized bodies, callers
over their rate, text that would do harm if interpreted, and bugs (a bare 500, no trace, no secret).

Most tests add a test-only route to the app (a body echo, a route that raises) to reach the guard
under test directly; the guards sit in front of every route alike.
"""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from assay.errors import BadInput, Conflict, Forbidden, Invalid, NotFound, Unauthenticated
from assay.service import accounts, keys, releases
from assay.service.actors import OPERATOR
from assay.web.guards import TokenBuckets

from .conftest import INJECTION, SECRET, Site, assay_serve, bearer, free_port, issue_key, make_app

FIVE_MB = 5 * 1024 * 1024


@pytest.fixture
def alice(web_store: Any) -> Any:
    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    return web_store


def _echo(app: FastAPI) -> FastAPI:
    """A test-only route that reads its whole body, as every JSON route does."""

    async def echo(request: Request) -> dict[str, int]:
        return {"received": len(await request.body())}

    app.add_api_route("/test/echo", echo, methods=["POST"])
    return app


# -- keys ----------------------------------------------------------------------------------------


def test_a_key_of_the_wrong_kind_is_refused_like_no_key(alice: Any, client: TestClient) -> None:
    api, agent = issue_key(alice, "alice", "api"), issue_key(alice, "alice", "agent")
    assert client.get("/api/agent/suites", headers=bearer(agent)).status_code == 200
    refusals = [client.get("/api/agent/suites", headers=h)
                for h in (bearer(api), {}, {"Authorization": f"Basic {agent}"}, bearer(agent + "x"), bearer(""))]
    for refused in refusals:
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    assert len({r.text for r in refusals}) == 1


def test_a_revoked_key_is_refused_at_once(alice: Any, client: TestClient) -> None:
    view, key = keys.create(alice, "alice", "agent", SECRET, actor=OPERATOR)
    assert client.get("/api/agent/suites", headers=bearer(key)).status_code == 200
    keys.revoke(alice, view["id"], actor=OPERATOR)
    assert client.get("/api/agent/suites", headers=bearer(key)).status_code == 401


def test_the_sites_revoked_key_is_refused(site_client: TestClient, populated_site: Site) -> None:
    assert site_client.get("/api/agent/suites", headers=bearer(populated_site.keys["alice_revoked"])).status_code == 401


# -- bodies --------------------------------------------------------------------------------------


def test_a_5_mb_body_is_413_whether_declared_or_streamed(web_store: Any) -> None:
    client = TestClient(_echo(make_app(web_store)))
    assert client.post("/test/echo", content=b"x" * 1000).json() == {"received": 1000}
    assert client.post("/test/echo", content=b"x" * (1 << 20)).status_code == 200  # the cap itself passes
    declared = client.post("/test/echo", content=b"x" * FIVE_MB)
    assert declared.status_code == 413 and "larger than 1048576 bytes" in declared.json()["detail"]
    assert client.post("/api/suites", content=b"x" * FIVE_MB).status_code == 413  # before any routing

    def chunks() -> Any:  # no Content-Length: the cap holds on the stream itself
        for _ in range(80):
            yield b"y" * 65536

    streamed = client.post("/test/echo", content=chunks())
    assert streamed.status_code == 413 and streamed.json()["detail"].startswith("request body larger")


def test_a_lying_content_length_does_not_pass_the_cap(web_store: Any) -> None:
    app = _echo(make_app(web_store, body_limit=100))

    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        body = [{"type": "http.request", "body": b"z" * 80, "more_body": True},
                {"type": "http.request", "body": b"z" * 80, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return body.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "path": "/test/echo", "raw_path": b"/test/echo", "query_string": b"", "root_path": "",
                 "scheme": "http", "headers": [(b"content-length", b"10")], "client": ("127.0.0.1", 1),
                 "server": ("test", 80)}
        await app(scope, receive, send)
        return sent

    import anyio

    sent = anyio.run(scenario)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413


# -- rate limits ---------------------------------------------------------------------------------


def test_over_its_rate_a_caller_gets_429_with_retry_after(alice: Any) -> None:
    client = TestClient(make_app(alice, rate_limit=0.2, rate_burst=3))
    key, other = issue_key(alice, "alice", "agent"), issue_key(alice, "alice", "agent")
    assert [client.get("/api/agent/suites", headers=bearer(key)).status_code for _ in range(3)] == [200] * 3
    limited = client.get("/api/agent/suites", headers=bearer(key))
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1 and "retry after" in limited.json()["detail"]
    assert client.get("/api/agent/suites", headers=bearer(other)).status_code == 200  # a bucket per key
    assert [client.get("/api/suites").status_code for _ in range(4)][-1] == 429  # and per address without one


def test_a_bucket_refills_at_its_rate_and_forgets_full_buckets() -> None:
    now = [0.0]
    buckets = TokenBuckets(rate=2.0, burst=2, clock=lambda: now[0], max_callers=3)
    assert [buckets.take("a") for _ in range(2)] == [0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert buckets.take("a") == 0.0
    for name in "bcde":
        buckets.take(name)
    now[0] += 10
    buckets.take("f")
    assert len(buckets._buckets) <= 3


# -- text that would do harm if interpreted ------------------------------------------------------


def test_injection_strings_are_stored_and_served_literally(web_store: Any, tmp_path: Path) -> None:
    from tests.board._support import mini_suite

    suite = mini_suite(tmp_path / "inj", key="inj", title=INJECTION, card=INJECTION, known_limitations=[INJECTION])
    releases.release_path(web_store, str(suite), actor=OPERATOR)
    client = TestClient(make_app(web_store))
    release = client.get("/api/suites/inj/1.0").json()
    assert release["title"] == INJECTION and release["card"] == INJECTION
    assert release["known_limitations"] == [INJECTION]
    assert INJECTION in client.get("/api/suites/inj/1.0/card").json()["markdown"]
    assert next(s for s in client.get("/api/suites").json() if s["key"] == "inj")["title"] == INJECTION
    assert client.get("/api/leaderboard/inj").json()["suite"]["title"] == INJECTION


def test_injection_in_paths_and_queries_finds_nothing_and_breaks_nothing(web_store: Any) -> None:
    client = TestClient(make_app(web_store))
    quoted = urllib.parse.quote(INJECTION, safe="")
    for route in (f"/api/suites/{quoted}/versions", f"/api/suites/forge/{quoted}", f"/api/leaderboard/{quoted}",
                  f"/api/suites/{quoted}/1.0/card"):
        refused = client.get(route)
        assert refused.status_code == 404, route
    assert client.get("/api/leaderboard/forge", params={"version": INJECTION}).status_code == 404
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM suite_releases")).scalar_one() > 0
        assert conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar_one() == 0


def test_an_injected_label_is_on_the_board_as_written(site_client: TestClient) -> None:
    entries = site_client.get("/api/leaderboard/mini").json()["entries"]
    assert INJECTION in [e["agent_label"] for e in entries]


# -- refusals and bugs ---------------------------------------------------------------------------


@pytest.mark.parametrize("error,status", [
    (NotFound("no such thing", "suite"), 404), (Conflict("already", "label"), 409),
    (Forbidden("not yours", "account"), 403), (Invalid("malformed", "label"), 422),
    (BadInput("a malformed document", "suite.yaml"), 422), (Unauthenticated("no key", "key"), 401)])
def test_domain_errors_are_json_with_their_status(web_store: Any, error: BadInput, status: int) -> None:
    app = make_app(web_store)

    def refuse() -> None:
        raise error

    app.add_api_route("/test/refuse", refuse)
    refused = TestClient(app).get("/test/refuse")
    assert refused.status_code == status
    assert refused.json()["detail"] == str(error)
    assert ("www-authenticate" in refused.headers) == (status == 401)


def test_a_bug_is_a_bare_500_and_the_log_holds_no_secret(web_store: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(web_store)
    secret_text = SECRET.decode()

    def broken() -> None:
        raise RuntimeError(f"boom with {secret_text} inside")

    app.add_api_route("/api/test/broken", broken)  # an API route: a page route answers the HTML 500 page
    with caplog.at_level(logging.ERROR, logger="assay.web"):
        crashed = TestClient(app, raise_server_exceptions=False).get("/api/test/broken")
    assert crashed.status_code == 500
    assert crashed.json() == {"detail": "internal error", "field": None}
    assert "Traceback" not in crashed.text and "boom" not in crashed.text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback" in logged and "RuntimeError: boom with *** inside" in logged
    assert secret_text not in logged


# -- the real server -----------------------------------------------------------------------------


def test_assay_serve_answers_on_127_0_0_1(db_url: str, web_store: Any, tmp_path: Path) -> None:
    """The real command: uvicorn over the store (two workers on PostgreSQL, through the factory)."""
    accounts.create(web_store, "alice", None, actor=OPERATOR)
    agent, api = issue_key(web_store, "alice", "agent"), issue_key(web_store, "alice", "api")
    workers = 2 if db_url.startswith("postgresql") else 1
    log = tmp_path / "serve.log"
    with assay_serve(db_url, log, workers=workers) as base:
        assert "mini" not in [s["key"] for s in httpx.get(f"{base}/api/suites").json()]
        assert "forge" in [s["key"] for s in httpx.get(f"{base}/api/suites").json()]
        assert httpx.get(f"{base}/api/agent/suites", headers=bearer(agent)).status_code == 200
        refused = httpx.get(f"{base}/api/agent/suites", headers=bearer(api))
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert httpx.post(f"{base}/api/suites", content=b"x" * FIVE_MB).status_code == 413
        board = httpx.get(f"{base}/api/leaderboard/forge")
        assert board.status_code == 200 and board.json()["suite"]["key"] == "forge"
    err = log.read_text()
    assert SECRET.decode() not in err and agent not in err and api not in err
    assert "Traceback" not in err
    assert "/api/suites" not in err and "assay serve: http://" in err  # no line per request unless --access-log


def test_assay_serve_logs_each_request_only_with_access_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from assay.cli import app

    asked: list[bool] = []
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **kw: asked.append(kw["access_log"]))
    monkeypatch.setenv("ASSAY_SECRET", SECRET.decode())
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    for flags in ([], ["--access-log"]):
        done = CliRunner().invoke(app, ["serve", "--db", db, "--port", str(free_port()), *flags])
        assert done.exit_code == 0, done.output
    assert asked == [False, True]


def test_the_limits_come_from_the_environment_and_bad_ones_are_refused(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from assay.web.app import Settings

    monkeypatch.setenv("ASSAY_DB", f"sqlite:///{tmp_path / 'assay.db'}")
    monkeypatch.setenv("ASSAY_SECRET", SECRET.decode())
    monkeypatch.setenv("ASSAY_RATE_LIMIT", "0")
    monkeypatch.setenv("ASSAY_BODY_LIMIT", "2048")
    settings = Settings.from_env()
    assert (settings.rate_limit, settings.rate_burst, settings.body_limit, settings.secret) == (0, 120, 2048, SECRET)
    assert SECRET.decode() not in repr(settings)
    assert Settings(**{**settings.__dict__}).to_env()["ASSAY_BODY_LIMIT"] == "2048"
    monkeypatch.setenv("ASSAY_RATE_BURST", "lots")
    with pytest.raises(BadInput, match="ASSAY_RATE_BURST must be a number"):
        Settings.from_env()
