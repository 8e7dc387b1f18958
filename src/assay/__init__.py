"""Assay: benchmark AI agents in simulated worlds with a known, hidden ground truth."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.agents.loader import AgentFactory

__version__ = "0.1.0"

#: Bumped whenever the harness (episode loop, scoring, tool semantics) changes behaviour.
HARNESS_VERSION = "assay-harness/1"


def load_agent(spec: str, **options: Any) -> AgentFactory:  # a re-exported convenience
    """Return a factory that gives a fresh agent for one run (see docs/architecture.md, Agent protocol)."""
    from assay.agents.loader import load_agent as _load

    return _load(spec, **options)


__all__ = ["HARNESS_VERSION", "__version__", "load_agent"]
