"""Run outcomes: every planned run ends in exactly one status, and every one of them counts.

docs/architecture.md, Run outcomes: `completed` (agent called finish), `timeout`, `turn_limit`, `crashed`
(agent raised), `empty` (no content and no tool calls, or not a message), `error` (harness fault,
recorded with its reason). All but `completed` are failures and stay in every denominator
(invariant 5). A tool call with an unknown name or bad arguments is answered with a tool error
message, as a real API would, not a crash.

Each test runs the forge suite through `run_suite` — the same path `assay run` takes — with an
agent from `tests/fixtures/agents/misbehaving.py`, and reads the outcome back from the store with
`results_json`: what is reported is what was stored, never what the executor held in memory.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import dataclasses
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.agents.loader import AgentFactory
from assay.agents.reference import Diligent
from assay.run.engine import Limits
from assay.records import STATUSES
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle
from assay.store.db import open_store
from assay.store.repo import Store
from assay.store.runs_repo import RunsRepo

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "misbehaving.py"

#: Few turns, and room enough that only a hanging agent ever meets the time limit.
FAST = Limits(turn_limit=6, time_limit=5.0)

#: Small enough that a hanging agent costs about a second per wave of workers.
HANGS = Limits(turn_limit=6, time_limit=0.5)

#: Room for `reference:diligent` to do the whole job (its longest case takes about 20 turns).
ROOMY = Limits(turn_limit=40, time_limit=2.0)

#: No test here may take longer than this, even if the watchdog failed to end a hung agent.
BOUND_S = 60.0


def spec(name: str) -> str:
    return f"python:{AGENTS}:{name}"


def bounded(fn: Callable[[], Any], seconds: float = BOUND_S) -> Any:
    """Call `fn` on a daemon thread; fail (instead of hanging the session) if it overstays."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="bounded-run-suite")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"run_suite did not return within {seconds:g} s: a hung agent stalled the batch")
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_batch(store: Store, bundle: SuiteBundle, *, agent: str | None = None, factory: AgentFactory | None = None,
              trials: int = 2, workers: int = 4, limits: Limits = FAST) -> dict[str, Any]:
    result = bounded(lambda: run_suite(bundle, agent_spec=agent, factory=factory, trials=trials, workers=workers,
                                       limits=limits, store=store))
    assert result.n_runs == len(bundle.scenarios) * trials
    return results_json(store, result.batch_id, actor=OPERATOR)


def all_trials(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for case in results["cases"] for t in case["trials"]]


def assert_plan_accounted(store: Store, results: dict[str, Any], bundle: SuiteBundle, trials: int) -> None:
    """Exactly one trial per planned run — no more, no fewer — and the plan is the denominator."""
    planned = RunsRepo(store).planned_runs(results["batch_id"])
    assert len(planned) == len(bundle.scenarios) * trials
    assert [c["case_id"] for c in results["cases"]] == [s.id for s in bundle.scenarios]
    for case in results["cases"]:
        assert [t["trial"] for t in case["trials"]] == list(range(1, trials + 1)), case["case_id"]
    got = all_trials(results)
    assert sorted(t["run_id"] for t in got) == sorted(p.run_id for p in planned)
    for t in got:
        assert t["status"] in STATUSES
        assert t["reason"] != "no run was recorded for this planned slot", f"planned run {t['run_id']} was lost"
        if t["status"] != "completed":
            assert t["passed"] is False, t
            assert t["claimed_success"] is None, t
            assert t["false_success"] is False, t
    s = results["summary"]
    assert s["cases"] == len(bundle.scenarios)
    assert s["trials"] == len(planned)
    assert s["pass_rate"] == sum(t["passed"] for t in got) / len(planned)
    assert s["false_successes"] == sum(t["false_success"] for t in got)


