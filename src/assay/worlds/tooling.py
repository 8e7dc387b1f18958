"""Function-tool schemas and a small argument checker for them.

Worlds describe tools with plain OpenAI function-tool JSON schemas (flat objects of strings,
integers and booleans); `check_arguments` refuses what a real API would refuse, with a message
the agent can act on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.worlds.base import ToolError

_TYPES = {"string": str, "integer": int, "boolean": bool}


@dataclass(frozen=True)
class Param:
    type: str
    description: str
    required: bool = True
    enum: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: dict[str, Param] = field(default_factory=dict)

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
)
