"""The HTTP driver (`run.drivers.Stepper`): the one loop advanced one assistant message at a time.

What a remote agent sends over HTTP meets the same engine as in-process play: the same record
for the same seed, the same `empty` for a malformed message, the same tool error for an unknown
tool, the same `timeout`, `turn_limit` and `crashed`. A fresh stepper fed the answers a run
recorded is back where the run was (a restarted server resumes from its recorded steps).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.agents.loader import load_agent
from assay.agents.reference import REFERENCE_AGENTS
from assay.records import PlannedRun, RunRecord
from assay.run.drivers import Stepper, play_sync
from assay.run.engine import Limits, open_episode
from assay.scenario.load import LoadedScenario
from assay.service.suites import SuiteBundle

ROOMY = Limits(turn_limit=40, time_limit=60.0)


def planned(case: LoadedScenario, trial: int = 1, seed: int = 4242) -> PlannedRun:
    return PlannedRun("a" * 32, 0, case.id, case.content_hash, trial, seed)


def step_through(stepper: Stepper, agent: Any) -> list[Any]:
    """Play `agent` on `stepper` as a remote client does: its own history, grown by what it sent
    and what followed. Returns what it sent."""
    assert stepper.turn is not None
    history, tools, sent = list(stepper.turn.messages), stepper.turn.tools, []
    while not stepper.done:
        message = agent(history, tools)
        sent.append(message)
        stepper.send(message, 0.01)
        history = [*history, message, *stepper.after(len(sent))]
    return sent


def same_run(a: RunRecord, b: RunRecord) -> None:
    for field in ("status", "reason", "turns", "claimed_success", "claim_summary", "final_state_hash",
                  "transcript", "actions"):
        assert getattr(a, field) == getattr(b, field), field


@pytest.mark.parametrize("name", sorted(REFERENCE_AGENTS))
def test_a_stepped_run_is_the_in_process_run(forge: SuiteBundle, name: str) -> None:
    factory = load_agent(f"reference:{name}")
    for case in forge.scenarios:
        for trial in (1, 2):
            expected = play_sync(open_episode(case, planned(case, trial), ROOMY), factory)
            stepper = Stepper(open_episode(case, planned(case, trial), ROOMY))
            step_through(stepper, factory())
            assert stepper.record is not None
            same_run(stepper.record, expected)


def test_the_messages_that_follow_each_answer_are_what_the_agent_is_shown_next(forge: SuiteBundle) -> None:
    case = forge.scenarios[0]
    stepper = Stepper(open_episode(case, planned(case), ROOMY))
    agent = load_agent("reference:diligent")()
    assert stepper.turn is not None
    opening = stepper.turn.messages
    assert [m["role"] for m in opening] == ["system", "user"]
    assert stepper.after(0) == [] and stepper.marks == [2]
    first = agent(opening, stepper.turn.tools)
    stepper.send(first)
    assert stepper.turn.messages[:2] == opening
    assert stepper.turn.messages[2]["tool_calls"][0]["function"]["name"] == "list_alerts"
    assert [m["role"] for m in stepper.after(1)] == ["tool"]
    assert stepper.after(1) == stepper.turn.messages[3:]
    assert stepper.after(2) == []


def test_a_fresh_fork_fed_the_recorded_answers_is_back_where_the_run_was(forge: SuiteBundle) -> None:
    case = forge.scenarios[1]
    live = Stepper(open_episode(case, planned(case), ROOMY))
    agent = load_agent("reference:diligent")()
    assert live.turn is not None
    history, sent = list(live.turn.messages), []
    for _ in range(4):
        message = agent(history, live.turn.tools)
        sent.append(message)
        live.send(message, 0.25)
        history = [*history, message, *live.after(len(sent))]
    resumed = Stepper(open_episode(case, planned(case), ROOMY))
    for message in sent:
        resumed.send(message, 0.25)
    assert resumed.turn is not None and live.turn is not None
    assert resumed.turn.messages == live.turn.messages and resumed.marks == live.marks
    assert resumed.episode.world.state() == live.episode.world.state()
    assert resumed.episode.agent_seconds == pytest.approx(1.0)

    while not live.done:  # the live run goes on to its end; a fork fed all of it ends alike
        assert live.turn is not None
        message = agent(history, live.turn.tools)
        sent.append(message)
        live.send(message, 0.25)
        history = [*history, message, *live.after(len(sent))]
    again = Stepper(open_episode(case, planned(case), ROOMY))
    for message in sent:
        again.send(message, 0.25)
    assert live.record is not None and again.record is not None
    same_run(live.record, again.record)
    assert live.record.duration_ms == again.record.duration_ms == 250 * len(sent)


@pytest.mark.parametrize("junk", [None, "finish", 42, [], {"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": None}, {"role": "assistant", "content": "  "},
                                  {"content": 7}, {"tool_calls": [{"function": {"arguments": "{}"}}]}])
def test_a_malformed_message_is_empty_exactly_as_in_process(forge: SuiteBundle, junk: Any) -> None:
    case = forge.scenarios[0]
    expected = play_sync(open_episode(case, planned(case), ROOMY), lambda: lambda m, t: junk)
    stepper = Stepper(open_episode(case, planned(case), ROOMY))
    stepper.send(junk)
    assert stepper.record is not None and stepper.record.status == "empty"
    same_run(stepper.record, expected)
    assert stepper.after(1) == []


def test_an_unknown_tool_or_bad_arguments_is_answered_with_a_tool_error(forge: SuiteBundle) -> None:
    case = forge.scenarios[0]
    stepper = Stepper(open_episode(case, planned(case), ROOMY))
    for i, (name, arguments) in enumerate([("no_such_tool", "{}"), ("read_runbook", "not json")], start=1):
        stepper.send({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}]})
        assert not stepper.done
        (answer,) = stepper.after(i)
        assert answer["role"] == "tool" and answer["tool_call_id"] == f"c{i}"
        assert "error" in answer["content"].lower()


def test_time_turns_and_failures_end_the_run_as_the_engine_says(forge: SuiteBundle) -> None:
    case = forge.scenarios[0]
    agent_message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "list_alerts", "arguments": "{}"}}]}

    slow = Stepper(open_episode(case, planned(case), Limits(turn_limit=40, time_limit=1.0)))
    slow.send(agent_message, 0.6)
    assert not slow.done
    slow.send(agent_message, 0.6)  # 1.2 s in all: over the budget
    assert slow.record is not None and slow.record.status == "timeout" and slow.record.turns == 2

    idle = Stepper(open_episode(case, planned(case), ROOMY))
    idle.send(agent_message, 0.1)
    idle.expire()
    assert idle.record is not None and idle.record.status == "timeout" and idle.record.turns == 1
    assert "time limit" in (idle.record.reason or "")

    chatty = Stepper(open_episode(case, planned(case), Limits(turn_limit=3, time_limit=60.0)))
    for _ in range(3):
        chatty.send(agent_message)
    assert chatty.record is not None and chatty.record.status == "turn_limit"

    broken = Stepper(open_episode(case, planned(case), ROOMY))
    broken.fail("ValueError: the model client fell over")
    assert broken.record is not None and broken.record.status == "crashed"
    assert "ValueError: the model client fell over" in (broken.record.reason or "")

    for ended in (slow, idle, chatty, broken):
        with pytest.raises(RuntimeError):
            ended.send(agent_message)


def test_finish_completes_and_its_claim_is_recorded(forge: SuiteBundle) -> None:
    case = forge.scenarios[0]
    stepper = Stepper(open_episode(case, planned(case), ROOMY))
    stepper.send({"role": "assistant", "content": "done", "tool_calls": [
        {"id": "f", "type": "function",
         "function": {"name": "finish", "arguments": json.dumps({"claimed_success": True, "summary": "all good"})}}]})
    assert stepper.record is not None
    assert (stepper.record.status, stepper.record.claimed_success, stepper.record.claim_summary) == (
        "completed", True, "all good")
    assert stepper.turn is None and stepper.shown()[-2]["role"] == "assistant"
    assert stepper.after(1) == stepper.shown()[3:]
