"""Builders for the remote-play tests: accounts and keys, a remote agent over a `TestClient`, and
the same run played in-process for comparison."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

from assay.agents.loader import AgentFactory, load_agent
from assay.records import PlannedRun, RunRecord
from assay.run.drivers import play_sync
from assay.run.engine import Limits, open_episode
from assay.score.oracle import evaluate_checks, verdict
from assay.service import accounts, execution
from assay.service.actors import OPERATOR
from assay.store import Store
from assay.store.rows import StoredRun
from assay.store.runs_repo import RunsRepo

from .conftest import bearer, issue_key


@dataclass(frozen=True)
class Keys:
    alice_api: str
    alice_agent: str
    bob_api: str
    bob_agent: str


def accounts_and_keys(store: Store) -> Keys:
    """alice (handle `alice-h`) and bob (handle `bob-h`), each with an API key and an agent key."""
    accounts.create(store, "alice", "alice-h", actor=OPERATOR)
    accounts.create(store, "bob", "bob-h", actor=OPERATOR)
    return Keys(issue_key(store, "alice", "api"), issue_key(store, "alice", "agent"),
                issue_key(store, "bob", "api"), issue_key(store, "bob", "agent"))


def submit_remote(client: TestClient, api_key: str, label: str, suite: str = "forge", **extra: Any) -> Any:
    return client.post("/api/submissions", json={"suite": suite, "label": label, "agent": "remote", **extra},
                       headers=bearer(api_key))


@dataclass
class RemoteAgent:
    """A remote agent over HTTP, as `assay play` is: lease, answer, step, until 204.

    `agent_for(lease)` gives the agent factory for a leased run; `seen` keeps every body the
    server answered (what an agent could read); `played` the run ids in the order they ended."""

    client: TestClient
    key: str
    agent_for: Callable[[dict[str, Any]], Any]
    seen: list[Any] = field(default_factory=list)
    played: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)

    def lease(self) -> dict[str, Any] | None:
        response = self.client.post("/api/agent/runs/next", headers=bearer(self.key))
        assert response.status_code in (200, 204), response.text
        if response.status_code == 204:
            assert response.content == b""
            return None
        self.seen.append(response.json())
        return response.json()

    def step(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(f"/api/agent/runs/{run_id}/step", json=body, headers=bearer(self.key))
        assert response.status_code == 200, response.text
        self.seen.append(response.json())
        return response.json()

    def play_run(self, lease: dict[str, Any]) -> dict[str, Any]:
        agent = self.agent_for(lease)()
        history, index = list(lease["messages"]), lease["step"]
        while True:
            message = agent(history, lease["tools"])
            answer = self.step(lease["run_id"], {"step": index, "message": message})
            assert answer["step"] == index
            history = [*history, message, *answer["messages"]]
            if answer["done"]:
                self.played.append(lease["run_id"])
                self.statuses[lease["run_id"]] = answer["status"]
                return answer
            assert answer["status"] == "running"
            index += 1

    def play_all(self) -> int:
        n = 0
        while (lease := self.lease()) is not None:
            self.play_run(lease)
            n += 1
        return n


def planned_of(store: Store, run_id: str) -> PlannedRun:
    row = RunsRepo(store).run(run_id)
    assert row is not None
    return PlannedRun(row.run_id, row.slot, row.case_id, row.scenario_hash, row.trial, row.seed)


def in_process(store: Store, run_id: str, agent: str | Any, limits: Limits | None = None) -> RunRecord:
    """The run `run_id` played in this process by `agent` (a spec, or a factory) on a fresh fork
    with the same seed."""
    planned = planned_of(store, run_id)
    loaded = _scenarios(store, _batch_of(store, run_id))[planned.scenario_hash]
    factory = load_agent(agent) if isinstance(agent, str) else agent
    return play_sync(open_episode(loaded, planned, limits or Limits()), factory)


def answering(value: Any) -> AgentFactory:
    """An in-process agent that always answers `value` (junk, say)."""
    return AgentFactory("python:answering", lambda: lambda _messages, _tools: value)


#: (store URL, batch id) -> the batch's scenarios as `execution.stored_scenarios` rebuilds them: a
#: batch's stored scenarios never change (append-only), and rebuilding them (parsing every case's
#: document) for each run compared was most of the remote-play tests' own time
_LOADED: dict[tuple[str, str], dict[str, Any]] = {}


def _scenarios(store: Store, batch_id: str) -> dict[str, Any]:
    key = (store.url, batch_id)
    if key not in _LOADED:
        _LOADED[key] = execution.stored_scenarios(store, batch_id)
    return _LOADED[key]


def _batch_of(store: Store, run_id: str) -> str:
    import sqlalchemy as sa

    from assay.store.schema import planned_runs

    with store.engine.connect() as conn:
        return str(conn.execute(sa.select(planned_runs.c.batch_id).where(planned_runs.c.run_id == run_id)).scalar_one())


def same_as_stored(store: Store, run_id: str, expected: RunRecord) -> StoredRun:
    """Assert the stored run is the in-process one, field by field; returns the stored row."""
    row = RunsRepo(store).run(run_id)
    assert row is not None and row.status is not None, f"run {run_id} is not recorded"
    for name in ("status", "reason", "turns", "claimed_success", "claim_summary", "final_state_hash",
                 "transcript", "actions"):
        assert getattr(row, name) == getattr(expected, name), (run_id, name)
    return row


def expected_score(store: Store, run_id: str, expected: RunRecord) -> tuple[int, bool]:
    loaded = _scenarios(store, _batch_of(store, run_id))[expected.scenario_hash]
    v = verdict(evaluate_checks(loaded.scenario.checks, expected.final_state), expected.status)
    return v.score, v.passed


#: The key of forge's cases at one rep each (`write_one_rep_forge`).
ONE_REP_FORGE = "forge-1"


def write_one_rep_forge(root: Path) -> Path:
    """A copy of the built-in forge suite under `root`, keyed `forge-1` with one rep per case:
    every case of forge in 5 runs rather than 15, for tests whose property holds run for run."""
    import assay

    suite = root / ONE_REP_FORGE
    shutil.copytree(Path(assay.__file__).resolve().parent / "suites" / "forge", suite)
    doc = yaml.safe_load((suite / "suite.yaml").read_text(encoding="utf-8"))
    doc.update(key=ONE_REP_FORGE, reps_per_scenario=1)
    (suite / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return suite


def one_rep_forge(store: Store, root: Path) -> tuple[str, Path]:
    """`write_one_rep_forge(root)` released into `store`: (its key, its path)."""
    from assay.service import releases

    suite = write_one_rep_forge(root)
    releases.release_path(store, str(suite), actor=OPERATOR)
    return ONE_REP_FORGE, suite
