"""A scripted batch played by forked processes (`run/executors/forks.py`): the same bytes stored as
when played in this process, every planned run recorded exactly once when a child dies or the batch
is stopped, and no child left behind."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import pytest
import sqlalchemy as sa

from assay.agents.loader import load_agent
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits
from assay.run.executors import Task, forks, threads
from assay.run.executors.threads import ThreadExecutor
from assay.service.runs import plan_batch, run_suite
from assay.service.suites import SuiteBundle
from assay.store import Store

pytestmark = pytest.mark.heavy  # every test here forks the executor's children


def _stored(store: Store, batch_id: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Every stored byte of a batch's runs, by (case, trial): the JSON columns as written."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT p.case_id, p.trial, r.status, r.final_state_hash, r.final_state, r.transcript, r.actions, "
            "r.turns, r.claimed_success, r.claim_summary, r.reason, v.score, v.passed, v.false_success, "
            "(SELECT group_concat(c.check_id || ':' || c.passed, ',') FROM check_outcomes c WHERE c.run_id = r.run_id) "
            "FROM planned_runs p JOIN runs r ON r.run_id = p.run_id JOIN run_verdicts v ON v.run_id = r.run_id "
            "WHERE p.batch_id = :b"), {"b": batch_id}).all()
    return {(row[0], row[1]): tuple(row[2:]) for row in rows}


def test_forked_play_stores_the_very_bytes_of_play_in_this_process(forge: SuiteBundle, sqlite_store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "FORK_AT", 1)
    monkeypatch.setattr(forks, "usable_cpus", lambda: 2)
    played = {}
    for workers in (1, 2):  # one: in this process; two: two forked children
        batch = run_suite(forge, agent_spec="reference:diligent", trials=3, seed=5, workers=workers,
                          store=sqlite_store)
        played[workers] = _stored(sqlite_store, batch.batch_id)
    assert len(played[1]) == 3 * len(forge.scenarios)
    assert {v[0] for v in played[1].values()} == {"completed"}
    assert played[1] == played[2]


def _tasks(forge: SuiteBundle, trials: int) -> list[Task]:
    by_hash = {s.content_hash: s for s in forge.scenarios}
    return [Task(by_hash[p.scenario_hash], p) for p in plan_batch(forge, trials, 0)]


def test_runs_come_back_played_scored_and_encoded_by_the_children(forge: SuiteBundle) -> None:
    tasks = _tasks(forge, 4)
    seen: list[RunRecord] = []
    forks.ForkedScripted(2).execute(tasks, load_agent("reference:diligent"), Limits(),
                                    lambda record, steps: seen.append(record), ThreadExecutor._inline)
    assert sorted(r.run_id for r in seen) == sorted(t.planned.run_id for t in tasks)
    assert all(r.bodies_text is not None and r.outcomes is not None and r.final_state_text for r in seen)
    assert multiprocessing.active_children() == []


class _DiesInAChild:
    """An agent that takes down any process but the one that made it (where it finishes at once)."""

    def __init__(self, home: int) -> None:
        self.home = home

    def __call__(self, messages: Any, tools: Any) -> dict[str, Any]:
        if os.getpid() != self.home:
            os._exit(3)
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "finish", "arguments": '{"claimed_success": false, "summary": "home"}'}}]}


def test_a_child_that_dies_loses_no_planned_run_and_the_rest_is_played_here(forge: SuiteBundle) -> None:
    tasks = _tasks(forge, 20)  # more than the children take at once: some are left when both have died
    home = os.getpid()
    seen: list[tuple[RunRecord, int]] = []
    forks.ForkedScripted(2).execute(tasks, lambda: _DiesInAChild(home), Limits(),
                                    lambda record, steps: seen.append((record, steps)), ThreadExecutor._inline)
    assert sorted(r.run_id for r, _ in seen) == sorted(t.planned.run_id for t in tasks)  # each exactly once
    died = [r for r, _ in seen if r.status == "error"]
    assert died and all("worker process playing this run died (exit code 3)" in (r.reason or "") for r in died)
    assert {r.claim_summary for r, _ in seen if r.status != "error"} == {"home"}
    assert multiprocessing.active_children() == []


def test_a_stopped_batch_leaves_no_child_behind(forge: SuiteBundle) -> None:
    tasks = _tasks(forge, 40)
    seen: list[PlannedRun] = []

    def sink(record: RunRecord, steps: int) -> None:
        seen.append(record.run_id)  # type: ignore[arg-type]
        if len(seen) == 20:
            raise KeyboardInterrupt  # as Ctrl-C (or SIGTERM, which the CLI raises as one) stops it

    with pytest.raises(KeyboardInterrupt):
        forks.ForkedScripted(2).execute(tasks, load_agent("reference:diligent"), Limits(), sink,
                                        ThreadExecutor._inline)
    assert len(seen) == 20 and multiprocessing.active_children() == []
