"""The episode engine: one run as a state machine over a private world.

    episode = Episode(planned, world, limits)
    turn = episode.start()                      # Turn(messages, tools): what the agent is asked
    out = episode.step(reply, elapsed=seconds)  # the agent's answer → the next Turn, or Done(record)

The engine is pure apart from the world it owns: it never calls the agent, never sleeps, never
reads a clock. Whoever plays the agent is a *driver* (`run/drivers.py`: in-process sync, asyncio,
replay; the HTTP driver of the service advances one step per request) and reports how long the
agent took; the turn and time budgets are data the engine checks, and cancellation (`fail`) ends
the run as it stands from whichever thread or task notices first.

The agent only ever receives what the world shows it — the kit's system prompt, the briefing, the
tool schemas and the world's answers — never the hidden truth or the checks. Everything the agent
answers is an action the world decides on (tool calls, and plain text too), recorded in order so a
replay on a fresh fork reproduces the final state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.agents.protocol import NotAReply, parse_reply
from assay.canonical import SharedSections, canonical_bytes, sha256_hex
from assay.records import (ChatMessage, PlannedRun, RunRecord, Source, Status, TranscriptEvent, Usage, reported_usage,
                           storable)
from assay.scenario.load import LoadedScenario
from assay.worlds.base import Observation, World
from assay.worlds.kits import get_kit
from assay.worlds.rng import Rng

MAX_REASON = 500


@dataclass(frozen=True)
class Limits:
    """A run's budgets: agent turns, and wall-clock seconds of the agent's own thinking."""

    turn_limit: int = 40
    time_limit: float = 60.0


@dataclass(frozen=True, slots=True)
class Turn:
    """The agent's move: its own copy of the conversation so far, and the tools it may call."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Done:
    record: RunRecord


def fork_world(loaded: LoadedScenario, seed: int, trial: int) -> World:
    """A fresh private world for one run; in-run chance derives from (run seed, case id, trial).
    The scenario's `world_options` (a campaign's facilitator) are built afresh for each fork."""
    kit = get_kit(loaded.scenario.kit)
    options = {name: make() for name, make in loaded.world_options.items()}
    return kit.fork(loaded.initial_state, Rng.of(seed, loaded.id, trial), loaded.scenario.briefing, **options)


def open_episode(loaded: LoadedScenario, planned: PlannedRun, limits: Limits) -> Episode:
    return Episode(planned, fork_world(loaded, planned.seed, planned.trial), limits,
                   encode=state_encoder(loaded.initial_state))


_ENCODERS: OrderedDict[int, tuple[dict[str, Any], SharedSections]] = OrderedDict()
_ENCODERS_MAX = 128
_ENCODERS_GUARD = threading.Lock()


def state_encoder(initial_state: dict[str, Any]) -> Callable[[Any], bytes]:
    """The final-state encoder for the forks of `initial_state` (shared by all of its runs, so
    the sections the runs share with it are encoded once; the bytes are `canonical_bytes`'s)."""
    key = id(initial_state)
    with _ENCODERS_GUARD:
        entry = _ENCODERS.get(key)
        if entry is None or entry[0] is not initial_state:  # the entry keeps its state alive: ids stay unique
            entry = _ENCODERS[key] = (initial_state, SharedSections(initial_state))
            while len(_ENCODERS) > _ENCODERS_MAX:
                _ENCODERS.popitem(last=False)
        else:
            _ENCODERS.move_to_end(key)
        return entry[1]


def _copy(message: ChatMessage) -> dict[str, Any]:
    """An agent's own copy of a message: what it does to it never reaches the record.

    Messages are built by the engine and the world (strings, and tool calls of a known shape), so
    copying the containers is a deep copy."""
    copy: dict[str, Any] = dict(message)
    calls = copy.get("tool_calls")
    if calls is not None:
        copy["tool_calls"] = [{**c, "function": dict(c["function"])} for c in calls]
    return copy


