"""The ray executor: runs play in Ray worker processes and give, run for run, what the others give."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from assay.agents.loader import load_agent
from assay.records import RunRecord
from assay.run.engine import Limits
from assay.run.executors import Task
from assay.run.executors.ray import RayExecutor
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle
from assay.store import Store

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "pid_agent.py"
ASSAY = Path(sys.executable).with_name("assay")


def by_run(results: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {(c["case_id"], t["trial"]): (t["final_state_hash"], t["status"], t["score"], t["passed"])
            for c in results["cases"] for t in c["trials"]}


def test_ray_gives_run_for_run_what_threads_give(forge: SuiteBundle, sqlite_store: Store, ray_session: None) -> None:
    for agent in ("reference:diligent", "reference:hasty"):
        ray = run_suite(forge, agent_spec=agent, trials=2, seed=7, workers=4, store=sqlite_store,
                        executor=RayExecutor(4))
        threads = run_suite(forge, agent_spec=agent, trials=2, seed=7, workers=4, store=sqlite_store, executor="threads")
        assert by_run(results_json(sqlite_store, ray.batch_id)) == by_run(results_json(sqlite_store, threads.batch_id))


def test_runs_play_in_ray_worker_processes_sync_and_async(forge: SuiteBundle, sqlite_store: Store, ray_session: None) -> None:
    for name in ("agent", "async_agent"):
        batch = run_suite(forge, agent_spec=f"python:{AGENTS}:{name}", trials=2, store=sqlite_store,
                          executor=RayExecutor(4))
        rows = sqlite_store.runs_for_batch(batch.batch_id)
        assert [r["status"] for r in rows] == ["completed"] * 10
        pids = {r["claim_summary"] for r in rows}
        assert str(os.getpid()) not in pids and all(p.isdigit() for p in pids)


def test_a_group_the_worker_cannot_rebuild_is_recorded_as_errors(forge: SuiteBundle, ray_session: None) -> None:
    case = forge.scenarios[0]
    from assay.service.runs import plan_batch

    planned = [dataclasses.replace(p, scenario_hash="f" * 64) for p in plan_batch(forge, 2, 0) if p.case_id == case.id]
    seen: list[RunRecord] = []
    RayExecutor(2).execute([Task(case, p) for p in planned], load_agent("reference:idle"),
                                                Limits(), lambda r, s: seen.append(r))
    assert sorted(r.run_id for r in seen) == sorted(p.run_id for p in planned)
    assert {r.status for r in seen} == {"error"} and "content hash" in (seen[0].reason or "")


def test_the_cli_plays_on_a_local_ray_with_the_default_executors_figures(tmp_path: Path) -> None:
    def run(*extra: str) -> dict[str, Any]:
        out = tmp_path / f"{len(extra)}.json"
        done = subprocess.run([str(ASSAY), "run", "forge", "--agent", "reference:diligent", "--seed", "7", "--trials", "1",
                               "--db", f"sqlite:///{tmp_path / 'assay.db'}", "--json", str(out), *extra],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())

    assert by_run(run("--executor", "ray")) == by_run(run())  # the CLI starts (and stops) a local Ray of its own
