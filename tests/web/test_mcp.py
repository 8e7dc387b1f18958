"""`/mcp` of `assay serve`: remote play over MCP's Streamable HTTP, driven by the official `mcp` SDK's
client against a real server (uvicorn on 127.0.0.1, in a thread, over the test's store: SQLite and
PostgreSQL). Each session leases the next pending run of the agent key's submissions; a client
killed mid-run leaves its run pending again once its lease lapses (the sessions' clock injected)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from assay.service import submissions
from assay.service.actors import OPERATOR
from assay.store.claims import ClaimRepo
from assay.store.remote_repo import RemoteRepo
from assay.store.runs_repo import RunsRepo
from tests.support.mcp_client import play

from ._remote import accounts_and_keys, submit_remote
from .conftest import make_app

SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def serving(app: Any) -> Iterator[str]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _client(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=120))
    return Client(streamable_http_client(url, http_client=http))


def _session(url: str, key: str, **kw: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with _client(url, key) as client:
            return await play(client, **kw)

    return anyio.run(go)


def _refused(url: str, key: str) -> str:
    """What the server answered a session it refused to open (the SDK raises it inside task groups)."""
    try:
        _session(url, key)
    except BaseException as exc:  # noqa: BLE001
        found = exc
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        assert isinstance(found, MCPError), repr(found)
        return str(found)
    raise AssertionError("the session opened")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_mcp_session_plays_a_remote_run_to_finish_recorded_and_scored(web_store: Any) -> None:
    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0)
    submitted = submit_remote(TestClient(app), keys.alice_api, "over mcp")
    assert submitted.status_code == 201, submitted.text
    submission_id = submitted.json()["id"]
    with serving(app) as url:
        seen = _session(url, keys.alice_agent)
        assert "no run is pending" in _refused(url, keys.bob_agent)  # bob submitted nothing: no session opens
    assert seen["over"] and "completed" in seen["answers"][-1]
    assert "finish" in seen["tools"] and "read_runbook" in seen["tools"]
    assert seen["instructions"] == seen["briefing"] and "simulated" in seen["briefing"]
    found = submissions.find(web_store, submission_id)
    view = submissions.results(web_store, found, actor=OPERATOR)
    runs = [r for case in view["cases"] for r in case["runs"]] if "cases" in view else view["runs"]
    done = [r for r in runs if r.get("status") == "completed"]
    assert len(done) == 1 and done[0]["score"] == 100 and done[0]["passed"]


CLIENT = textwrap.dedent("""
    import sys, anyio, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + sys.argv[2]}, timeout=httpx2.Timeout(30, read=600))
        async with Client(streamable_http_client(sys.argv[1], http_client=http)) as client:
            await client.call_tool("list_alerts", {})
            await client.call_tool("list_hosts", {})
            print("played", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
""")


def test_a_killed_client_leaves_its_run_pending_again_after_its_lease(web_store: Any, tmp_path: Path) -> None:
    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0)
    submission_id = submit_remote(TestClient(app), keys.alice_api, "killed").json()["id"]
    n_planned = ClaimRepo(web_store).n_pending(submission_id)
    clock = Clock()
    app.state.mcp.sessions.clock = clock
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    with serving(app) as url:
        child = subprocess.Popen([sys.executable, str(script), url, keys.alice_agent], stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": SRC})
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == b"played"
            (lease,) = RemoteRepo(web_store).open_leases("alice")
            assert len(RemoteRepo(web_store).steps(lease.run_id)) == 2
            assert ClaimRepo(web_store).n_pending(submission_id) == n_planned - 1
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        sessions = app.state.mcp.sessions
        (session,) = list(sessions._sessions.values())
        deadline = time.monotonic() + 20  # the server sees the connection close (an event, not a clock)
        while session.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.in_flight == 0
        clock.now += sessions.lease_seconds / 2
        assert sessions.reap() == []  # within its lease the run stays held
        assert ClaimRepo(web_store).n_pending(submission_id) == n_planned - 1
        clock.now += sessions.lease_seconds
        assert sessions.reap() == [lease.run_id]
        assert ClaimRepo(web_store).n_pending(submission_id) == n_planned  # pending again, nothing recorded
        assert not RunsRepo(web_store).recorded([lease.run_id])

        async def resume() -> tuple[str, str]:  # the next session takes it up where it was
            async with _client(url, keys.alice_agent) as client:
                answer = await client.call_tool("finish", {"claimed_success": False, "summary": "stopping"})
                return app.state.mcp.sessions.get(next(iter(sessions._sessions))).play.run_id, \
                    answer.content[0].text

        run_id, text = anyio.run(resume)
    assert run_id == lease.run_id and "completed" in text
    steps = RemoteRepo(web_store).steps(run_id)
    assert [s.step for s in steps] == [1, 2, 3]


def test_mcp_needs_an_agent_key_and_a_handshake_version(web_store: Any) -> None:
    keys = accounts_and_keys(web_store)
    client = TestClient(make_app(web_store, rate_limit=0))
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for headers in ({}, {"Authorization": f"Bearer {keys.alice_api}"}, {"Authorization": "Bearer gk_nope"}):
        refused = client.post("/mcp", json=body, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert set(refused.json()) == {"detail", "field"}
    modern = client.post("/mcp", json=body, headers={"Authorization": f"Bearer {keys.alice_agent}",
                                                     "MCP-Protocol-Version": "2026-07-28"})
    assert modern.status_code == 400 and modern.json()["error"]["code"] == -32022
    assert "2025-11-25" in modern.json()["error"]["data"]["supported"]
    stranger = client.post("/mcp", json=body, headers={"Authorization": f"Bearer {keys.alice_agent}",
                                                       "Mcp-Session-Id": "0" * 32})
    assert stranger.status_code == 404  # no session of this key by that id
    assert "/mcp" not in client.get("/openapi.json").json()["paths"]
