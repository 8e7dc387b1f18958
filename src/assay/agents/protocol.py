"""The agent protocol: chat-completions messages in, one assistant message out.

An agent is a callable `(messages, tools) -> message`, sync or async. This module reads what an
agent answered, tolerating what real APIs send (extra keys, objects with attributes) and
classifying what is not an answer at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.records import ChatMessage, storable

Agent = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]
AgentFactory = Callable[[], Agent]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the agent sent it


@dataclass(frozen=True)
class Reply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]

    def as_message(self) -> ChatMessage:
        """The assistant message as it goes into the transcript (OpenAI shape)."""
        msg: ChatMessage = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg


class NotAReply(Exception):
    """The agent returned nothing usable: the run ends as `empty`."""


class Unreachable(Exception):
    """The agent's endpoint could not be reached after its client's retries.

    Not the agent's failure but the harness's: the run is recorded as `error` with this reason,
    never as the agent's `crash`. The message is the whole reason, one line naming the endpoint
    and the cause: `agent endpoint URL unreachable: connection refused` (`endpoints.unreachable`)."""


def unreachable_reason(reason: str | None) -> bool:
    """Whether a run's recorded reason says its agent's endpoint could not be reached."""
    return reason is not None and reason.startswith("agent endpoint ") and " unreachable: " in reason


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def parse_reply(raw: Any, turn: int) -> Reply:
    """Read an assistant message; raise NotAReply for anything that is not one or says nothing."""
    if raw is None or isinstance(raw, (str, bytes, int, float, list, tuple)):
        raise NotAReply(f"agent returned {type(raw).__name__}, not an assistant message")
    role = _get(raw, "role")
    if role not in (None, "assistant"):
        raise NotAReply(f"agent returned a message with role {role!r}")
    content = _get(raw, "content")
    if content is not None and not isinstance(content, str):
        raise NotAReply("assistant content must be a string or null")
    calls: list[ToolCall] = []
    for i, call in enumerate(_get(raw, "tool_calls") or []):
        fn = _get(call, "function")
        name = _get(fn, "name") if fn is not None else None
        args = _get(fn, "arguments") if fn is not None else None
        if not isinstance(name, str):
            raise NotAReply(f"tool call {i} has no function name")
        if isinstance(args, dict):  # lenient: some agents hand back parsed arguments
            import json

            args = json.dumps(args)
        calls.append(ToolCall(storable(str(_get(call, "id") or f"call_{turn}_{i}")), storable(name),
                              storable(args) if isinstance(args, str) else ""))
    if not calls and not (content and content.strip()):
        raise NotAReply("assistant message has no content and no tool calls")
    return Reply(storable(content), tuple(calls))
