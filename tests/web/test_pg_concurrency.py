"""The service under concurrent requests on PostgreSQL, as `assay serve --workers N` runs it.

Two apps, each over its own store (its own connection pool) on one PostgreSQL database, stand for
two uvicorn workers; threads fire requests at both at once. The cap, the leases and the steps are
decided in the database (locks and unique keys), so: no fourth submission, no run leased twice,
no step applied twice — and every run, played through all of this, is the in-process run.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.agents.loader import load_agent
from assay.service import execution, remote, submissions
from assay.service.actors import OPERATOR, account_actor
from assay.store import Store, open_store
from assay.store.board_schema import submissions as submissions_table
from assay.store.remote_schema import remote_steps
from assay.store.schema import runs
from assay.store.runs_repo import RunsRepo

from ._remote import accounts_and_keys, in_process, one_rep_forge, same_as_stored
from .conftest import bearer, make_app

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)

THREADS = 8


@pytest.fixture
def apps(web_store: Store, db_url: str) -> Iterator[list[TestClient]]:
    """Two 'workers': apps over two stores (two pools) on the same database."""
    other = open_store(db_url)
    try:
        yield [TestClient(make_app(web_store, rate_limit=0)), TestClient(make_app(other, rate_limit=0))]
    finally:
        other.close()


def at_once(n: int, call: Callable[[int], Any]) -> list[Any]:
    """`call(i)` on `n` threads released together; the results in order of `i`."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def _count(store: Store, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _remote(store: Store, account: str = "alice", label: str = "remote", suite: str = "forge") -> str:
    return submissions.compose(store, suite, factory=remote.remote_factory(), account=account, label=label,
                               actor=account_actor(account))


def test_concurrent_submissions_never_make_a_fourth(web_store: Store, apps: list[TestClient]) -> None:
    keys = accounts_and_keys(web_store)

    def submit(i: int) -> tuple[str, int]:
        who, key = ("alice", keys.alice_api) if i % 2 == 0 else ("bob", keys.bob_api)
        response = apps[i % 4 // 2].post("/api/submissions", headers=bearer(key),
                                         json={"suite": "forge", "label": f"agent-{i}", "agent": "remote"})
        return who, response.status_code

    outcomes = Counter(at_once(2 * THREADS, submit))
    assert outcomes == {("alice", 201): 3, ("alice", 409): THREADS - 3, ("bob", 201): 3, ("bob", 409): THREADS - 3}
    for account in ("alice", "bob"):
        assert _count(web_store, sa.select(sa.func.count()).select_from(submissions_table)
                      .where(submissions_table.c.account == account)) == 3


def test_concurrent_leases_never_lease_a_run_twice(web_store: Store, apps: list[TestClient]) -> None:
    keys = accounts_and_keys(web_store)
    ids = {_remote(web_store, label="one"), _remote(web_store, label="two")}

    def lease_all(i: int) -> list[str]:
        leased = []
        while True:
            response = apps[i % 2].post("/api/agent/runs/next", headers=bearer(keys.alice_agent))
            assert response.status_code in (200, 204), response.text
            if response.status_code == 204:
                return leased
            assert response.json()["submission_id"] in ids
            leased.append(response.json()["run_id"])

    leased = [run_id for batch in at_once(THREADS, lease_all) for run_id in batch]
    assert len(leased) == len(set(leased)) == 30
    assert set(leased) == {r.run_id for s in ids for r in RunsRepo(web_store).planned_runs(s)}
    assert all(execution.pending(web_store, s) == 0 for s in ids)


def test_the_same_step_from_many_threads_is_applied_once(web_store: Store, apps: list[TestClient]) -> None:
    keys = accounts_and_keys(web_store)
    _remote(web_store)
    lease = apps[0].post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    run_id = lease["run_id"]
    agent = load_agent("reference:diligent")()
    first = agent(lease["messages"], lease["tools"])

    def send(body: dict[str, Any]) -> Callable[[int], Any]:
        def call(i: int) -> Any:
            response = apps[i % 2].post(f"/api/agent/runs/{run_id}/step", json=body, headers=bearer(keys.alice_agent))
            return response.status_code, response.json()
        return call

    same = at_once(THREADS, send({"step": 1, "message": first}))
    assert {code for code, _ in same} == {200}
    assert all(answer == same[0][1] for _, answer in same)  # one answer, said to every retry
    assert _count(web_store, sa.select(sa.func.count()).select_from(remote_steps)
                  .where(remote_steps.c.run_id == run_id)) == 1

    def rival(i: int) -> Any:  # different second answers: one is taken, the rest refused
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"rival-{i}", "type": "function", "function": {"name": "list_tickets", "arguments": "{}"}}]}
        return send({"step": 2, "message": call})(i)

    rivals = Counter(code for code, _ in at_once(THREADS, rival))
    assert rivals == {200: 1, 409: THREADS - 1}
    assert _count(web_store, sa.select(sa.func.count()).select_from(remote_steps)
                  .where(remote_steps.c.run_id == run_id)) == 2


def test_agents_playing_at_once_record_every_run_once_as_in_process(web_store: Store, apps: list[TestClient],
                                                                    tmp_path: Path) -> None:
    """Four agents play two submissions at once, every step sent twice to both workers. On forge's
    five cases at one rep (`forge-1`): ten runs keep four players busy at once, and each run is
    compared with its in-process run, which holds run for run."""
    keys = accounts_and_keys(web_store)
    suite, _path = one_rep_forge(web_store, tmp_path)
    ids = [_remote(web_store, label="one", suite=suite), _remote(web_store, label="two", suite=suite)]
    factory = load_agent("reference:diligent")
    lock = threading.Lock()
    played: list[str] = []

    def play(i: int) -> None:
        client, twin = apps[i % 2], apps[(i + 1) % 2]
        with ThreadPoolExecutor(2) as both:
            while True:
                response = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent))
                if response.status_code == 204:
                    return
                lease = response.json()
                agent, history, index = factory(), list(lease["messages"]), 1
                while True:
                    body = {"step": index, "message": agent(history, lease["tools"])}
                    url = f"/api/agent/runs/{lease['run_id']}/step"
                    # every step is sent twice at once, to both workers (a retry racing its original)
                    answers = list(both.map(lambda c: c.post(url, json=body, headers=bearer(keys.alice_agent)),
                                            (client, twin)))
                    assert [a.status_code for a in answers] == [200, 200]
                    assert answers[0].json() == answers[1].json()
                    answer = answers[0].json()
                    history = [*history, body["message"], *answer["messages"]]
                    if answer["done"]:
                        with lock:
                            played.append(lease["run_id"])
                        break
                    index += 1

    at_once(4, play)
    assert len(played) == len(set(played)) == 10
    assert _count(web_store, sa.select(sa.func.count()).select_from(runs)) == 10
    for submission_id in ids:
        assert submissions.results(web_store, submission_id, actor=OPERATOR)["status"] == "complete"
        for slot in RunsRepo(web_store).planned_runs(submission_id):
            row = same_as_stored(web_store, slot.run_id, in_process(web_store, slot.run_id, "reference:diligent"))
            with web_store.engine.connect() as conn:
                steps = list(conn.execute(sa.select(remote_steps.c.step).where(remote_steps.c.run_id == slot.run_id)
                                          .order_by(remote_steps.c.step)).scalars())
            assert steps == list(range(1, (row.turns or 0) + 1))  # each answer once, none lost, none twice
