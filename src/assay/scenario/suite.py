"""Suite documents: a named, versioned set of scenarios and what a release of it pins."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from assay.errors import BadInput
from assay.scenario.models import SLUG, StrictModel, bcp47
from assay.scenario.rubric import TRAIT_KEY


class JudgeConfig(StrictModel):
    """The judge a release pins: `rules` (deterministic, one pass) or a model (`openai:MODEL`; a
    bare name means `openai:NAME`) at temperature 0 over at least 5 passes."""

    model: str = Field(min_length=1)
    prompt_version: StrictInt = Field(default=1, ge=1)
    passes: StrictInt = Field(default=5, ge=1)
    temperature: StrictInt = 0

    @model_validator(mode="after")
    def _passes(self) -> JudgeConfig:
        if self.model == "rules":
            # one deterministic evaluation is the rules judge's whole judgement
            object.__setattr__(self, "passes", 1)
        elif self.passes < 5:
            raise ValueError(f"a model judge makes at least 5 passes per run; {self.passes} is too few")
        return self

    @property
    def spec(self) -> str:
        """The judge spec this names (`rules` or `openai:MODEL`)."""
        return self.model if self.model == "rules" or ":" in self.model else f"openai:{self.model}"


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
    judge: JudgeConfig | None = Field(default=None, description="the judge of the suite's trait rubric (default rules)")
    rubric: str | None = Field(default=None, description="the trait rubric file, relative to the suite file")
    panel_categories: dict[str, str] | None = Field(
        default=None, description="trait key → the human panel's category (slug) it corresponds to, for "
        "`assay agreement`; only the traits named here are compared with the panel")
    baselines: list[Baseline] = Field(default_factory=list)
    known_limitations: list[str] = Field(default_factory=list)
    card: str = ""
    owner: str | None = Field(default=None, pattern=SLUG, description="the account that owns the suite (may submit baselines)")

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return bcp47(value)

    @field_validator("panel_categories")
    @classmethod
    def _panel_categories(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("panel_categories maps at least one trait (leave it out to map none)")
        for trait, category in value.items():
            if not re.match(TRAIT_KEY, trait):
                raise ValueError(f"'{trait}' is not a trait key")
            if not isinstance(category, str) or not re.match(SLUG, category):
                raise ValueError(f"'{category}' is not a panel category slug")
        return value


def parse_suite(raw: object, where: str) -> Suite:
    """A validated suite document; every problem in it is one line of the `Problems` raised."""
    from assay.scenario.load import validate_document

    return validate_document(Suite, raw, where, "suite")


def is_suite_document(raw: object) -> bool:
    return isinstance(raw, dict) and "scenarios" in raw and "key" in raw


def builtin_suites_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "suites"


def inside_suite(directory: Path, name: str, what: str, where: str) -> Path:
    """The file `name` (as a suite lists it) resolved inside the suite's `directory`, symlinks
    followed; an absolute path, a `..` that climbs out, or a symlink that leads out is refused in
    one line naming the file (`what`: "scenario file", "rubric file"; `where`: the suite file), so
    a suite can only ever read what sits in its own directory."""
    root = directory.resolve()
    if Path(name).is_absolute() or name.startswith("~"):
        raise BadInput(f"{what} '{name}' is an absolute path; a suite lists files relative to its own "
                       "directory", where)
    target = (root / name).resolve()
    if not target.is_relative_to(root):
        raise BadInput(f"{what} '{name}' resolves outside the suite's directory ({root}); a suite reads "
                       "only files inside it (no '..' out, no symlink out)", where)
    return target
