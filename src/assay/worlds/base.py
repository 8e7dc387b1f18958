"""The World protocol: what a kit gives the harness, and nothing about agents, judges or storage."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from assay.worlds.rng import Rng


class ToolError(Exception):
    """An agent's tool call the world refuses (unknown tool, bad arguments, impossible action).

    The harness answers it with a tool error message, as a real API would; it is not a crash.
    """


class World(Protocol):
    """One fork of a world, private to one run."""

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas the agent may call (the harness adds `finish`)."""

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Apply one tool call and return what the agent sees; raise ToolError to refuse it."""

    def state(self) -> dict[str, Any]:
        """The full state document (JSON values only) that checks are evaluated against."""


class Kit(Protocol):
    """Materialises worlds of one kind from a spec and a seed."""

    name: str

    def parse_world(self, world: dict[str, Any]) -> BaseModel:
        """Validate a document's `world` block (raises pydantic.ValidationError)."""

    def materialise(self, spec: BaseModel, seed: int) -> dict[str, Any]:
        """The initial state, a pure function of (spec, seed)."""

    def fork(self, initial_state: dict[str, Any], rng: Rng) -> World:
        """A private, mutable world starting from `initial_state`; `rng` drives in-run chance."""
