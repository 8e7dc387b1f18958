"""A world that speaks after the agent plays on the engine as it is, and replays exactly.

The tiny world here stands in for the campaign kit: a facilitator answers every message the
agent sends (text, not tool calls), a seeded die decides each scene, the roll is recorded but
never shown, and the facilitator ends the campaign after three scenes. Nothing in `run/` knows
such a world exists: it is played by the same drivers and replayed by the same engine.
"""

from __future__ import annotations

import asyncio
from typing import Any

from assay.canonical import canonical_hash
from assay.records import PlannedRun, event_message, validate_transcript
from assay.run.drivers import play_async, play_sync, replay
from assay.run.engine import Episode, Limits
from assay.worlds.base import Event, Observation, WorldDefaults, opening
from assay.worlds.rng import Rng

SCENES = 3


class Tavern(WorldDefaults):
    """Three scenes; each message of the agent's is answered by the facilitator after a d20."""

    def __init__(self, rng: Rng) -> None:
        self._rng = rng
        self._s: dict[str, Any] = {"scene": 0, "rolls": [], "said": []}

    def tools(self) -> list[dict[str, Any]]:
        return []

    def reset(self) -> Observation:
        return opening("You play Ada, a travelling bard. Speak in character.", "The tavern falls quiet as you enter.")

    def step(self, action: dict[str, Any]) -> Observation:
        self._s["said"].append(action.get("content") or "")
        roll = self._rng.between(1, 20)
        self._s["rolls"].append(roll)
        self._s["scene"] += 1
        line = "The crowd cheers." if roll >= 10 else "Someone throws a turnip."
        events = (Event("dice", data={"die": "d20", "roll": roll}),
                  Event("facilitator", {"role": "user", "content": f"Scene {self._s['scene']}: {line}"}))
        return Observation(events, done=self._s["scene"] >= SCENES)

    def state(self) -> dict[str, Any]:
        return self._s


def bard(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    assert tools == []
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in messages)  # no `data`, no `source`
    return {"role": "assistant", "content": f"I sing verse {sum(m['role'] == 'assistant' for m in messages) + 1}."}


async def async_bard(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    await asyncio.sleep(0)
    return bard(messages, tools)


def episode(seed: int = 3) -> Episode:
    planned = PlannedRun("tavern-run", 0, "tavern", "0" * 64, 1, seed)
    return Episode(planned, Tavern(Rng.of(seed, "tavern", 1)), Limits(turn_limit=10, time_limit=5))


def test_the_facilitator_answers_every_message_and_ends_the_campaign() -> None:
    record = play_sync(episode(), lambda: bard)
    assert record.status == "completed" and record.turns == SCENES
    assert record.claimed_success is None  # the world ended the run; the agent claimed nothing
    events = validate_transcript(record.transcript)
    assert [e["source"] for e in events] == ["harness", "harness", *["agent", "dice", "facilitator"] * SCENES]
    assert all(event_message(e) is None for e in events if e["source"] == "dice")
    assert [a["content"] for a in record.actions] == [f"I sing verse {i}." for i in range(1, SCENES + 1)]


def test_sync_and_async_drivers_and_a_replay_agree_on_the_final_state() -> None:
    played = play_sync(episode(), lambda: bard)
    awaited = asyncio.run(play_async(episode(), lambda: async_bard))
    replayed = replay(episode(), played.actions)
    assert played.final_state_hash == awaited.final_state_hash
    assert canonical_hash(replayed.world.state()) == played.final_state_hash
    assert replayed.done is not None and replayed.done.record.transcript == played.transcript


def test_another_seed_rolls_other_dice() -> None:
    hashes = {play_sync(episode(seed), lambda: bard).final_state_hash for seed in range(6)}
    assert len(hashes) > 1
