"""The async executor across processes: the same runs as one event loop, played in child processes,
with nothing lost when a child dies and nothing of this process's state shared with them."""

from __future__ import annotations

import pytest

from assay.service.actors import OPERATOR

import os
from pathlib import Path
from typing import Any

from assay.agents.loader import load_agent
from assay.records import RunRecord
from assay.run.engine import Limits
from assay.run.executors import Task
from assay.run.executors.aio import AsyncExecutor, auto_processes
from assay.run.executors.procs import ProcessAsyncExecutor
from assay.service.results import results_json
from assay.service.runs import plan_batch, run_suite
from assay.service.suites import SuiteBundle
from assay.store import Store
from assay.store.runs_repo import RunsRepo

try:  # `python -m pytest` puts the repo root on sys.path; a bare `pytest` only tests/
    from tests.support.fake_openai import FakeOpenAI, assistant, tool_call
except ModuleNotFoundError:  # pragma: no cover
    from support.fake_openai import FakeOpenAI, assistant, tool_call  # type: ignore[no-redef]

PID_AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "pid_agent.py"


def _model(request: dict[str, Any]) -> dict[str, Any]:
    """Look at the alerts, then at the first host's logs, then finish: the same words every time."""
    said = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if said == 0:
        return assistant(tool_calls=[tool_call("list_alerts", {})])
    if said == 1:
        return assistant(tool_calls=[tool_call("list_hosts", {})])
    return assistant(tool_calls=[tool_call("finish", {"claimed_success": True, "summary": "done"})])