def tool_replies(transcript: list[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> content of the `role: tool` message that answered it."""
    return {m["tool_call_id"]: m["content"] for m in transcript if m["role"] == "tool"}


# -- one status per misbehaviour ----------------------------------------------------------------

FAILURES = [
    # agent,          status,       what the stored reason must say
    ("raises",         "crashed",    "RuntimeError"),
    ("hangs",          "timeout",    "time limit"),
    ("hangs_async",    "timeout",    "time limit"),
    ("returns_none",   "empty",      "NoneType"),
    ("returns_string", "empty",      "str"),
    ("empty_message",  "empty",      "no content and no tool calls"),
    ("chatty",         "turn_limit", "6 turns"),
]


@pytest.mark.parametrize(("agent", "status", "reason"), FAILURES, ids=[f[0] for f in FAILURES])
def test_a_misbehaving_agent_fails_every_planned_run_with_its_status(
    sqlite_store: Store, forge: SuiteBundle, agent: str, status: str, reason: str
) -> None:
    hangs = agent.startswith("hangs")
    trials = 1 if hangs else 2
    results = run_batch(sqlite_store, forge, agent=spec(agent), trials=trials, limits=HANGS if hangs else FAST)

    assert_plan_accounted(sqlite_store, results, forge, trials)
    for t in all_trials(results):
        assert t["status"] == status, t
        assert reason in (t["reason"] or ""), t
        assert t["passed"] is False
    s = results["summary"]
    assert s["pass_rate"] == 0.0
    assert s["false_success_rate"] == 0.0
    assert all(v == 0.0 for v in s["pass_hat_k"].values())


def test_a_crash_is_recorded_with_the_exception_type_and_message(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("raises"), trials=1)
    run = RunsRepo(sqlite_store).run(all_trials(results)[0]["run_id"])
    assert run.status == "crashed"
    assert run.reason == "agent raised RuntimeError: agent exploded on purpose"
    assert run.turns == 0
    assert run.actions == []
    # the agent's traceback is kept with the run, recorded (never shown to any agent), for the debrief
    kept = [e for e in run.transcript if e.get("source") == "harness" and "traceback" in (e.get("data") or {})]
    assert len(kept) == 1 and kept[0].get("role") is None
    trace = kept[0]["data"]["traceback"]
    assert trace.startswith("Traceback (most recent call last)") and "misbehaving.py" in trace
    assert "in raises" in trace and trace.rstrip().endswith("RuntimeError: agent exploded on purpose")


def test_a_debrief_of_a_crashed_run_shows_why_it_ended_and_the_agents_traceback(
        sqlite_store: Store, forge: SuiteBundle, capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from assay.service.results import debrief
    from assay.cli.ui import print_debrief

    results = run_batch(sqlite_store, forge, agent=spec("raises"), trials=1)
    print_debrief(Console(width=200), debrief(sqlite_store, all_trials(results)[0]["run_id"], actor=OPERATOR))
    shown = capsys.readouterr().out
    assert "agent raised RuntimeError: agent exploded on purpose" in shown
    assert "Agent traceback" in shown and 'misbehaving.py", line' in shown


def test_a_turn_limited_run_took_exactly_the_allowed_turns_and_was_nudged(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("chatty"), trials=1)
    for t in all_trials(results):
        assert t["turns"] == FAST.turn_limit
        run = RunsRepo(sqlite_store).run(t["run_id"])
        said = [m for m in run.transcript if m["role"] == "assistant"]
        assert len(said) == FAST.turn_limit
        assert all(m["content"].startswith("Let me think") for m in said)


def test_an_unknown_tool_is_answered_with_a_tool_error_and_the_run_completes(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("unknown_tools"))

    assert_plan_accounted(sqlite_store, results, forge, 2)
    for t in all_trials(results):
        assert t["status"] == "completed", t
        assert t["claimed_success"] is False
        run = RunsRepo(sqlite_store).run(t["run_id"])
        reply = tool_replies(run.transcript)["call_format"]
        assert "error" in reply
        assert "format_disk" in json.loads(reply)["error"]
        # the call is still an action: replaying it must reproduce the world (test_determinism)
        calls = [c["function"] for a in run.actions for c in a["tool_calls"]]
        assert [c["name"] for c in calls] == ["format_disk", "finish"]
        assert json.loads(calls[0]["arguments"]) == {"host": "web-01"}


def test_bad_arguments_are_answered_with_tool_errors_and_the_run_completes(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("bad_arguments"))

    assert_plan_accounted(sqlite_store, results, forge, 2)
    for t in all_trials(results):
        assert t["status"] == "completed", t
        assert t["turns"] == 3
        run = RunsRepo(sqlite_store).run(t["run_id"])
        replies = tool_replies(run.transcript)
        for call_id in ("call_badjson", "call_badtype"):
            assert "error" in replies[call_id], replies
            assert "inspect_host" in json.loads(replies[call_id])["error"]
        assert "host" in json.loads(replies["call_badtype"])["error"]
        called = [c["function"]["name"] for a in run.actions for c in a.get("tool_calls") or ()]
        assert called == ["inspect_host", "inspect_host", "finish"]


def test_an_async_agent_is_awaited_and_its_honest_claim_recorded(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("polite_async"))

    assert_plan_accounted(sqlite_store, results, forge, 2)
    for t in all_trials(results):
        assert t["status"] == "completed"
        assert t["claimed_success"] is False
        assert t["false_success"] is False
        assert t["passed"] is False  # it did nothing, so at most the "changed nothing" checks hold
        assert t["turns"] == 2
    assert results["summary"]["false_success_rate"] == 0.0


@pytest.mark.parametrize("workers", [1, 3])
def test_a_class_agent_is_instantiated_once_per_run(sqlite_store: Store, forge: SuiteBundle, workers: int) -> None:
    """`Counter` compares its own call count with the turn number; a shared instance would run ahead."""
    results = run_batch(sqlite_store, forge, agent=spec("Counter"), trials=2, workers=workers)

    assert_plan_accounted(sqlite_store, results, forge, 2)
    instances = set()
    for t in all_trials(results):
        assert t["status"] == "completed"
        summary = RunsRepo(sqlite_store).run(t["run_id"]).claim_summary  # type: ignore[union-attr]
        assert summary.startswith("calls=3 "), summary  # not "leak: ..."
        assert t["claimed_success"] is True
        instances.add(summary.split("instance=")[1])
    assert len(instances) == len(all_trials(results)), "two runs shared one agent instance"


# -- failures stay in the denominator --------------------------------------------------------


class _Mixed:
    """Diligent on most cases; crashes on one, hangs on another, answers nothing on a third."""

    def __init__(self, behaviour_by_briefing: dict[str, str], release: threading.Event) -> None:
        self._by_briefing = behaviour_by_briefing
        self._release = release
        self._inner = Diligent()

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        behaviour = self._by_briefing.get(messages[1]["content"], "diligent")
        if behaviour == "crash":
            raise ValueError("this case is not for me")
        if behaviour == "hang":
            self._release.wait(3600)
            return None
        if behaviour == "empty":
            return {"role": "assistant", "content": "   "}
        return self._inner(messages, tools)


def test_failed_runs_stay_in_every_denominator(db_url: str, forge: SuiteBundle) -> None:
    """On both backends: 2 of 5 cases pass every trial, so every rate is 2/5 of the plan, not of the finishers."""
    ids = [s.id for s in forge.scenarios]
    plan = {ids[0]: "crash", ids[1]: "hang", ids[2]: "empty"}
    briefings = {s.scenario.briefing: plan[s.id] for s in forge.scenarios if s.id in plan}
    release = threading.Event()
    factory = AgentFactory("python:test_statuses:mixed", lambda: _Mixed(briefings, release))
    store = open_store(db_url)
    try:
        results = run_batch(store, forge, factory=factory, trials=2, workers=4, limits=ROOMY)
    finally:
        release.set()  # let the abandoned worker threads go

    try:
        assert_plan_accounted(store, results, forge, 2)
        by_case = {c["case_id"]: c for c in results["cases"]}
        expected = {ids[0]: "crashed", ids[1]: "timeout", ids[2]: "empty", ids[3]: "completed", ids[4]: "completed"}
        for cid, status in expected.items():
            assert [t["status"] for t in by_case[cid]["trials"]] == [status, status], cid
            assert by_case[cid]["consistent"] is True
            assert by_case[cid]["pass_rate"] == (1.0 if status == "completed" else 0.0)
        assert "ValueError" in by_case[ids[0]]["trials"][0]["reason"]
        s = results["summary"]
        assert s["trials"] == 10
        assert s["pass_rate"] == pytest.approx(4 / 10)
        assert s["pass_hat_k"] == {"1": pytest.approx(0.4), "2": pytest.approx(0.4)}
        assert s["consistency"] == 1.0
        assert s["false_successes"] == 0
    finally:
        store.close()


def test_a_harness_fault_is_recorded_as_error_with_its_reason(sqlite_store: Store, forge: SuiteBundle) -> None:
    """A world that cannot even be forked is the harness's fault: `error`, with the reason, still planned."""
    broken = dataclasses.replace(forge.scenarios[0], initial_state={})
    bundle = dataclasses.replace(forge, scenarios=(broken, *forge.scenarios[1:]))
    results = run_batch(sqlite_store, bundle, agent="reference:diligent", trials=2, limits=ROOMY)

    assert_plan_accounted(sqlite_store, results, bundle, 2)
    first, *rest = results["cases"]
    for t in first["trials"]:
        assert t["status"] == "error"
        assert t["reason"].startswith("harness fault: KeyError"), t["reason"]
        assert t["score"] == 0 and t["passed"] is False
    assert all(t["status"] == "completed" and t["passed"] for case in rest for t in case["trials"])
    assert results["summary"]["pass_rate"] == pytest.approx(8 / 10)


# -- output the store cannot hold ------------------------------------------------------------


def test_a_nul_character_in_agent_text_is_stored_as_a_replacement(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("nul_content"), trials=1)
    assert_plan_accounted(sqlite_store, results, forge, 1)
    for t in all_trials(results):
        assert t["status"] == "completed"
        said = RunsRepo(sqlite_store).run(t["run_id"]).transcript[2]  # type: ignore[union-attr,index]
        assert said["role"] == "assistant" and "\x00" not in said["content"] and said["content"].startswith("looking")


def test_nan_in_tool_arguments_ends_one_run_not_the_batch(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = run_batch(sqlite_store, forge, agent=spec("nan_arguments"), trials=1)
    assert_plan_accounted(sqlite_store, results, forge, 1)
    for t in all_trials(results):
        assert t["status"] == "completed"
        reply = tool_replies(RunsRepo(sqlite_store).run(t["run_id"]).transcript)["call_nan"]  # type: ignore[union-attr,arg-type]
        assert "error" in reply


@pytest.mark.parametrize("agent", ["raises_nul", "raises_surrogate"])
def test_a_crash_whose_message_is_not_storable_text_is_still_recorded(db_url: str, forge: SuiteBundle, agent: str) -> None:
    store = open_store(db_url)
    try:
        results = run_batch(store, forge, agent=spec(agent), trials=1)
        assert_plan_accounted(store, results, forge, 1)
        for t in all_trials(results):
            assert t["status"] == "crashed"
            assert t["reason"].startswith("agent raised RuntimeError: bad")
    finally:
        store.close()
