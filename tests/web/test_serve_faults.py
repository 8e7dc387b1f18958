"""Store faults under a real `assay serve` with remote play (issue 23, item 5).

`assay serve` and `assay play --agent reference:diligent` run as a user starts them; while play
plays a remote submission to forge's five cases (at one rep each: `forge-1`, released by `assay
suite release`; riding through a fault is shown by one fault mid-play, not by the number of runs
around it), the store goes away: on PostgreSQL (a server this module owns,
`tests/support/own_pg.py`) a `pg_ctl restart -m fast`, then every backend of the service
terminated, the service retrying nothing (`ASSAY_STORE_RETRY=0`), so it answers 503 and play must
wait; on SQLite the store file locked by another connection for two seconds. Play rides through
(exit 0, every run played once, one line per wait), the submission ends `complete` with its 5
runs each recorded once (counted behind the service's back), it is on the board, and neither
process prints a traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
import sqlalchemy as sa

from assay.cli import play as cli_play
from tests.e2e.test_cli import assay, clean_env
from tests.support.forkserver import assay_command
from tests.support.own_pg import OwnPg, own_pg

from ._remote import ONE_REP_FORGE, write_one_rep_forge
from .conftest import SECRET, assay_serve, bearer

RUNS = 5  # forge-1: forge's 5 cases × 1 rep
BEFORE_FAULT = 1  # runs recorded before the fault: play has got going, and most of its runs are still to come
TRACE = "Traceback (most recent call last)"
WAITING = "assay: the server answered 503 (store unavailable); trying again for up to 120 s"


@pytest.fixture(scope="module")
def pg() -> Iterator[OwnPg]:
    with own_pg() as server:
        yield server


def _counts(url: str) -> tuple[int, int]:
    """(runs recorded, runs with more than one verdict), read behind the service's back."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            recorded = conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar_one()
            twice = conn.execute(sa.text("SELECT COUNT(*) FROM (SELECT run_id FROM run_verdicts GROUP BY run_id "
                                         "HAVING COUNT(*) > 1) t")).scalar_one()
        return int(recorded), int(twice)
    finally:
        engine.dispose()


def _cli(*args: str, url: str) -> str:
    done = assay(*args, "--db", url, db_file=None, ASSAY_SECRET=SECRET.decode())
    assert done.code == 0 and TRACE not in done.err, str(done)
    return done.out.strip().splitlines()[-1] if done.out.strip() else ""


