"""Play has its own lane (issue 26): agent routes never queue behind public reads, and an agent is
charged only the time between the server's answer and its next request's arrival — with an
injected clock, a step that waits in the server is never charged. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.run.engine import Limits
from assay.service import remote, submissions
from assay.service.actors import account_actor
from assay.store import Store
from assay.store.remote_repo import RemoteRepo
from tests.support.clock import ManualClock, set_store_clock

from ._remote import accounts_and_keys
from .conftest import bearer, make_app

pytestmark = pytest.mark.slow

LIST_ALERTS = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "list_alerts", "arguments": "{}"}}]}


def _remote_submission(store: Store, limits: Limits) -> str:
    return submissions.compose(store, "forge", factory=remote.remote_factory(), account="alice", label="remote",
                               limits=limits, actor=account_actor("alice"))


def _elapsed(store: Store, run_id: str) -> list[float]:
    return [float(s.elapsed) for s in RemoteRepo(store).steps(run_id)]


def test_time_a_step_waits_in_the_server_is_never_the_agent_s(web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    set_store_clock(monkeypatch, clock)
    keys = accounts_and_keys(web_store)
    client = TestClient(make_app(web_store, rate_limit=0))
    _remote_submission(web_store, Limits(turn_limit=40, time_limit=60.0))
    real_step = remote.step

    def slow_server(*args: Any, **kwargs: Any) -> Any:
        clock.advance(100)  # the request waits 100 s in the server before it is taken...
        answer = real_step(*args, **kwargs)
        clock.advance(50)  # ...and its answer 50 s more before it leaves
        return answer

    monkeypatch.setattr(remote, "step", slow_server)
    auth = bearer(keys.alice_agent)
    lease = client.post("/api/agent/runs/next", headers=auth).json()
    run_id = lease["run_id"]
    for index in (1, 2, 3):
        clock.advance(1)  # the agent thinks one second
        answer = client.post(f"/api/agent/runs/{run_id}/step", json={"step": index, "message": LIST_ALERTS},
                             headers=auth).json()
        assert answer["status"] == "running", answer  # 450 s in the server, 3 s of the agent's: no timeout
    charged = _elapsed(web_store, run_id)
    assert len(charged) == 3 and all(1.0 <= e < 1.01 for e in charged), charged


def test_play_never_queues_behind_public_reads(web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.service import board as board_service
    from assay.web import api

    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0)
    _remote_submission(web_store, Limits(turn_limit=40, time_limit=60.0))
    entered, release = threading.Event(), threading.Event()
    lanes = app.state.lanes
    real_board_json = board_service.board_json

    def stuck_read(*args: Any, **kwargs: Any) -> str:
        entered.set()
        release.wait(60)
        return real_board_json(*args, **kwargs)

    monkeypatch.setattr(api, "board_json", stuck_read)
    lanes.reads.total_tokens = 1  # the whole read lane: one thread, held by the stuck read
    results: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: results.update(read=TestClient(app).get("/api/leaderboard/forge")))
    reader.start()
    try:
        assert entered.wait(60)
        assert lanes.reads.borrowed_tokens == 1
        auth = bearer(keys.alice_agent)
        lease = TestClient(app).post("/api/agent/runs/next", headers=auth)
        assert lease.status_code == 200
        step = TestClient(app).post(f"/api/agent/runs/{lease.json()['run_id']}/step",
                                    json={"step": 1, "message": LIST_ALERTS}, headers=auth)
        assert step.status_code == 200 and step.json()["status"] == "running"
        assert reader.is_alive() and "read" not in results  # played while the read lane was full
    finally:
        release.set()
        reader.join(60)
    assert results["read"].status_code == 200


def test_past_the_cap_in_flight_a_read_is_refused_with_retry_after_and_play_goes_on(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.service import board as board_service
    from assay.web import api

    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0, max_inflight=1)
    _remote_submission(web_store, Limits(turn_limit=40, time_limit=60.0))
    entered, release = threading.Event(), threading.Event()
    real_board_json = board_service.board_json

    def stuck_read(*args: Any, **kwargs: Any) -> str:
        entered.set()
        release.wait(60)
        return real_board_json(*args, **kwargs)

    monkeypatch.setattr(api, "board_json", stuck_read)
    results: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: results.update(read=TestClient(app).get("/api/leaderboard/forge")))
    reader.start()
    try:
        assert entered.wait(60)
        busy = TestClient(app).get("/api/leaderboard/forge?limit=1")
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert busy.json()["retry_after"] == 1
        lease = TestClient(app).post("/api/agent/runs/next", headers=bearer(keys.alice_agent))
        assert lease.status_code == 200  # play is never refused for the readers' crowd
    finally:
        release.set()
        reader.join(60)
    assert results["read"].status_code == 200
    assert TestClient(app).get("/api/leaderboard/forge?limit=1").status_code == 200  # the cap frees again
