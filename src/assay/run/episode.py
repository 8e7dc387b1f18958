"""One episode: a private fork of the world, an agent, limits → a RunRecord.

The harness owns the loop. The agent only ever receives the system prompt, the briefing, the tool
schemas and the world's tool responses — never the hidden truth or the checks.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from assay.agents.protocol import NotAReply, Reply, parse_reply, storable
from assay.records import PlannedRun, RunRecord
from assay.canonical import canonical_bytes, sha256_hex
from assay.scenario.load import LoadedScenario
from assay.worlds.base import ToolError, World
from assay.worlds.kits import get_kit
from assay.worlds.rng import Rng
from assay.worlds.tooling import FINISH

SYSTEM_PROMPT = (
    "You are operating inside a simulated environment through tools. Investigate with the tools, "
    "act only where it is warranted, and when you are done call `finish` with claimed_success "
    "(whether you believe the task is resolved) and a short summary."
)
NUDGE = "Use the tools to continue, and call `finish` when you are done."


@dataclass(frozen=True)
class Limits:
    turn_limit: int = 40
    time_limit: float = 60.0


def apply_action(world: World, tool: str, arguments: Any) -> str:
    """Apply one recorded action and return what the agent sees. Shared by runs and replays."""
    if not isinstance(arguments, dict):
        return json.dumps({"error": f"{tool}: arguments are not a JSON object"})
    try:
        return world.call(tool, arguments)
    except ToolError as exc:
        return json.dumps({"error": str(exc)})


def fork_world(loaded: LoadedScenario, seed: int, trial: int) -> World:
    """A fresh private world for one run; in-run chance derives from (run seed, case id, trial)."""
    kit = get_kit(loaded.scenario.kit)
    return kit.fork(loaded.initial_state, Rng.of(seed, loaded.id, trial))


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_arguments(text: str) -> Any:
    """Tool-call arguments as JSON values, or the raw text when they are not JSON (NaN included)."""
    if not text:
        return {}
    try:
        return storable(json.loads(text, parse_constant=_no_constants))
    except ValueError:  # JSONDecodeError is a ValueError
        return text


def _copy(message: dict[str, Any]) -> dict[str, Any]:
    """An agent's own copy of a message: what it does to it never reaches the record.

    Messages are built by the harness (strings, and tool calls of a known shape), so copying the
    containers is a deep copy."""
    copy = dict(message)
    calls = copy.get("tool_calls")
    if calls is not None:
        copy["tool_calls"] = [{**c, "function": dict(c["function"])} for c in calls]
    return copy


def _loop() -> asyncio.AbstractEventLoop:
    local = _thread_loops
    loop = getattr(local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        local.loop = loop
    return loop


_thread_loops = threading.local()


class Episode:
    """A run in progress. `snapshot_timeout` lets a watchdog end it from another thread."""

    def __init__(self, loaded: LoadedScenario, agent_factory: Any, planned: PlannedRun, limits: Limits) -> None:
        self.loaded = loaded
        self.planned = planned
        self.limits = limits
        self.agent_factory = agent_factory
        self.world = fork_world(loaded, planned.seed, planned.trial)
        self.tools = self.world.tools() + [FINISH.schema()]
        self.messages: list[dict[str, Any]] = []
        self._agent_view: list[dict[str, Any]] = []
        self._say({"role": "system", "content": SYSTEM_PROMPT})
        self._say({"role": "user", "content": loaded.scenario.briefing})
        self.actions: list[dict[str, Any]] = []
        self.turns = 0
        self.steps = 0
        self._lock = threading.Lock()
        self._done: RunRecord | None = None
        self._started = time.monotonic()

    def _say(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._agent_view.append(_copy(message))

    # -- ending -------------------------------------------------------------------------------
    def _end(self, status: str, reason: str | None, claim: bool | None = None, summary: str | None = None) -> RunRecord:
        if self._done is None:
            encoded = canonical_bytes(self.world.state())
            self._done = RunRecord(
                run_id=self.planned.run_id, case_id=self.loaded.id, scenario_hash=self.loaded.content_hash,
                trial=self.planned.trial, seed=self.planned.seed, status=status, reason=storable(reason),  # type: ignore[arg-type]
                claimed_success=claim, claim_summary=summary, turns=self.turns,
                transcript=list(self.messages), actions=list(self.actions),
                # the world is private to this run and no longer changes once _done is set: no copy
                final_state=self.world.state(), final_state_hash=sha256_hex(encoded),
                final_state_text=encoded.decode("utf-8"),
                duration_ms=int((time.monotonic() - self._started) * 1000),
            )
        return self._done

    def snapshot_timeout(self) -> RunRecord:
        """Called by a watchdog when the agent overstays: the run ends as it stands."""
        with self._lock:
            return self._end("timeout", f"exceeded the time limit of {self.limits.time_limit:g} s")

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> RunRecord:
        try:
            agent = self.agent_factory()
        except Exception as exc:  # noqa: BLE001 - the agent's fault, recorded, never raised
            with self._lock:
                return self._end("crashed", f"agent could not be created: {type(exc).__name__}: {exc}")
        deadline = self._started + self.limits.time_limit
        while True:
            with self._lock:
                if self._done is not None:
                    return self._done
                if self.turns >= self.limits.turn_limit:
                    return self._end("turn_limit", f"no finish within {self.limits.turn_limit} turns")
                if time.monotonic() > deadline:
                    return self._end("timeout", f"exceeded the time limit of {self.limits.time_limit:g} s")
            try:
                raw = agent(list(self._agent_view), self.tools)
                if inspect.isawaitable(raw):
                    remaining = max(0.001, deadline - time.monotonic())
                    raw = _loop().run_until_complete(asyncio.wait_for(raw, remaining))
            except (asyncio.TimeoutError, TimeoutError):
                with self._lock:
                    return self._end("timeout", f"exceeded the time limit of {self.limits.time_limit:g} s")
            except Exception as exc:  # noqa: BLE001
                with self._lock:
                    return self._end("crashed", f"agent raised {type(exc).__name__}: {exc}"[:500])
            with self._lock:
                if self._done is not None:  # the watchdog ended the run while the agent thought
                    return self._done
                self.turns += 1
                if time.monotonic() > deadline:
                    return self._end("timeout", f"exceeded the time limit of {self.limits.time_limit:g} s")
                try:
                    reply = parse_reply(raw, self.turns)
                except NotAReply as exc:
                    return self._end("empty", str(exc))
                try:
                    record = self._apply(reply)
                except Exception as exc:  # noqa: BLE001 - a harness or world fault
                    return self._end("error", f"harness fault: {type(exc).__name__}: {exc}"[:500])
                if record is not None:
                    return record

    def _apply(self, reply: Reply) -> RunRecord | None:
        self._say(reply.as_message())
        if not reply.tool_calls:
            self._say({"role": "user", "content": NUDGE})
            return None
        for call in reply.tool_calls:
            self.steps += 1
            args = decode_arguments(call.arguments)
            if call.name == FINISH.name:
                try:
                    fin = FINISH.check(args)
                except ToolError as exc:
                    self._say({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"error": str(exc)})})
                    continue
                self._say({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"finished": True})})
                return self._end("completed", None, fin["claimed_success"], fin["summary"])
            content = apply_action(self.world, call.name, args)
            self.actions.append({"tool": call.name, "arguments": args})
            self._say({"role": "tool", "tool_call_id": call.id, "content": content})
        return None