def _by_run(results: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {(c["case_id"], t["trial"]): (t["final_state_hash"], t["status"], t["score"], t["passed"], t["turns"])
            for c in results["cases"] for t in c["trials"]}


def test_child_event_loops_play_exactly_what_one_loop_plays(forge: SuiteBundle, sqlite_store: Store) -> None:
    with FakeOpenAI(_model) as server:
        options = {"base_url": server.base_url}
        seen = []
        for processes in (1, 2):
            batch = run_suite(forge, agent_spec="openai:fake-model", trials=3, seed=11, store=sqlite_store,
                              agent_options=options, executor=AsyncExecutor(6) if processes == 1 else ProcessAsyncExecutor(6, processes))
            seen.append(_by_run(results_json(sqlite_store, batch.batch_id, actor=OPERATOR)))
    assert len(seen[0]) == 3 * len(forge.scenarios)
    assert {v[1] for v in seen[0].values()} == {"completed"}
    assert seen[0] == seen[1]


def test_runs_are_played_in_the_children_not_here(forge: SuiteBundle, sqlite_store: Store) -> None:
    # in process: the agent reports the pid of the process that plays it (a sandboxed one is pid 1)
    batch = run_suite(forge, agent_spec=f"python:{PID_AGENT}:async_agent", trials=2, store=sqlite_store,
                      executor=ProcessAsyncExecutor(4, 2), agent_options={"in_process": True})
    rows = RunsRepo(sqlite_store).runs_for_batch(batch.batch_id)
    pids = {(r.claim_summary or "").split(" ", 1)[0] for r in rows}
    assert [r.status for r in rows] == ["completed"] * len(rows)
    assert len(pids) == 2 and str(os.getpid()) not in pids


@pytest.mark.heavy  # starts a process
def test_a_child_that_dies_loses_no_planned_run(forge: SuiteBundle) -> None:
    planned = plan_batch(forge, 2, 0)
    by_hash = {s.content_hash: s for s in forge.scenarios}
    seen: list[tuple[RunRecord, int]] = []
    ProcessAsyncExecutor(2, 2).execute([Task(by_hash[p.scenario_hash], p) for p in planned],
                                       # in process: `dies` must take the child down, not a sandboxed worker
                                       load_agent(f"python:{PID_AGENT}:dies", in_process=True), Limits(),
                                       lambda record, steps: seen.append((record, steps)))
    assert sorted(r.run_id for r, _ in seen) == sorted(p.run_id for p in planned)  # each exactly once
    assert {r.status for r, _ in seen} == {"error"}
    reasons = {r.reason for r, _ in seen}
    assert all(("died (exit code 17)" in why) or ("no worker process was left" in why) for why in reasons), reasons


def test_only_model_agents_with_many_runs_in_flight_spread_over_processes(monkeypatch) -> None:  # noqa: ANN001
    import assay.run.executors.aio as aio

    import sys
    import types

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    script = types.ModuleType("__main__")
    script.__file__ = "/home/someone/my_eval.py"  # a user's script, which a spawned child would run again
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert aio._main_is_ours() is False
    assert auto_processes(1000, load_agent("openai:m", base_url="http://127.0.0.1:9/v1"), cpus=2) == 1
    script.__file__ = str(Path(sys.executable).with_name("assay"))  # the console script
    assert aio._main_is_ours() is True
    del script.__file__  # python -c, a REPL
    assert aio._main_is_ours() is True
    model = load_agent("openai:m", base_url="http://127.0.0.1:9/v1")
    assert auto_processes(1000, model, cpus=2) == 2
    assert auto_processes(1000, model, cpus=8) == 8
    assert auto_processes(150, model, cpus=8) == 3
    assert auto_processes(40, model, cpus=8) == 1
    assert auto_processes(1000, load_agent("reference:diligent"), cpus=8) == 1
    # a key given in code never reaches a child's environment: such a batch stays in this process
    assert auto_processes(1000, load_agent("openai:m", base_url="http://127.0.0.1:9/v1", api_key="sk-code"),
                          cpus=8) == 1


@pytest.mark.heavy  # starts a process
def test_an_interrupt_stops_the_children_and_lets_the_process_exit(tmp_path: Path) -> None:
    """Ctrl-C reaches the parent as KeyboardInterrupt (here: from the sink); the children are
    stopped, and tasks still queued for them never hold the interpreter at exit."""
    import subprocess
    import sys

    agent = tmp_path / "slow_agent.py"
    agent.write_text(
        "import asyncio, json\n"
        "async def slow(messages, tools):\n"
        "    await asyncio.sleep(0.5)\n"
        "    args = json.dumps({'claimed_success': False, 'summary': 'slow'})\n"
        "    return {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c', 'type': 'function',\n"
        "            'function': {'name': 'finish', 'arguments': args}}]}\n")
    script = tmp_path / "interrupt.py"
    script.write_text(f'''
import sys
from assay.agents.loader import load_agent
from assay.run.engine import Limits
from assay.run.executors import Task
from assay.run.executors.procs import ProcessAsyncExecutor
from assay.service.runs import plan_batch
from assay.service.suites import resolve_suite

forge = resolve_suite("forge")
by_hash = {{s.content_hash: s for s in forge.scenarios}}
tasks = [Task(by_hash[p.scenario_hash], p) for p in plan_batch(forge, 1000, 0)]
seen = []
def sink(record, steps):
    seen.append(record)
    if len(seen) == 3:
        raise KeyboardInterrupt
try:
    # 1000 runs in flight per child and as many more queued for it: far more than a pipe holds
    ProcessAsyncExecutor(2000, 2).execute(tasks, load_agent("python:{agent}:slow", in_process=True), Limits(), sink)
except KeyboardInterrupt:
    print("stopped after", len(seen))
''')
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped after 3"


def test_make_executor_picks_the_multi_process_variant_for_a_model_batch_with_many_runs_in_flight(
        monkeypatch) -> None:  # noqa: ANN001
    from assay.run.executors import aio, make_executor

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setattr(aio, "_main_is_ours", lambda: True)
    monkeypatch.setattr(aio.os, "cpu_count", lambda: 2)
    model = load_agent("openai:m", base_url="http://127.0.0.1:9/v1")
    wide = make_executor("async", 100, model)
    assert isinstance(wide, ProcessAsyncExecutor) and (wide.workers, wide.processes) == (100, 2)
    assert type(make_executor("async", 40, model)) is AsyncExecutor
    assert type(make_executor(None, 1000, load_agent("reference:diligent"))).__name__ == "ThreadExecutor"


def test_a_record_crosses_the_process_boundary_whole_and_its_final_state_as_text_once(forge: SuiteBundle) -> None:
    import pickle

    from assay.run.engine import open_episode
    from assay.run.drivers import play_sync
    from assay.run.executors import wire

    planned = plan_batch(forge, 1, 3)[0]
    loaded = next(s for s in forge.scenarios if s.content_hash == planned.scenario_hash)
    episode = open_episode(loaded, planned, Limits())
    record = play_sync(episode, load_agent("reference:diligent"))
    result = pickle.loads(pickle.dumps(wire.encode(record, episode.steps)))
    run_id, fields, text, steps = result
    assert fields is not None and "final_state" not in fields and text == record.final_state_text
    seen: list[tuple[RunRecord, int]] = []
    in_flight = {run_id: Task(loaded, planned)}
    wire.settle(result, in_flight, lambda r, s: seen.append((r, s)), "here")
    wire.settle(result, in_flight, lambda r, s: seen.append((r, s)), "here")  # a second copy: dropped
    [(back, back_steps)] = seen
    assert back.model_dump() == record.model_dump() and back.final_state_text == text and back_steps == steps
    failed: list[RunRecord] = []
    wire.settle(wire.failed(run_id, "no"), {run_id: Task(loaded, planned)}, lambda r, _s: failed.append(r), "here")
    assert [(r.status, r.reason) for r in failed] == [("error", "no")]
