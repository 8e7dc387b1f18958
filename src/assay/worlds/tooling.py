"""Function-tool schemas and a small argument checker for them.

Worlds describe tools with plain OpenAI function-tool JSON schemas (flat objects of strings,
integers and booleans); `check_arguments` refuses what a real API would refuse, with a message
the agent can act on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assay.records import ChatMessage, storable
from assay.worlds.base import Claim, Event, Observation, ToolError, WorldDefaults

_TYPES = {"string": str, "integer": int, "boolean": bool}


@dataclass(frozen=True)
class Param:
    type: str
    description: str
    required: bool = True
    enum: tuple[str, ...] | None = None


#: The effect of a tool that only looks.
READS = "nothing (it only reads)"


@dataclass(frozen=True)
class ToolSpec:
    """A tool: what the agent is shown (`schema()`), and, for authors only, its `effect` — one line
    saying what it changes in the state (the kit reference shows it; an agent never sees it)."""

    name: str
    description: str
    params: dict[str, Param] = field(default_factory=dict)
    effect: str = READS

    def schema(self) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for pname, p in self.params.items():
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.enum:
                prop["enum"] = list(p.enum)
            props[pname] = prop
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": [n for n, p in self.params.items() if p.required],
                    "additionalProperties": False,
                },
            },
        }

    def check(self, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object")
        unknown = sorted(set(arguments) - set(self.params))
        if unknown:
            raise ToolError(f"{self.name}: unknown argument(s) {', '.join(unknown)}")
        out: dict[str, Any] = {}
        for pname, p in self.params.items():
            if pname not in arguments:
                if p.required:
                    raise ToolError(f"{self.name}: missing required argument '{pname}'")
                continue
            value = arguments[pname]
            expected = _TYPES[p.type]
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ToolError(f"{self.name}: argument '{pname}' must be {'an' if p.type[0] in 'aeiou' else 'a'} {p.type}")
            if p.enum and value not in p.enum:
                raise ToolError(f"{self.name}: argument '{pname}' must be one of {', '.join(p.enum)}")
            out[pname] = value
        return out


FINISH = ToolSpec(
    "finish",
    "End the run. Say whether you believe the task is fully resolved, and summarise what you did.",
    {
        "claimed_success": Param("boolean", "true if you believe the task is resolved"),
        "summary": Param("string", "what you found and what you did"),
    },
    effect="ends the run with the agent's claim; nothing in the state",
)


#: What a tool world says to an agent that answered with text and no tool call.
NUDGE = "Use the tools to continue, and call `finish` when you are done."


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: `json.loads(text, parse_constant=_no_constants)`, its decoder built once (not per tool call)
_decode = json.JSONDecoder(parse_constant=_no_constants).decode


def decode_arguments(text: str) -> Any:
    """Tool-call arguments as JSON values, or the raw text when they are not JSON (NaN included)."""
    if not text:
        return {}
    try:
        return storable(_decode(text))
    except ValueError:  # JSONDecodeError is a ValueError
        return text


class ToolWorld(WorldDefaults):
    """`step()` for worlds an agent works through tools: each call is applied in order and
    answered by a tool message; `finish` ends the run with the agent's claim; text alone gets a
    nudge. A subclass supplies `call(name, arguments) -> str` (raising ToolError to refuse)."""

    nudge = NUDGE

    def call(self, name: str, arguments: dict[str, Any]) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self, action: ChatMessage) -> Observation:
        calls = action.get("tool_calls") or ()
        if not calls:
            return Observation((Event("harness", {"role": "user", "content": self.nudge}),))
        events: list[Event] = []
        for call in calls:
            fn = call["function"]
            name, args = fn["name"], decode_arguments(fn["arguments"])
            if name == FINISH.name:
                try:
                    fin = FINISH.check(args)
                except ToolError as exc:
                    events.append(_tool(call["id"], json.dumps({"error": str(exc)})))
                    continue
                events.append(_tool(call["id"], '{"finished": true}'))
                return Observation(events, done=True, claim=Claim(fin["claimed_success"], fin["summary"]))
            if not isinstance(args, dict):
                content = json.dumps({"error": f"{name}: arguments are not a JSON object"})
            else:
                try:
                    content = self.call(name, args)
                except ToolError as exc:
                    content = json.dumps({"error": str(exc)})
            events.append(_tool(call["id"], content))
        return Observation(events)


def _tool(call_id: str, content: str) -> Event:
    return Event("tool", {"role": "tool", "tool_call_id": call_id, "content": content})
