"""`assay play` fails at once and stops cleanly (issue 23, item 4): a server that cannot be reached
is one line within seconds; Ctrl-C hands the run back, and the next player goes on where it was.

A real server (uvicorn on 127.0.0.1, in a thread, over the test's store: SQLite and PostgreSQL)
and the real play loop and HTTP client; a refused connection is a port bound and closed.
"""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from assay.agents.loader import load_agent
from assay.cli import play as cli_play
from assay.service import releases, remote, submissions
from assay.service.actors import OPERATOR, account_actor, agent_of
from assay.store import Store

from tests.board._support import mini_suite
from tests.support.unreachable import blackhole, closed_port

from ._remote import accounts_and_keys
from .conftest import make_app


@contextmanager
def serving(store: Store) -> Iterator[str]:
    """The service's app over `store`, served by uvicorn on 127.0.0.1 in a thread."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(store, rate_limit=0), log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class StoppedTime:
    """`time` as `assay play` reads it: `monotonic()` stands still until `sleep(s)` moves it on by s,
    so a retry's bound is tested on the clock play keeps, without waiting it out."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_server_that_refuses_is_one_line_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    stopped = StoppedTime()
    monkeypatch.setattr(cli_play, "time", stopped)
    with cli_play.RemoteServer(url, "gk_x", sleep=stopped.sleep) as server, \
            pytest.raises(cli_play.Unreachable) as caught:
        server.next_run()
    assert len(stopped.slept) == cli_play.CONNECT_RETRIES and stopped.now < 3  # two quick retries, never minutes
    assert str(caught.value) == f"server {url} unreachable: connection refused"


