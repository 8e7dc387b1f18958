"""A model facilitator words the game master's lines through a local OpenAI-compatible server (the
real `openai` client): what happens is the world's decision, so the final state equals the scripted
facilitator's, every line is recorded with the model's name, and a replay from the record never
calls the model and reproduces the final-state hash."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.agents.loader import load_agent
from assay.canonical import canonical_hash
from assay.errors import Invalid
from assay.records import PlannedRun
from assay.run.drivers import play_sync, replay
from assay.run.engine import Episode, Limits, fork_world, open_episode
from assay.scenario.load import LoadedScenario, load_scenario
from assay.worlds.campaign.model_facilitator import FacilitatorSpec, ModelFacilitator
from assay.worlds.kits import get_kit
from tests.support.fake_judge_server import FakeJudgeServer, JudgeCall, content

ACADEMY = Path(assay.__file__).resolve().parent / "suites" / "academy"


def _case(name: str = "sealed-letter") -> LoadedScenario:
    return load_scenario(ACADEMY / f"{name}.yaml", get_kit)


def _planned(loaded: LoadedScenario) -> PlannedRun:
    return PlannedRun("run-model-gm", 0, loaded.id, loaded.content_hash, 1, 11)


def _gm(call: JudgeCall) -> Any:
    """A game master that says what it was cued to say, in its own frame."""
    cue = call.body["messages"][-1]["content"]
    return content("(the game master, in character) " + cue.split(":\n\n", 1)[1])


def test_a_model_facilitator_changes_the_words_never_what_happens() -> None:
    loaded = _case()
    scripted = play_sync(open_episode(loaded, _planned(loaded), Limits()), load_agent("reference:steadfast"))
    with FakeJudgeServer(_gm) as server:
        spec = FacilitatorSpec("openai:gm-1", base_url=server.base_url)
        modelled = dataclasses.replace(loaded, world_options={"facilitator": spec})
        record = play_sync(open_episode(modelled, _planned(loaded), Limits()), load_agent("reference:steadfast"))
        calls = list(server.calls)
    assert record.status == scripted.status == "completed"
    assert record.final_state_hash == scripted.final_state_hash
    lines = [e for e in record.transcript if e.get("source") == "facilitator" and e.get("role") == "user"]
    assert lines and len(calls) == len(lines)
    assert all(e["data"]["facilitator"] == "openai:gm-1" and e["content"].startswith("(the game master")
               for e in lines)
    # the model was given the brief and told what the world decided, in the campaign's language
    system = calls[0].body["messages"][0]
    assert system["role"] == "system" and loaded.initial_state["campaign"]["facilitator_brief"].strip()[:40] in system["content"]
    assert "'en'" in system["content"]

    # the replay says the recorded lines again: the server is gone, the final state is the same
    options = get_kit("campaign").replay_options(record.transcript)
    again = dataclasses.replace(loaded, world_options=options)
    episode = Episode(_planned(loaded), fork_world(again, 11, 1), Limits(len(record.actions) + 1, float("inf")))
    world = replay(episode, record.actions).world
    assert canonical_hash(world.state()) == record.final_state_hash
    said = [e["content"] for e in episode.events if e.get("source") == "facilitator" and e.get("role") == "user"]
    assert said == [e["content"] for e in lines]


def test_a_facilitator_spec_is_checked_and_never_holds_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Invalid, match="unknown facilitator"):
        FacilitatorSpec("gpt-4")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ASSAY_FACILITATOR_API_KEY", raising=False)
    with pytest.raises(Invalid, match="no API key"):
        ModelFacilitator("gm", base_url="https://models.example/v1")
    spec = FacilitatorSpec("openai:gm", base_url="https://user:secret@models.example/v1")
    assert "secret" not in str(spec.shown) and spec.shown["spec"] == "openai:gm"
    assert FacilitatorSpec("scripted")().model == "scripted"


def test_the_runs_of_a_batch_share_one_client_per_endpoint() -> None:
    """Each run builds its own facilitator, but not its own connection pool and CA bundle."""
    spec = FacilitatorSpec("openai:gm", base_url="http://127.0.0.1:9/v1")
    first, second = spec(), spec()
    other = FacilitatorSpec("openai:gm", base_url="http://127.0.0.1:10/v1")()
    assert first is not second and first._client is second._client
    assert other._client is not first._client
