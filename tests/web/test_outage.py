"""The service under store faults (issue 23, item 5).

- A lease is one transaction: a fault after the run's claim and before the answer leaves the run
  claimable (the next request gets it), never leased to an agent that was not told.
- Finishing a submission is idempotent and retried: a finalisation killed midway leaves the runs
  recorded, and the sweeper, `assay resume` or `assay score` completes it.
- A store outage answers 503 with `Retry-After` on every route: JSON for the API, the error page
  for a page; never 500, never a trace.

On SQLite and PostgreSQL (`web_store`); the outage is a store on a PostgreSQL port nobody listens on.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.service import batches
from assay.service.actors import OPERATOR
from assay.store import Store
from assay.store.db import create_store_engine
from assay.store.faults import Retry
from assay.web.workers import Workers
from assay.store.runs_repo import RunsRepo
from tests.conftest import _free_port

from ._remote import RemoteAgent, accounts_and_keys, submit_remote
from .conftest import bearer, make_app

IDLE = "reference:idle"  # finishes at once: a run is one step


def _client(store: Store) -> TestClient:
    return TestClient(make_app(store, rate_limit=0))


class _Clock:
    """A clock that moves only when slept on: retries take no time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _no_wait(store: Store, seconds: float = 5) -> None:
    clock = _Clock()
    store.retry = Retry(seconds, clock, clock.sleep)


class _Injected(list):  # type: ignore[type-arg]
    """The statements an injected fault failed; `stop()` removes the fault."""

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__()
        self.engine = engine

    def listener(self, needle: str, fault: BaseException, times: int) -> Callable[..., None]:
        def _fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if needle in statement and len(self) < times:
                self.append(statement)
                raise fault

        self._fail = _fail
        return _fail

    def stop(self) -> None:
        if sa.event.contains(self.engine, "after_cursor_execute", self._fail):
            sa.event.remove(self.engine, "after_cursor_execute", self._fail)


_INJECTED: list[_Injected] = []


def _fault_after(engine: sa.Engine, needle: str, fault: BaseException, times: int) -> _Injected:
    """Fail the next `times` statements containing `needle` with `fault`, right after they ran
    (inside their transaction: what they did is rolled back with it)."""
    injected = _Injected(engine)
    sa.event.listen(engine, "after_cursor_execute", injected.listener(needle, fault, times))
    _INJECTED.append(injected)
    return injected


@pytest.fixture(autouse=True)
def _remove_faults() -> Iterator[None]:
    yield
    while _INJECTED:
        _INJECTED.pop().stop()


def _killed(store: Store) -> sa.exc.OperationalError:
    """What a connection killed (PostgreSQL) or a lock held elsewhere (SQLite) raises: transient."""
    if store.dialect == "sqlite":
        orig: BaseException = sqlite3.OperationalError("database is locked")
    else:
        orig = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    return sa.exc.OperationalError("INSERT INTO run_claims ...", {}, orig)  # type: ignore[arg-type]


def _claims(store: Store, submission_id: str) -> list[tuple[str, int, str | None]]:
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(
            "SELECT c.run_id, c.attempt, h.ended_at FROM run_claims c JOIN planned_runs p ON p.run_id = c.run_id "
            "JOIN claim_holders h ON h.id = c.holder WHERE p.batch_id = :b ORDER BY p.slot"), {"b": submission_id})]


def _holders(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM claim_holders")).scalar_one())


# -- claiming and answering are one transaction ---------------------------------------------------


def test_a_fault_after_the_claim_leaves_the_run_claimable_not_a_ghost_lease(web_store: Store) -> None:
    """Every attempt's connection is killed right after its claim: past the retry bound the
    request answers 503, and nothing of the lease is left (the transaction rolled back whole)."""
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    submission_id = submit_remote(client, keys.alice_api, "remote").json()["id"]
    holders = _holders(web_store)
    _no_wait(web_store, seconds=1)
    injected = _fault_after(web_store.engine, "INSERT INTO run_claims", _killed(web_store), 10**6)
    answer = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent))
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5", answer.text
    assert answer.json()["detail"] == "store unavailable"
    assert _claims(web_store, submission_id) == [] and _holders(web_store) == holders  # rolled back whole
    assert len(injected) >= 2  # tried again, from the start, until the bound
    injected.stop()
    lease = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    first = RunsRepo(web_store).planned_runs(submission_id)[0].run_id
    assert lease["run_id"] == first and lease["pending"] == 14  # the same run, at its first attempt
    assert _claims(web_store, submission_id) == [(first, 1, None)]


