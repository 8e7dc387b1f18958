"""The World protocol: what a kit gives the engine, and nothing about agents, judges or storage.

A world answers with observations, in the manner of τ-bench's environments: `reset()` opens the
run, and `step(action)` takes the agent's whole assistant message (its text and its tool calls)
and says what follows — tool results, a facilitator's words, a die roll, or the end. The world
decides what an action means; the engine only keeps the books (turns, time, the record).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from pydantic import BaseModel

from assay.records import ChatMessage, TranscriptEvent
from assay.worlds.rng import Rng

if TYPE_CHECKING:
    from assay.records import Usage


class ToolError(Exception):
    """An agent's tool call the world refuses (unknown tool, bad arguments, impossible action).

    The world answers it with a tool error message, as a real API would; it is not a crash.
    """


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in the run. `message` (an OpenAI chat message) is shown to the
    agent; `data` is recorded and never shown (a die roll, a facilitator's private note)."""

    source: str  # one of assay.records.SOURCES, but "agent"
    message: ChatMessage | None = None
    data: dict[str, Any] | None = None

    def as_dict(self) -> TranscriptEvent:
        """The transcript entry: the source, the message's keys in the message's order, the data."""
        out: dict[str, Any] = {"source": self.source}
        if self.message is not None:
            out.update(self.message)
        if self.data is not None:
            out["data"] = self.data
        return cast(TranscriptEvent, out)


@dataclass(frozen=True, slots=True)
class Claim:
    """What the agent said when it ended the run: did it succeed, and what did it do."""

    claimed_success: bool
    summary: str


@dataclass(frozen=True, slots=True)
class Observation:
    """What the world answers: the events that followed, and whether the run is over.

    `done` with a `claim` is the agent's own ending (the run completed); `done` without one is
    the world ending the run (the campaign is over, the scene is closed), also completed."""

    events: Sequence[Event] = ()
    done: bool = False
    claim: Claim | None = None

    @property
    def messages(self) -> list[ChatMessage]:
        """The chat messages the agent is shown next."""
        return [e.message for e in self.events if e.message is not None]


class World(Protocol):
    """One fork of a world, private to one run.

    `blocking`: a world whose `reset` or `step` may block on I/O (a campaign whose facilitator is
    a model behind an HTTP endpoint) says True, and an async driver then calls them on a worker
    thread rather than on its event loop; False (`WorldDefaults`) is stepped in place. What a step
    does is the same either way."""

    blocking: bool

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas the agent may call (`finish` among them)."""

    def reset(self) -> Observation:
        """The opening of the run: the system prompt and the briefing, as the kit words them."""

    def step(self, action: ChatMessage) -> Observation:
        """Answer one assistant message (`content` and `tool_calls`, OpenAI shape, arguments as
        the agent's raw text). Never raises for anything the agent sent: refusals are tool errors."""

    def state(self) -> dict[str, Any]:
        """The full state document (JSON values only) that checks are evaluated against."""

    def model_usage(self) -> list[tuple[str, Usage]]:
        """What the world's own model calls used so far, by role (a model facilitator's lines);
        default none."""


class Kit(Protocol):
    """Materialises worlds of one kind from a spec and a seed, and says how to read its runs.

    Every hook is declared here; a kit inherits the defaults of those it does not need from
    `KitDefaults`. A kit whose worlds someone words (the campaign's facilitator) says `worded =
    True` and gives `fork`'s extra options: `run_options(facilitator)` for a batch's runs,
    `replay_options(transcript)` for a replay of a record, and `resume_options(facilitator, spoken,
    keep)` for remote play taking an unfinished run up again (each None where nobody words)."""

    name: str
    #: one line saying what the kit's worlds are (`assay kit` lists it)
    summary: str
    #: the model of a scenario's `world` block (`parse_world` validates with it; an unknown field is
    #: told the allowed ones)
    world_model: type[BaseModel]
    #: the typed model of the state `materialise` builds and the world mutates: the contract checks
    #: are validated against (`scenario.shape`) and the authoring reference shows (`assay kit NAME`)
    state_model: type[BaseModel]
    #: every tool its worlds offer (`tooling.ToolSpec`, `finish` included), each with its `effect`
    tools: Sequence[Any]
    #: what the state reference says of the kit besides its fields and tools (one sentence each)
    notes: Sequence[str]

    def parse_world(self, world: dict[str, Any]) -> BaseModel:
        """Validate a document's `world` block (raises pydantic.ValidationError)."""

    def materialise(self, spec: BaseModel, seed: int) -> dict[str, Any]:
        """The initial state, a pure function of (spec, seed)."""

    def fork(self, initial_state: dict[str, Any], rng: Rng, briefing: str) -> World:
        """A private, mutable world starting from `initial_state`; `rng` drives in-run chance."""

    def participation(self, transcript: list[TranscriptEvent], actions: list[ChatMessage]) -> tuple[int, int]:
        """(player messages, actions) of a finished run, for the participation gate."""

    #: the least (player messages, actions per message) a run must show, whatever the platform's
    #: floor says (a platform floor set higher wins); default (0, 0.0)
    participation_floor: tuple[int, float]
    #: whether someone (a facilitator) words the kit's worlds; default False
    worded: bool

    def run_options(self, facilitator: Mapping[str, Any]) -> dict[str, Any] | None:
        """`fork`'s options for a batch's runs worded by `facilitator`; default None."""

    def replay_options(self, transcript: list[TranscriptEvent]) -> dict[str, Any] | None:
        """`fork`'s options to replay a record, its recorded words said again; default None."""

    def resume_options(self, facilitator: Mapping[str, Any], spoken: list[str],
                       keep: Callable[[int, str], str]) -> dict[str, Any] | None:
        """`fork`'s options for remote play taking an unfinished run up again; default None."""

    def observed_facilitators(self, transcript: list[TranscriptEvent]) -> list[str]:
        """Who actually spoke a run's lines, as recorded; default none."""


class KitDefaults:
    """The defaults of `Kit`'s hooks, for a kit whose worlds nobody words."""

    participation_floor: tuple[int, float] = (0, 0.0)
    worded: bool = False

    def run_options(self, facilitator: Mapping[str, Any]) -> dict[str, Any] | None:
        return None

    def replay_options(self, transcript: list[TranscriptEvent]) -> dict[str, Any] | None:
        return None

    def resume_options(self, facilitator: Mapping[str, Any], spoken: list[str],
                       keep: Callable[[int, str], str]) -> dict[str, Any] | None:
        return None

    def observed_facilitators(self, transcript: list[TranscriptEvent]) -> list[str]:
        return []


class WorldDefaults:
    """The defaults of `World`'s attributes: a world stepped in place."""

    blocking: bool = False

    def model_usage(self) -> list[tuple[str, Usage]]:
        return []


def opening(system_prompt: str, briefing: str) -> Observation:
    """The usual `reset()`: the kit's system prompt, then the scenario's briefing."""
    return Observation((Event("harness", {"role": "system", "content": system_prompt}),
                        Event("harness", {"role": "user", "content": briefing})))
