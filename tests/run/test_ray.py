"""The ray executor: runs play in Ray worker processes and give, run for run, what the others give.

Every test here plays on the one local Ray the session starts (`ray_address` in tests/conftest.py):
in this process the executor finds it connected and uses it; `assay` subprocesses join it with
`--ray-address`. Outcomes are read back from the store with `results_json`, as in the other
executor tests: what is reported is what was stored, never what the executor held in memory.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.agents.loader import load_agent
from assay.records import RunRecord
from assay.run.engine import Limits
from assay.run.executors import Task
from assay.run.executors.ray import MAX_GROUP, RayExecutor, Sizing
from assay.service.results import results_json
from assay.service.runs import plan_batch, run_suite
from assay.service.suites import SuiteBundle
from assay.store import Store
from assay.store.runs_repo import RunsRepo
from tests.support.forkserver import assay_command

#: under pytest-xdist, every Ray test runs on one worker: one local Ray for them all
pytestmark = pytest.mark.xdist_group("ray")

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
PID_AGENT = AGENTS / "pid_agent.py"
ASSAY = Path(sys.executable).with_name("assay")


def by_run(results: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    """What must not depend on the executor, per (case, trial)."""
    return {(c["case_id"], t["trial"]): (t["final_state_hash"], t["status"], t["score"], t["passed"])
            for c in results["cases"] for t in c["trials"]}


def test_ray_gives_run_for_run_the_hashes_and_scores_threads_give(
        forge: SuiteBundle, sqlite_store: Store, ray_address: str) -> None:
    for agent in ("reference:diligent", "reference:hasty"):
        ray_runs, thread_runs = (
            by_run(results_json(sqlite_store, run_suite(forge, agent_spec=agent, trials=2, seed=7, workers=4,
                                                         store=sqlite_store, executor=executor).batch_id, actor=OPERATOR))
            for executor in (RayExecutor(4, address=ray_address), "threads"))
        assert len(ray_runs) == 2 * len(forge.scenarios)
        assert ray_runs == thread_runs, agent


def test_sync_and_async_agents_play_in_ray_worker_processes(
        forge: SuiteBundle, sqlite_store: Store, ray_address: str) -> None:
    for name, is_async in (("agent", False), ("async_agent", True)):
        # in process: the agent reports the pid and thread that play it (a sandboxed one is pid 1)
        assert load_agent(f"python:{PID_AGENT}:{name}", in_process=True).is_async is is_async
        batch = run_suite(forge, agent_spec=f"python:{PID_AGENT}:{name}", trials=2, store=sqlite_store,
                          executor=RayExecutor(4, address=ray_address), agent_options={"in_process": True})
        rows = RunsRepo(sqlite_store).runs_for_batch(batch.batch_id)
        assert [r.status for r in rows] == ["completed"] * 2 * len(forge.scenarios)
        where = [(r.claim_summary or "").split(" ", 1) for r in rows]
        pids = {pid for pid, _ in where}
        assert all(pid.isdigit() for pid in pids) and str(os.getpid()) not in pids, name
        threads = {thread for _, thread in where}
        # a sync agent plays on the threads executor (its watchdog), an async one on an event loop
        assert (threads == {"assay-worker"}) is not is_async, (name, threads)


def test_a_sync_agent_that_hangs_in_a_worker_is_timed_out_there(
        forge: SuiteBundle, sqlite_store: Store, ray_address: str) -> None:
    batch = run_suite(forge, agent_spec=f"python:{AGENTS / 'misbehaving.py'}:hangs", trials=1, store=sqlite_store,
                      limits=Limits(turn_limit=6, time_limit=0.5), executor=RayExecutor(6, address=ray_address))
    trials = [t for c in results_json(sqlite_store, batch.batch_id, actor=OPERATOR)["cases"] for t in c["trials"]]
    assert [t["status"] for t in trials] == ["timeout"] * len(forge.scenarios)


def test_a_group_whose_worker_dies_is_recorded_run_for_run_as_errors(
        forge: SuiteBundle, sqlite_store: Store, ray_address: str) -> None:
    # in process: `dies` must take the Ray worker down, not a sandboxed agent process
    batch = run_suite(forge, agent_spec=f"python:{PID_AGENT}:dies", trials=2, store=sqlite_store,
                      executor=RayExecutor(2, address=ray_address), agent_options={"in_process": True})
    trials = [t for c in results_json(sqlite_store, batch.batch_id, actor=OPERATOR)["cases"] for t in c["trials"]]
    assert len(trials) == 2 * len(forge.scenarios)  # the plan is the denominator: nothing lost
    assert {t["status"] for t in trials} == {"error"}
    assert all(t["reason"].startswith("ray task failed: ") for t in trials), trials[0]["reason"]


def test_a_scenario_the_worker_cannot_rebuild_to_the_planned_hash_is_never_played(
        forge: SuiteBundle, ray_address: str) -> None:
    tampered = "f" * 64
    planned = [dataclasses.replace(p, scenario_hash=tampered) if p.case_id == forge.scenarios[0].id else p
               for p in plan_batch(forge, 2, 0)]
    by_id = {s.id: s for s in forge.scenarios}
    seen: list[tuple[RunRecord, int]] = []
    RayExecutor(2, address=ray_address).execute(
        [Task(by_id[p.case_id], p) for p in planned], load_agent("reference:diligent"), Limits(),
        lambda record, steps: seen.append((record, steps)))
    assert sorted(r.run_id for r, _ in seen) == sorted(p.run_id for p in planned)
    refused = [(r, s) for r, s in seen if r.scenario_hash == tampered]
    assert len(refused) == 2
    for record, steps in refused:
        assert record.status == "error" and steps == 0 and record.transcript == []
        assert "not the planned ffffffffffff" in (record.reason or "")
        # the world as it began, as for every run the harness could not play
        assert record.final_state == by_id[record.case_id].initial_state
    assert {r.status for r, _ in seen if r.scenario_hash != tampered} == {"completed"}


def test_the_cli_plays_on_a_ray_cluster_and_on_a_ray_of_its_own(tmp_path: Path, ray_address: str) -> None:
    def run(*extra: str) -> dict[tuple[str, int], tuple[Any, ...]]:
        out = tmp_path / f"results-{len(list(tmp_path.iterdir()))}.json"
        # the default executor through the worker's fork server (no Ray in it); the Ray runs start
        # the console script, so Ray is imported and started as a user's `assay` does it
        command = [str(ASSAY)] if "ray" in extra else assay_command()
        done = subprocess.run(
            [*command, "run", "forge", "--agent", "reference:diligent", "--seed", "7", "--trials", "1",
             "--db", f"sqlite:///{tmp_path / 'assay.db'}", "--output", str(out), *extra],
            capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return by_run(json.loads(out.read_text()))

    expected = run()  # the default executor
    assert len(expected) == 5
    assert run("--executor", "ray", "--ray-address", ray_address) == expected
    assert run("--executor", "ray") == expected  # a local Ray started, and stopped, by the CLI


def test_a_ray_address_nobody_listens_on_is_one_line_of_bad_input(tmp_path: Path, ray_address: str) -> None:
    done = subprocess.run(
        [str(ASSAY), "run", "forge", "--agent", "reference:idle", "--trials", "1", "--executor", "ray",
         "--ray-address", "127.0.0.1:1", "--db", f"sqlite:///{tmp_path / 'assay.db'}"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_gcs_rpc_server_connect_timeout_s": "2"})
    assert done.returncode == 2, done.stderr
    assert "--ray-address" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.heavy  # starts a process
def test_neither_the_cli_nor_the_other_executors_import_ray() -> None:
    code = ("import sys, assay.cli, assay.run.executors, assay.run.executors.threads, assay.run.executors.aio, "
            "assay.run.executors.ray; sys.exit('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_workers_are_runs_in_flight_spread_over_the_clusters_cpus() -> None:
    few = Sizing.of(workers=1, cpus=2)  # one group at a time, one run at a time
    assert (few.at_once, few.window) == (1, 1)
    even = Sizing.of(workers=4, cpus=2)  # two groups play, two runs each; two more wait their turn
    assert (even.at_once, even.window, even.size) == (2, 4, 4)
    wide = Sizing.of(workers=1000, cpus=2)  # a model endpoint's worth: 500 at once per group
    assert (wide.at_once, wide.window, wide.size) == (500, 4, 500)
    fast = Sizing.of(workers=4, cpus=2)
    fast.learn(seconds=0.002, runs=4)  # scripted runs: groups grow to fill a worker's time ...
    assert fast.size == MAX_GROUP
    slow = Sizing.of(workers=4, cpus=2)
    slow.learn(seconds=60.0, runs=4)  # ... model runs travel one round at a time
    assert slow.size == 2


def test_a_batch_of_n_model_runs_at_n_workers_has_n_calls_in_flight_on_ray(
        forge: SuiteBundle, ray_address: str) -> None:
    from tests.run.test_in_flight import WANT, Gate, play

    gate = Gate(WANT)
    seen = play(RayExecutor(WANT, address=ray_address), forge, gate)
    assert len(seen) == WANT and gate.calls == WANT
    assert gate.most == WANT  # every slot's first group holds one round: all of them play at once
