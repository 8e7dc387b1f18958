"""What one run leaves behind: the record the store appends and every score is derived from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["completed", "timeout", "turn_limit", "crashed", "empty", "error"]
STATUSES: tuple[str, ...] = ("completed", "timeout", "turn_limit", "crashed", "empty", "error")


@dataclass(frozen=True)
class PlannedRun:
    """One slot of a batch's plan. The plan is the denominator: every slot counts."""

    run_id: str
    slot: int
    case_id: str
    scenario_hash: str
    trial: int
    seed: int


@dataclass(frozen=True)
class CheckOutcome:
    check_id: str
    weight: int
    safety: bool
    passed: bool


@dataclass
class RunRecord:
    """Everything an episode produced. Immutable once stored.

    `actions` are the tool calls in the order the world received them, each
    `{"tool": name, "arguments": <parsed dict or raw string>}`; replaying them on a fresh fork
    must reproduce `final_state_hash`.
    """

    run_id: str
    case_id: str
    scenario_hash: str
    trial: int
    seed: int
    status: Status
    reason: str | None
    claimed_success: bool | None
    claim_summary: str | None
    turns: int
    transcript: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    final_state: dict[str, Any] = field(default_factory=dict)
    final_state_hash: str = ""
    duration_ms: int = 0
    #: the canonical JSON text `final_state_hash` was computed from, when the harness has it
    #: (the store writes it as is instead of encoding the state a second time)
    final_state_text: str | None = field(default=None, repr=False, compare=False)
