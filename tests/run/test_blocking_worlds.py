"""A world whose steps block (a campaign worded by a model facilitator: one sync HTTP call per line)
does not hold up the async executor's event loop: its runs' model calls overlap, as the server
sees them in flight together, and every executor plays them to the same final states.

The endpoint answers after a fixed delay; the tests never time anything, they count what the
server held at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.agents.loader import load_agent
from assay.records import PlannedRun, RunRecord
from assay.run.drivers import blocks
from assay.run.engine import Limits, open_episode
from assay.run.executors import Task
from assay.run.executors import ray as ray_executor
from assay.run.executors.aio import AsyncExecutor
from assay.run.executors.procs import ProcessAsyncExecutor
from assay.run.executors.threads import ThreadExecutor
from assay.scenario.load import LoadedScenario, load_scenario
from assay.worlds.campaign.model_facilitator import FacilitatorSpec
from assay.worlds.kits import get_kit
from tests.support.fake_judge_server import FakeJudgeServer, JudgeCall, content

ACADEMY = Path(assay.__file__).resolve().parent / "suites" / "academy"
RUNS = 6
DELAY = 0.2


def _gm(call: JudgeCall) -> Any:
    return content("(the game master) " + call.body["messages"][-1]["content"].split(":\n\n", 1)[1])


def _modelled(base_url: str, name: str = "sealed-letter") -> LoadedScenario:
    loaded = load_scenario(ACADEMY / f"{name}.yaml", get_kit)
    return dataclasses.replace(loaded, world_options={"facilitator": FacilitatorSpec("openai:gm-1", base_url)})


def _tasks(loaded: LoadedScenario) -> list[Task]:
    return [Task(loaded, PlannedRun(f"run-{i:02d}", i, loaded.id, loaded.content_hash, i + 1, 100 + i))
            for i in range(RUNS)]


def _play(executor: Any, tasks: list[Task]) -> dict[str, RunRecord]:
    records: dict[str, RunRecord] = {}

    def sink(record: RunRecord, _steps: int) -> None:
        records[record.run_id] = record

    executor.execute(tasks, load_agent("reference:steadfast"), Limits(), sink)
    assert set(records) == {t.planned.run_id for t in tasks}
    return records


def _lines(record: RunRecord) -> list[dict[str, Any]]:
    return [e for e in record.transcript if e.get("source") == "facilitator" and e.get("role") == "user"]


def test_only_a_world_with_a_model_facilitator_says_its_steps_block() -> None:
    loaded = load_scenario(ACADEMY / "sealed-letter.yaml", get_kit)
    planned = PlannedRun("r", 0, loaded.id, loaded.content_hash, 1, 1)
    assert not blocks(open_episode(loaded, planned, Limits()))
    modelled = _modelled("http://127.0.0.1:9/v1")
    assert blocks(open_episode(modelled, planned, Limits()))
    replayed = dataclasses.replace(loaded, world_options=get_kit("campaign").replay_options([]))
    assert not blocks(open_episode(replayed, planned, Limits()))  # a replay says recorded lines: no model


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_model_facilitated_runs_overlap_under_the_async_executor_and_match_threads() -> None:
    with FakeJudgeServer(_gm, latency=DELAY) as server:
        tasks = _tasks(_modelled(server.base_url))
        on_loop = _play(AsyncExecutor(RUNS), tasks)
        overlapped = server.max_in_flight
        asked_async = len(server.calls)
        on_threads = _play(ThreadExecutor(RUNS), tasks)
    # the loop never waited on one run's model call: other runs' calls were in flight with it
    assert overlapped >= 2
    assert all(r.status == "completed" for r in on_loop.values())
    assert {k: r.final_state_hash for k, r in on_loop.items()} == {k: r.final_state_hash for k, r in on_threads.items()}
    # every line of every run was the model's, one request per line
    lines = [line for r in on_loop.values() for line in _lines(r)]
    assert len(lines) == asked_async
    assert all(line["data"]["facilitator"] == "openai:gm-1" and line["content"].startswith("(the game master)")
               for line in lines)


@pytest.mark.heavy  # starts a process
def test_child_event_loops_fork_the_worlds_with_the_batchs_facilitator() -> None:
    with FakeJudgeServer(_gm, latency=DELAY) as server:
        tasks = _tasks(_modelled(server.base_url))
        in_children = _play(ProcessAsyncExecutor(RUNS, processes=2), tasks)
        on_threads = _play(ThreadExecutor(RUNS), tasks)
    assert {k: r.final_state_hash for k, r in in_children.items()} == {
        k: r.final_state_hash for k, r in on_threads.items()}
    assert all(r.status == "completed" and _lines(r) for r in in_children.values())
    assert all(line["data"]["facilitator"] == "openai:gm-1" for r in in_children.values() for line in _lines(r))


def test_a_ray_group_forks_the_worlds_with_the_options_it_is_sent(monkeypatch: Any) -> None:
    """`play_group` as a Ray worker runs it (called here, the scenario already rebuilt in its cache):
    the options come with the group, never with the cached scenario."""
    with FakeJudgeServer(_gm) as server:
        modelled = _modelled(server.base_url)
        plain = dataclasses.replace(modelled, world_options={})
        monkeypatch.setitem(ray_executor._rebuilt, plain.content_hash, plain)
        runs = [dataclasses.asdict(t.planned) for t in _tasks(modelled)[:2]]
        _, with_options = ray_executor.play_group(("reference:steadfast", {}), dataclasses.asdict(Limits()),
                                                  {plain.content_hash: None}, runs, 2,
                                                  {plain.content_hash: dict(modelled.world_options)})
        _, without = ray_executor.play_group(("reference:steadfast", {}), dataclasses.asdict(Limits()),
                                             {plain.content_hash: None}, runs, 2)
    facilitators = {e["data"]["facilitator"] for _, fields, _, _ in with_options
                    for e in fields["transcript"] if e.get("source") == "facilitator" and e.get("role") == "user"}
    assert facilitators == {"openai:gm-1"}
    scripted = {e["data"]["facilitator"] for _, fields, _, _ in without
                for e in fields["transcript"] if e.get("source") == "facilitator" and e.get("role") == "user"}
    assert scripted == {"scripted"}