def test_a_server_that_answered_and_went_away_is_said_at_once_and_tried_again_for_a_bounded_time(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    stopped = StoppedTime()
    monkeypatch.setattr(cli_play, "time", stopped)
    with cli_play.RemoteServer(url, "gk_x", retry_seconds=0.3, sleep=stopped.sleep) as server:
        server._answered = True  # as after a first answer: a restart is waited for, within bounds
        with pytest.raises(cli_play.Unreachable):
            server.next_run()
    # tried again until the bound, and given up at the first try past it
    assert len(stopped.slept) >= 1 and stopped.now - stopped.slept[-1] < 0.3 <= stopped.now
    said = [line for line in capsys.readouterr().err.splitlines() if line]
    assert said == [f"assay: server {url} unreachable: connection refused; trying again for up to 0.3 s"]


def test_a_connect_that_times_out_is_given_up_after_the_connect_timeout() -> None:
    """The connect timeout is injected short; a listener that never accepts holds the connect."""
    with blackhole() as url, cli_play.RemoteServer(url, "gk_x", connect_timeout=0.3) as server:
        assert server._http.timeout.read == cli_play.REQUEST_TIMEOUT  # a slow answer is not a slow connect
        began = time.monotonic()
        with pytest.raises(cli_play.Unreachable) as caught:
            server.next_run()
        assert 0.25 < time.monotonic() - began < 1.5  # one connect timeout, not retried for minutes
    assert str(caught.value) == f"server {url} unreachable: connect timed out"


def test_help_of_play_states_the_bounds() -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    text = " ".join(re.sub("[│╭╮╰╯─]", " ", CliRunner().invoke(app, ["play", "--help"]).output).split())
    assert "5 seconds" in text and "Ctrl-C" in text and "released" in text


class StopAt:
    """A scripted agent that plays `reference:diligent` and is interrupted (Ctrl-C) at its `at`-th answer."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0
        self.inner = load_agent("reference:diligent")

    def __call__(self) -> Any:
        agent = self.inner()

        def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            self.calls += 1
            if self.calls == self.at:
                raise KeyboardInterrupt
            return agent(messages, tools)

        return answer


def test_ctrl_c_releases_the_run_and_the_next_player_goes_on_where_it_was(web_store: Store, tmp_path: Path) -> None:
    keys = accounts_and_keys(web_store)
    releases.release_path(web_store, str(mini_suite(tmp_path / "mini", reps=1)), actor=OPERATOR)  # 2 runs
    submission_id = submissions.compose(web_store, "mini", factory=remote.remote_factory(), account="alice",
                                        label="remote", actor=account_actor("alice"))
    with serving(web_store) as base:
        with cli_play.RemoteServer(base, keys.alice_agent) as server:
            stopper = StopAt(at=3)  # the first run's third answer
            with pytest.raises(cli_play.Stopped) as caught:
                cli_play.play(server, stopper)
            stop = caught.value
            assert stop.released is not None and stop.played == [] and isinstance(stop.cause, KeyboardInterrupt)
            assert "released, pending again" in cli_play._stopped_line(stop)

            # pending again at once (no timeout waited for, nothing recorded), leased where it was
            lease = remote.next_run(web_store, actor=agent_of("alice"))
            assert lease is not None and lease["run_id"] == stop.released and lease["step"] == 3
            assert remote.release(web_store, lease["run_id"], actor=agent_of("alice"))["released"] is True
            assert remote.release(web_store, lease["run_id"], actor=agent_of("alice"))["released"] is False

            played = cli_play.play(server, load_agent("reference:diligent"))
    assert len(played) == 2 and {p.status for p in played} == {"completed"}
    view = submissions.results(web_store, submission_id, actor=OPERATOR)
    assert view["status"] == "complete" and view["pass_rate"] == 1.0
    resumed = next(r for r in view["runs"] if r["run_id"] == stop.released)
    assert resumed["status"] == "completed"


def test_the_release_route_refuses_another_accounts_run(web_store: Store) -> None:
    from fastapi.testclient import TestClient

    from .conftest import bearer

    keys = accounts_and_keys(web_store)
    submissions.compose(web_store, "forge", factory=remote.remote_factory(), account="alice", label="remote",
                        actor=account_actor("alice"))
    lease = remote.next_run(web_store, actor=agent_of("alice"))
    assert lease is not None
    client = TestClient(make_app(web_store, rate_limit=0))
    assert client.post(f"/api/agent/runs/{lease['run_id']}/release", headers=bearer(keys.bob_agent)).status_code == 404
    answer = client.post(f"/api/agent/runs/{lease['run_id']}/release", headers=bearer(keys.alice_agent))
    assert answer.status_code == 200 and answer.json() == {"run_id": lease["run_id"], "released": True, "step": 1}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the CLI's side; the store's is above
def test_assay_play_interrupted_says_which_run_it_released_and_exits_130(
        web_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import signal
    import sys

    import assay.agents.loader
    from assay.cli import main

    keys = accounts_and_keys(web_store)
    releases.release_path(web_store, str(mini_suite(tmp_path / "mini", reps=1)), actor=OPERATOR)
    submissions.compose(web_store, "mini", factory=remote.remote_factory(), account="alice", label="remote",
                        actor=account_actor("alice"))
    monkeypatch.setattr(assay.agents.loader, "load_agent", lambda spec, **_: StopAt(at=2))
    monkeypatch.setenv("ASSAY_AGENT_KEY", keys.alice_agent)
    before = signal.getsignal(signal.SIGTERM)
    with serving(web_store) as base:
        monkeypatch.setattr(sys, "argv", ["assay", "play", "--server", base, "--agent", "reference:diligent"])
        try:
            with pytest.raises(SystemExit) as caught:
                main()
        finally:
            signal.signal(signal.SIGTERM, before)
    assert caught.value.code == 130
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.strip()]
    lease = remote.next_run(web_store, actor=agent_of("alice"))  # pending again at once
    assert lease is not None and lease["step"] == 2
    assert line == (f"assay: stopped after 0 run(s): run {lease['run_id']} released, pending again; `assay play` "
                    "again goes on (it resumes the run where it was)")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the CLI's side; the store's is above
def test_an_agent_whose_endpoint_refuses_stops_play_and_hands_the_run_back_uncharged(
        web_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keys = accounts_and_keys(web_store)
    releases.release_path(web_store, str(mini_suite(tmp_path / "mini", reps=1)), actor=OPERATOR)
    submission_id = submissions.compose(web_store, "mini", factory=remote.remote_factory(), account="alice",
                                        label="remote", actor=account_actor("alice"))
    endpoint = f"http://127.0.0.1:{closed_port()}/v1"
    with serving(web_store) as base, cli_play.RemoteServer(base, keys.alice_agent) as server:
        with pytest.raises(cli_play.Unreachable) as caught:
            cli_play.play(server, load_agent("openai:m", base_url=endpoint))
    lease = remote.next_run(web_store, actor=agent_of("alice"))
    assert lease is not None and lease["step"] == 1  # pending again, nothing charged
    assert str(caught.value) == (f"agent endpoint {endpoint} unreachable: connection refused; run {lease['run_id']} "
                                 "released, pending again; check the endpoint and `assay play` again")
    view = submissions.results(web_store, submission_id, actor=OPERATOR)
    assert {r["status"] for r in view["runs"]} == {"pending"}
