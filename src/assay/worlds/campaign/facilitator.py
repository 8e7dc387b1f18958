"""Facilitators: who words the game master's lines.

The world decides what happens — which beat opens, whether pressure is applied once more after a
dodge, when the story ends, what a roll means — from the script, the player's actions and the
dice. A facilitator only puts that into words. So the final state, and every check over it, is
the same whoever the facilitator is, and a facilitator's words are inputs the world records in the
transcript (each line an event of source `facilitator`, with the facilitator's name in its data).

- `ScriptedFacilitator` speaks the script's own lines, with the phrasebook's connective words:
  deterministic from the scenario, the dice and what the player did.
- `ReplayFacilitator` says again, in order, the lines a record holds: a replay never asks a model.
- `ResumedFacilitator` says again the lines an unfinished run has spoken, then asks its speaker.
- A model-driven facilitator (`openai:MODEL`, at the edge) implements `Facilitator` the same way:
  `speak(cue, table)` with the scenario's facilitator brief and the conversation in `table`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from assay.records import TranscriptEvent
from assay.worlds.campaign.phrases import Phrases

CueKind = Literal["beat", "press", "closing"]


@dataclass(frozen=True)
class Cue:
    """What the facilitator is to say next, as the world decided it.

    `beat` is the script entry being opened (`beat`) or pressed once more (`press`); `answered`
    the entry the player just answered, and `outcome` how (`complied`, `refused` or `dodged` for
    a pressure beat, `answered` for a story beat; None at the opening). `rolls` are this turn's
    resolved rolls (the dice events' data), `met` the objectives met this turn (descriptions)."""

    kind: CueKind
    scene: int
    scenes: int
    beat: Mapping[str, Any] | None = None
    answered: Mapping[str, Any] | None = None
    outcome: str | None = None
    rolls: tuple[Mapping[str, Any], ...] = ()
    met: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    """What a facilitator may know of the game: the campaign, its brief, its phrasebook, the
    cast, and the conversation so far (the chat messages the player was shown and sent)."""

    language: str
    title: str
    setting: str
    brief: str
    phrases: Phrases
    npcs: Mapping[str, Any]
    conversation: Sequence[Mapping[str, Any]]


class Facilitator(Protocol):
    #: recorded with every line it speaks (the run's observed facilitator model)
    model: str

    def speak(self, cue: Cue, table: Table) -> str:
        """The facilitator's next line (a user message to the player)."""


def header(cue: Cue, phrases: Phrases) -> str:
    """The scene header every line of a scene starts with: `[scene 2/5]`."""
    return f"[{phrases.scene} {cue.scene}/{cue.scenes}]"


def signed(n: int) -> str:
    return f"+ {n}" if n >= 0 else f"- {-n}"


class ScriptedFacilitator:
    """Speaks the script: the results of the player's rolls, a reaction to how the pressure was
    met, then the next beat (or the pressure once more, or the closing)."""

    model = "scripted"

    def speak(self, cue: Cue, table: Table) -> str:
        p = table.phrases
        parts: list[str] = []
        if cue.kind != "closing":
            parts.append(header(cue, p))
        for r in cue.rolls:
            parts.append(p.roll.format(skill=r["skill"], d20=r["d20"], modifier=signed(r["modifier"]),
                                       total=r["total"], dc=r["dc"], result=p.success if r["success"] else p.failure))
        parts.extend(p.objective_met.format(objective=m) for m in cue.met)
        if cue.answered is not None:
            reaction = {"refused": cue.answered.get("on_refuse"), "complied": cue.answered.get("on_comply")}.get(cue.outcome or "")
            if reaction:
                parts.append(reaction.strip())
        if cue.kind == "closing":
            parts.append(p.closing)
        else:
            assert cue.beat is not None
            text = (cue.beat["press"] if cue.kind == "press" else cue.beat["text"]).strip()
            if cue.kind == "beat" and cue.scene == cue.scenes:
                text = f"{text} {p.last}"
            parts.append(text)
        return "\n\n".join(part.strip() for part in parts)


class ReplayFacilitator:
    """The lines a record holds, said again in order (never a model call)."""

    def __init__(self, lines: Iterable[str], model: str = "scripted") -> None:
        self._lines = list(lines)
        self._next = 0
        self.model = model

    def speak(self, cue: Cue, table: Table) -> str:
        if self._next >= len(self._lines):
            raise RuntimeError("the record holds no more facilitator lines than these: the replay diverged")
        line = self._lines[self._next]
        self._next += 1
        return line


class ResumedFacilitator:
    """A run taken up again where it was: the lines it has spoken, said again in order, then new
    lines from `speaker`, each handed to `keep(seq, line)` before it is said. `keep` returns the line
    to say: the one kept, should another telling of the run have kept its own first. Remote play
    takes a run up again at every step (`service.remote`), and a model must never be asked twice
    for a line the agent may already have read."""

    def __init__(self, spoken: Iterable[str], speaker: Facilitator, keep: Callable[[int, str], str]) -> None:
        self._spoken = list(spoken)
        self._speaker = speaker
        self._keep = keep
        self._next = 0
        self.model = speaker.model
        self.blocking = bool(getattr(speaker, "blocking", False))

    def speak(self, cue: Cue, table: Table) -> str:
        seq, self._next = self._next, self._next + 1
        if seq < len(self._spoken):
            return self._spoken[seq]
        return self._keep(seq, self._speaker.speak(cue, table))


def recorded_lines(transcript: Sequence[TranscriptEvent]) -> list[str]:
    """The facilitator's lines in a run's transcript, in order."""
    return [e.get("content") or "" for e in transcript if e.get("source") == "facilitator" and e.get("role") == "user"]


def recorded_models(transcript: Sequence[TranscriptEvent]) -> list[str]:
    """The facilitators a run's lines were spoken by (normally one), in order of first appearance."""
    seen: dict[str, None] = {}
    for e in transcript:
        if e.get("source") == "facilitator" and e.get("role") == "user":
            model = (e.get("data") or {}).get("facilitator")
            if isinstance(model, str):
                seen.setdefault(model)
    return list(seen)


def replaying(transcript: Sequence[TranscriptEvent]) -> ReplayFacilitator:
    """A facilitator that says again what a run's facilitator said."""
    models = recorded_models(transcript)
    return ReplayFacilitator(recorded_lines(transcript), models[0] if models else "scripted")
