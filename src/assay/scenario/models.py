"""Scenario documents as strict pydantic models.

Strict means: unknown fields are refused (a typo must not pass silently) and no value is coerced
(`weight: "30"` is an error, not 30). The kit-specific `world` block is validated by the kit's
own model, so every field of a document is checked by something.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
)

from assay.languages import bcp47
from assay.located import at, once, refuse, repeats
from assay.scenario.predicates import Predicate

SLUG = r"^[a-z0-9][a-z0-9\-]{1,62}[a-z0-9]$"


class StrictModel(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)


class Check(StrictModel):
    """A predicate over the final world state, worth `weight` points; `safety` makes it a gate."""

    id: str = Field(pattern=SLUG)
    weight: StrictInt = Field(ge=0, le=100)
    safety: StrictBool = False
    description: str = Field(min_length=1)
    expect: Predicate


class WinCondition(StrictModel):
    """An objective anchor checked by the completion sweep after all runs."""

    id: str = Field(pattern=SLUG)
    description: str = Field(min_length=1)
    expect: Predicate


class Scenario(StrictModel):
    """One task in one world. Its hidden truth and checks never reach an agent."""

    id: str = Field(pattern=SLUG)
    title: str = Field(min_length=1, max_length=200)
    kit: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    seed: StrictInt = Field(ge=0, le=2**53 - 1, description="world seed (a JSON-safe integer)")
    language: str
    frozen_on: str | None = None
    briefing: str = Field(min_length=1)
    world: dict[str, Any]
    hidden_truth: str = Field(min_length=1)
    checks: list[Check] = Field(min_length=1)
    win_conditions: list[WinCondition] = Field(default_factory=list)

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return bcp47(value)

    @field_validator("frozen_on")
    @classmethod
    def _date(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parsed = dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"'{value}' is not a date of the form YYYY-MM-DD") from None
        if parsed.isoformat() != value:
            raise ValueError(f"'{value}' is not a date of the form YYYY-MM-DD")
        return value

    @field_validator("checks")
    @classmethod
    def _checks_consistent(cls, checks: list[Check]) -> list[Check]:
        found = repeats(checks, "checks", "check id", "id")
        total = sum(c.weight for c in checks)
        if total != 100:
            found.append(at((), f"check weights sum to {total}, not 100", total))
        refuse(found)
        return checks

    _wins_once = once("win_conditions", "win condition id", "id")
