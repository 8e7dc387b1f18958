"""`assay mcp` over stdio, driven by the official `mcp` SDK's client (issue 28): each launch is one
session that plays the next run of one batch; the run is recorded, scored and replayable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from assay.service.actors import OPERATOR
from assay.errors import Conflict
from assay.service.execution import pending, stored_agent
from assay.service.results import replay, results_json
from assay.store.db import open_store
from assay.store.runs_repo import RunsRepo
from tests.support.mcp_client import play

SRC = str(Path(__file__).resolve().parents[2] / "src")
pytestmark = pytest.mark.heavy


def _server(db_url: str, *extra: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": SRC}
    return StdioServerParameters(command=sys.executable, args=["-c", "import sys; from assay.cli import console; sys.argv[0] = 'assay'; console()",
                                                               "mcp", "forge", "--trials", "1",
                                                               "--seed", "5", *extra, "--db", db_url], env=env)


def _session(db_url: str, **kw: object) -> dict:
    async def go() -> dict:
        async with Client(_server(db_url)) as client:
            return await play(client, **kw)  # type: ignore[arg-type]

    return anyio.run(go)


def test_sessions_play_the_runs_of_one_batch_recorded_and_scored(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'mcp.db'}"
    first = _session(db_url)
    assert first["over"] and "completed" in first["answers"][-1]
    assert "finish" in first["tools"] and "list_alerts" in first["tools"]
    assert first["instructions"] == first["briefing"] and "simulated" in first["briefing"]

    gone = _session(db_url, max_calls=2)  # a client that leaves before finish
    assert not gone["over"]

    store = open_store(db_url)
    try:
        (batch,) = RunsRepo(store).batch_listing("run")
        assert batch.agent_spec == "mcp" and batch.n_recorded == 1
        assert pending(store, batch.id) == batch.n_planned - 1  # the left run is pending again
        doc = results_json(store, batch.id, actor=OPERATOR)
        played = [t for c in doc["cases"] for t in c["trials"] if t["status"] == "completed"]
        assert len(played) == 1 and played[0]["passed"] and played[0]["score"] == 100
        assert doc["trials_per_case"] == 1 and doc["seed"] == 5
        assert replay(store, played[0]["run_id"], actor=OPERATOR)["identical"]
        first_case = played[0]
    finally:
        store.close()

    again = _session(db_url, agent_spec="reference:idle")  # the next launch: the same batch, the next run
    assert again["over"]
    store = open_store(db_url)
    try:
        (batch,) = RunsRepo(store).batch_listing("run")
        assert batch.n_recorded == 2
        doc = results_json(store, batch.id, actor=OPERATOR)
        statuses = {t["run_id"]: t["status"] for c in doc["cases"] for t in c["trials"]}
        assert statuses[first_case["run_id"]] == "completed" and list(statuses.values()).count("completed") == 2
        with pytest.raises(Conflict, match="assay mcp"):  # `assay resume` cannot play it: it says who does
            stored_agent(store, batch.id)
    finally:
        store.close()