def _play_through(url: str, log: Path, fault: Callable[[], None], *, store_retry: str) -> tuple[str, str]:
    """Serve `url`, submit a remote forge-1 submission, play it with `fault()` done after its first
    run; assert everything came through once. Returns play's stderr and the service's log."""
    _cli("suite", "release", str(write_one_rep_forge(log.parent)), url=url)
    _cli("account", "create", "alice", "--public-handle", "alice-h", url=url)
    api_key = _cli("key", "create", "--account", "alice", "--kind", "api", url=url)
    agent_key = _cli("key", "create", "--account", "alice", "--kind", "agent", url=url)
    env = clean_env(None, ASSAY_SECRET=SECRET.decode(), ASSAY_STORE_RETRY=store_retry, NO_COLOR="1")

    with assay_serve(url, log, env=env, probe="/api/suites", extra=("--access-log",)) as base, httpx2.Client(base_url=base, timeout=30) as http:
        created = http.post("/api/submissions", headers=bearer(api_key),
                            json={"suite": ONE_REP_FORGE, "label": "rides-through", "agent": "remote", "publish": True})
        assert created.status_code == 201, created.text
        submission_id = created.json()["id"]

        play = subprocess.Popen([*assay_command(), "play", "--server", base, "--agent", "reference:diligent"],
                                env={**env, "ASSAY_AGENT_KEY": agent_key}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 60
            while _counts(url)[0] < BEFORE_FAULT:
                assert play.poll() is None, play.communicate()
                assert time.monotonic() < end, "play did not get going"
                time.sleep(0.02)
            fault()
            assert play.poll() is None and _counts(url)[0] < RUNS  # the fault was mid-play
            out, err = play.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            play.kill()
            pytest.fail(f"assay play hung: {play.communicate()}")
        finally:
            if play.poll() is None:
                play.kill()
        assert play.returncode == 0, err
        assert TRACE not in out + err, err
        assert err.count("· completed ·") == RUNS, err  # each run played once, a line each off a terminal
        assert f"{RUNS} remote run(s) played" in out, out

        owner = http.get(f"/api/submissions/{submission_id}", headers=bearer(api_key)).json()
        assert owner["status"] == "complete", owner
        assert len(owner["runs"]) == RUNS and {r["status"] for r in owner["runs"]} == {"completed"}
        board = http.get(f"/api/leaderboard/{ONE_REP_FORGE}")
        assert board.status_code == 200
        assert [e["submission_id"] for e in board.json()["entries"]] == [submission_id]
    assert _counts(url) == (RUNS, 0)  # every run recorded, none twice
    served = log.read_text()
    assert TRACE not in served, served[-3000:]
    return err, served


@pytest.mark.heavy  # starts a process
def test_a_restart_and_killed_backends_mid_play_cost_nothing(pg: OwnPg, tmp_path: Path) -> None:
    import psycopg

    with psycopg.connect(pg.dsn(), autocommit=True) as admin:
        admin.execute('CREATE DATABASE "serve_faults"')

    def fault() -> None:
        pg.restart()  # pg_ctl restart -m fast: every connection cut
        pg.terminate("serve_faults")  # and the ones made since, killed

    err, served = _play_through(pg.url("serve_faults"), tmp_path / "serve.log", fault, store_retry="0")
    assert '"POST /api/agent/runs/' in served and "503 Service Unavailable" in served  # the fault was felt
    waits = [line for line in err.splitlines() if line and "· completed ·" not in line]
    assert waits and set(waits) == {WAITING}, err  # one line per request that waited, nothing else


@pytest.mark.heavy  # starts a process
def test_a_sqlite_store_locked_mid_play_costs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "assay.db"

    def fault() -> None:
        locker = sqlite3.connect(db, isolation_level=None, timeout=10)
        try:
            locker.execute("BEGIN EXCLUSIVE")  # no one else writes until it ends
            time.sleep(2)
            locker.execute("COMMIT")
        finally:
            locker.close()

    err, _served = _play_through(f"sqlite:///{db}", tmp_path / "serve.log", fault, store_retry="30")
    assert all("· completed ·" in line or line == WAITING for line in err.splitlines() if line), err


def test_play_waits_as_a_503_tells_it_and_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    """In process, time injected: a 503 is waited out for its `Retry-After`, said in one line, and
    the same request is sent again; one that does not pass is given up within the bound."""
    sent: list[bytes] = []
    slept: list[float] = []
    answers = [httpx2.Response(503, json={"detail": "store unavailable"}, headers={"Retry-After": "5"}),
               httpx2.Response(503, json={"detail": "store unavailable"}, headers={"Retry-After": "5"}),
               httpx2.Response(200, json={"messages": [], "done": True, "status": "completed"})]

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.content)
        return answers.pop(0)

    with cli_play.RemoteServer("http://test", "gk_x", sleep=slept.append) as server:
        server._http = httpx2.Client(base_url="http://test", transport=httpx2.MockTransport(handler))
        answer = server.step("0" * 32, {"step": 3, "message": {"role": "assistant", "content": "hi"}})
    assert answer["done"] is True
    assert slept == [5.0, 5.0] and len(set(sent)) == 1 and len(sent) == 3  # the same step, as told
    said = [line for line in capsys.readouterr().err.splitlines() if line]
    assert said == [WAITING]

    with cli_play.RemoteServer("http://test", "gk_x", retry_seconds=0.3, sleep=lambda s: time.sleep(min(s, 0.05))) \
            as server:
        server._http = httpx2.Client(base_url="http://test", transport=httpx2.MockTransport(
            lambda _r: httpx2.Response(503, json={"detail": "store unavailable"}, headers={"Retry-After": "5"})))
        with pytest.raises(cli_play.BadInput, match="keeps answering 503"):
            server.next_run()
