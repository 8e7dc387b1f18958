"""Trait scoring as a user runs it: the real `assay` CLI against a local OpenAI-compatible judge
(the real `openai` client), on a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import pytest

from tests.support.fake_judge_server import FakeJudgeServer
from tests.support.forkserver import assay_command

pytestmark = pytest.mark.heavy  # every test here runs `assay` as processes (tests/support/forkserver.py)



def _cli(db: str, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ASSAY_DB", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    done = subprocess.run([*assay_command(), *args, "--db", db], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == expect, (args, done.stdout, done.stderr)
    if expect == 2:
        assert done.stderr.startswith("assay: error: ") and len(done.stderr.strip().splitlines()) == 1
    return done


def _count(db: str, table: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


def test_submit_with_a_model_judge_then_score_finishes_nothing_twice(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    _cli(db, "account", "create", "alice", "--public-handle", "alice")
    # a bad judge is refused before anything is stored
    refused = _cli(db, "submit", "academy", "--agent", "reference:steadfast", "--account", "alice", "--label",
                   "x", "--judge", "openai:", expect=2)
    assert "--judge" in refused.stderr and _count(db, "submissions") == 0
    with FakeJudgeServer() as server:
        out = tmp_path / "owner.json"
        _cli(db, "submit", "academy", "--agent", "reference:steadfast", "--account", "alice", "--label",
             "judged", "--publish", "--judge", "openai:judge-1", "--judge-base-url", server.base_url,
             "--output", str(out), "--quiet")
        view: dict[str, Any] = json.loads(out.read_text())
        assert len(server.calls) == 20 * 5
        assert {c.body["temperature"] for c in server.calls} == {0}
        score = json.loads(_cli(db, "score", view["id"], "--judge-base-url", server.base_url, "--json").stdout)
    assert score["passes_recorded"] == 0 and score["runs_scored"] == 20
    assert score["judge"]["model"] == "openai:judge-1"
    assert view["status"] == "complete" and view["composite"] == 0.5  # the fake judge scores every trait 0.5
    assert all(len(t["passes"]) == 5 for r in view["runs"] for t in r["traits"].values())
    assert _count(db, "judge_passes") == 100
    other = _cli(db, "score", view["id"], "--judge", "rules", expect=2)
    assert "pinned at its first scoring" in other.stderr
    board = json.loads(_cli(db, "board", "academy", "--json").stdout)
    entry = board["entries"][0]
    assert entry["judge"]["model"] == "openai:judge-1" and entry["composite"] == 0.5
    assert board["provenance"]["judge"]["model"] == "rules"  # what the release pins
