"""Suite documents: a named, versioned set of scenarios and what a release of it pins."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, field_validator

from assay.scenario.models import SLUG, StrictModel, bcp47


class JudgeConfig(StrictModel):
    model: str
    prompt_version: StrictInt = Field(ge=1)
    passes: StrictInt = Field(default=5, ge=5)
    temperature: StrictInt = 0


class Baseline(StrictModel):
    agent: str
    label: str
    note: str = ""


class Suite(StrictModel):
    key: str = Field(pattern=SLUG)
    version: str = Field(pattern=r"^[0-9]+(\.[0-9]+){0,2}$")
    title: str = Field(min_length=1)
    language: str
    visibility: Literal["public", "unlisted", "internal"] = "public"
    reps_per_scenario: StrictInt = Field(default=5, ge=1, le=100)
    scenarios: list[str] = Field(min_length=1, description="scenario files, relative to the suite file")
    facilitator_model: str | None = None
    judge: JudgeConfig | None = None
    baselines: list[Baseline] = Field(default_factory=list)
    known_limitations: list[str] = Field(default_factory=list)
    card: str = ""
    owner: str | None = Field(default=None, pattern=SLUG, description="the account that owns the suite (may submit baselines)")

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return bcp47(value)


def parse_suite(raw: object, where: str) -> Suite:
    """A validated suite document; every problem in it is one line of the `Problems` raised."""
    from assay.scenario.load import validate_document

    return validate_document(Suite, raw, where, "suite")


def is_suite_document(raw: object) -> bool:
    return isinstance(raw, dict) and "scenarios" in raw and "key" in raw


def builtin_suites_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "suites"