def test_a_transient_fault_after_the_claim_is_retried_whole_and_leases_once(web_store: Store) -> None:
    _no_wait(web_store)
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    submission_id = submit_remote(client, keys.alice_api, "remote").json()["id"]
    failed = _fault_after(web_store.engine, "INSERT INTO run_claims", _killed(web_store), 2)
    lease = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent))
    assert lease.status_code == 200 and len(failed) == 2, lease.text
    assert _claims(web_store, submission_id) == [(lease.json()["run_id"], 1, None)]  # one lease, no ghost


# -- finishing a submission is idempotent and retried until done ----------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., tuple[int, str, str]]]:
    from assay.cli import main

    before = signal.getsignal(signal.SIGTERM)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["assay", *args])
        code: Any = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        done = capsys.readouterr()
        return code if isinstance(code, int) else 1, done.out, done.err

    yield call
    signal.signal(signal.SIGTERM, before)


def _status(store: Store, submission_id: str) -> batches.SubmissionSummary:
    return next(r for r in batches.list_submissions(store, actor=OPERATOR) if r.id == submission_id)


@pytest.mark.parametrize(("db_url", "finisher"), [("postgresql", "sweeper"), ("sqlite", "resume"),
                                                  ("sqlite", "score")],
                         indirect=["db_url"])  # each finisher calls the same `completion.complete`
def test_a_finalisation_killed_midway_is_completed_by_the_sweeper_resume_or_score(
        web_store: Store, db_url: str, finisher: str, monkeypatch: pytest.MonkeyPatch,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    from assay.agents.loader import load_agent
    from assay.service import exports

    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    submission_id = submit_remote(client, keys.alice_api, "remote").json()["id"]
    real_stamp = exports.stamp

    def killed(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("killed during finalisation")

    monkeypatch.setattr(exports, "stamp", killed)  # inside the finalising transaction: all of it rolls back
    agent = RemoteAgent(client, keys.alice_agent, lambda _lease: load_agent(IDLE))
    assert agent.play_all() == 15  # the last step is answered though its finalisation failed
    before = _status(web_store, submission_id)
    assert before.status == "pending" and before.n_recorded == 15
    assert RunsRepo(web_store).completable() == [submission_id]
    monkeypatch.setattr(exports, "stamp", real_stamp)
    if finisher == "sweeper":
        Workers(web_store, threads=0, sweep_seconds=None).sweep()
    elif finisher == "resume":
        code, out, err = cli("resume", submission_id, "--db", db_url)
        assert code == 0 and "15/15 runs recorded, complete" in out, err
    else:
        code, out, err = cli("score", submission_id, "--db", db_url)
        assert code == 0 and "complete" in out and "nothing to judge" in out, err
    after = _status(web_store, submission_id)
    assert after.status == "complete" and after.n_recorded == 15
    assert RunsRepo(web_store).completable() == []
    Workers(web_store, threads=0, sweep_seconds=None).sweep()  # idempotent: nothing more to do, nothing added
    assert _status(web_store, submission_id) == after


# -- an outage answers 503 with Retry-After, everywhere -------------------------------------------


@pytest.fixture(scope="module")
def outage_client() -> TestClient:
    """The app over a store whose PostgreSQL server is not there (nothing listens on its port)."""
    engine = create_store_engine(f"postgresql+psycopg://postgres@127.0.0.1:{_free_port()}/gone")
    store = Store(engine, "postgresql+psycopg://postgres@127.0.0.1/gone", Retry(0.0))
    return TestClient(make_app(store, rate_limit=0))


@pytest.mark.parametrize("path", ["/api/suites", "/api/leaderboard/forge", "/api/suites/forge/versions",
                                  "/api/entries/" + "a" * 32, "/api/benchmark/leaderboard"])
def test_an_api_route_answers_an_outage_with_503_json_and_retry_after(outage_client: TestClient, path: str) -> None:
    answer = outage_client.get(path)
    assert answer.status_code == 503, (path, answer.status_code, answer.text)
    assert answer.headers["Retry-After"] == "5"
    assert answer.json()["detail"] == "store unavailable"


@pytest.mark.parametrize("method,path", [("post", "/api/agent/runs/next"), ("post", "/api/submissions"),
                                         ("get", "/api/submissions")])
def test_a_keyed_route_answers_an_outage_with_503_not_401_or_500(outage_client: TestClient, method: str,
                                                                 path: str) -> None:
    answer = getattr(outage_client, method)(path, headers=bearer("gk_" + "x" * 40))
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5", answer.text


@pytest.mark.parametrize("path", ["/", "/suites/forge", "/suites/forge/1.0/card", "/benchmark"])
def test_a_page_answers_an_outage_with_the_503_page_and_retry_after(outage_client: TestClient, path: str) -> None:
    answer = outage_client.get(path)
    assert answer.status_code == 503, (path, answer.status_code)
    assert answer.headers["Retry-After"] == "5" and answer.headers["content-type"].startswith("text/html")
    assert "Traceback" not in answer.text and "could not be reached" in answer.text