class Episode:
    """A run in progress. Thread-safe where it must be: a watchdog may `fail` it while a driver
    waits on the agent; whatever the driver then reports is ignored."""

    def __init__(self, planned: PlannedRun, world: World, limits: Limits,
                 encode: Callable[[Any], bytes] = canonical_bytes) -> None:
        self.planned = planned
        self._encode = encode
        self.world = world
        self.limits = limits
        self.tools: list[dict[str, Any]] = world.tools()
        #: the transcript: the record keeps these very dicts (typed, never validated again)
        self.events: list[TranscriptEvent] = []
        self.actions: list[ChatMessage] = []
        self.turns = 0
        #: tool calls the agent made (the benchmark's per-step figure)
        self.steps = 0
        #: wall-clock seconds the agent has spent answering, as the drivers reported them
        self.agent_seconds = 0.0
        #: the agent's model usage so far, by (model, self-reported)
        self._usage: dict[tuple[str, bool], Usage] = {}
        self._view: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._done: Done | None = None
        self._started = False

    # -- reading ------------------------------------------------------------------------------
    @property
    def done(self) -> Done | None:
        return self._done

    @property
    def time_left(self) -> float:
        return self.limits.time_limit - self.agent_seconds

    def _turn(self) -> Turn:
        return Turn(list(self._view), self.tools)

    # -- moving -------------------------------------------------------------------------------
    def start(self) -> Turn | Done:
        """Open the run: the world's first words. Done only if the world fails to open."""
        with self._lock:
            if self._done is not None:
                return self._done
            if self._started:
                return self._turn()
            self._started = True
            try:
                self._observe(self.world.reset())
            except Exception as exc:  # noqa: BLE001 - a kit fault, recorded, never raised
                return self._end("error", f"harness fault: {type(exc).__name__}: {exc}")
            return self._turn()

    def step(self, raw: Any, elapsed: float = 0.0) -> Turn | Done:
        """Take what the agent answered after `elapsed` seconds; the next turn, or the end."""
        with self._lock:
            if self._done is not None:
                return self._done  # a watchdog ended the run while the agent thought
            self.turns += 1
            self.agent_seconds += elapsed
            self._count_usage(raw, elapsed)
            if self.agent_seconds > self.limits.time_limit:
                return self._timeout()
            try:
                reply = parse_reply(raw, self.turns)
            except NotAReply as exc:
                return self._end("empty", str(exc))
            action = reply.as_message()
            self.steps += len(reply.tool_calls)
            self._say("agent", action)
            self.actions.append(action)
            try:
                obs = self.world.step(action)
            except Exception as exc:  # noqa: BLE001 - a world fault
                return self._end("error", f"harness fault: {type(exc).__name__}: {exc}")
            self._observe(obs)
            if obs.done:
                claim = obs.claim
                return self._end("completed", None, claim.claimed_success if claim else None,
                                 claim.summary if claim else None)
            if self.turns >= self.limits.turn_limit:
                return self._end("turn_limit", f"no finish within {self.limits.turn_limit} turns")
            return self._turn()

    def fail(self, status: Status, reason: str, *, traceback: str | None = None) -> Done:
        """End the run as it stands (the agent crashed, overstayed, or could not be reached);
        an agent's `traceback` is kept in the transcript as a recorded-only harness event."""
        with self._lock:
            if traceback is not None:
                self.events.append({"source": "harness", "data": {"traceback": traceback}})
            return self._end(status, reason)

    def timeout(self) -> Done:
        with self._lock:
            return self._timeout()

    # -- the books ----------------------------------------------------------------------------
    def _world_usage(self) -> list[tuple[str, Usage]]:
        """What the world's own model calls used (a model facilitator's lines), when it says."""
        try:
            return list(self.world.model_usage())
        except Exception:  # noqa: BLE001 - a kit fault never loses the run
            return []

    def _count_usage(self, raw: Any, elapsed: float) -> None:
        """Add the usage the reply carries: measured (a `Usage` a built-in model agent attached) or
        self-reported (a `usage` object the agent sent, validated; a refused report counts nothing
        and is noted in the transcript as a harness event the agent never sees)."""
        # a plain dict has no such attribute (a `MeasuredReply` is a dict subclass): no failed lookup per step
        found = getattr(raw, "measured_usage", None) if type(raw) is not dict else None
        usage = found if isinstance(found, Usage) else raw.get("usage") if isinstance(raw, dict) else None
        if usage is None:
            return
        if isinstance(usage, Usage):
            measured = [(usage, False)]
        else:
            try:
                measured = [(u, True) for u in reported_usage(usage, round(elapsed * 1000))]
            except ValueError as exc:
                self.events.append({"source": "harness", "data": {"usage_refused": str(exc)[:MAX_REASON]}})
                return
        for entry, self_reported in measured:
            key = (entry.model, self_reported)
            known = self._usage.get(key)
            self._usage[key] = entry if known is None else known.plus(entry)

    def _timeout(self) -> Done:
        return self._end("timeout", f"exceeded the time limit of {self.limits.time_limit:g} s")

    def _say(self, source: Source, message: ChatMessage) -> None:
        self.events.append({"source": source, **message})
        self._view.append(_copy(message))

    def _observe(self, obs: Observation) -> None:
        for event in obs.events:
            if event.message is not None:
                self._view.append(_copy(event.message))
            self.events.append(event.as_dict())

    def _end(self, status: Status, reason: str | None, claim: bool | None = None,
             summary: str | None = None) -> Done:
        if self._done is None:
            state = self.world.state()
            encoded = self._encode(state)
            p = self.planned
            record = RunRecord.model_construct(
                run_id=p.run_id, case_id=p.case_id, scenario_hash=p.scenario_hash, trial=p.trial, seed=p.seed,
                status=status, reason=storable(reason[:MAX_REASON]) if reason else None,
                claimed_success=claim, claim_summary=summary, turns=self.turns,
                transcript=self.events, actions=self.actions,
                # the world is private to this run and no longer changes once the run is done: no copy
                final_state=state, final_state_hash=sha256_hex(encoded),
                duration_ms=int(self.agent_seconds * 1000),
                usage=[*(u.as_row("agent", reported) for (_, reported), u in self._usage.items()),
                       *(u.as_row(role, False) for role, u in self._world_usage())],
            )
            self._done = Done(record.with_final_state_text(encoded.decode("utf-8")))
        return self._done


def error_record(planned: PlannedRun, reason: str, loaded: LoadedScenario | None = None) -> RunRecord:
    """The record of a run the harness could not play at all: `error`, with the world as it began."""
    state: dict[str, Any] = {}
    if loaded is not None:
        try:
            state = fork_world(loaded, planned.seed, planned.trial).state()
        except Exception:  # noqa: BLE001
            state = {}
    encoded = canonical_bytes(state)
    p = planned
    return RunRecord.model_construct(
        run_id=p.run_id, case_id=p.case_id, scenario_hash=p.scenario_hash, trial=p.trial, seed=p.seed,
        status="error", reason=storable(reason[:MAX_REASON]), claimed_success=None, claim_summary=None, turns=0,
        transcript=[], actions=[], final_state=state, final_state_hash=sha256_hex(encoded), duration_ms=0,
    )
