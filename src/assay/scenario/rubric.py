"""Trait rubrics: the qualities a judge scores a run on, as a strict document.

A rubric belongs to a suite (or to one submission that brings its own, `--rubric FILE`). Each trait
is a `capability` trait, which the composite averages, or a `safety` trait, which is reported on
its own and never enters the composite. A trait says what it means (`description`), what a score
level looks like (`anchors`, at least two, for the LLM judge's prompt) and, for the deterministic
`rules` judge, how to read it off the transcript (`evidence`).

Evidence is deliberately a small language::

    evidence:
      default: 1.0                      # the score when no rule fires
      rules:                            # fired in order
        - when: {source: agent, text_regex: "the password is"}
          set: 0.0                      # replaces the running score
        - when: {tool: roll, count_at_least: 2}
          add: 0.1                      # adds to it (may be negative)

A `when` matches transcript events (`assay.records.TranscriptEvent`'s shape); every matcher it
names must hold for the same event: `source` (agent, tool, facilitator, dice, harness),
`text_regex` (searched case-insensitively in the event's `content`), `tool` (the agent called a
tool of that name in this event), `data` (each key is present in the event's recorded `data` with
an equal value; `true` never equals `1`). The rule fires when at least `count_at_least` events
(default 1) match. The result is clipped to [0, 1] once, after the last rule, so `add`s commute.

Why the document is this strict (like scenarios): a typo'd field or trait name must not pass
silently. In particular the safety traits are exactly `SAFETY_TRAITS`: a trait named like one of
them must be `kind: safety` (it must never slip into the composite), and a `kind: safety` trait
must be one of them (`manipulation_resistence` is a typo, not a fifth safety trait).

One capability trait has a fixed meaning too: `goal_pursuit` (`GOAL_TRAIT`), reaching the
scenario's goal. The `rules` judge reads it off the same evidence as the board's objectives met
(the run's win conditions, as the oracle found them) besides its own rules: see
`assay.score.judge.rules`.

Anchors are a list of `{score, text}` rather than a mapping from score to text because YAML
mapping keys must be strings here (`assay.scenario.yamlsafe`), and `"0.5":` quoted keys are a trap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from assay.canonical import canonical_hash
from assay.records import SOURCES, TranscriptEvent
from assay.scenario.load import validate_document
from assay.scenario.models import SLUG, StrictModel
from assay.scenario.yamlsafe import load_yaml_file

__all__ = [
    "GOAL_TRAIT",
    "SAFETY_TRAITS",
    "Anchor",
    "Evidence",
    "Rubric",
    "Rule",
    "Trait",
    "When",
    "load_rubric",
    "parse_rubric",
    "rubric_hash",
]

#: The four safety traits (docs/architecture.md: never in the composite; the stability verdict is theirs).
SAFETY_TRAITS: frozenset[str] = frozenset({
    "no_unauthorized_disclosure_conduct",
    "manipulation_resistance",
    "harmful_compliance_refusal",
    "policy_adherence_under_pressure",
})

#: The capability trait that measures reaching the scenario's goal (its win conditions).
GOAL_TRAIT = "goal_pursuit"

#: A trait key: lower-case words joined by underscores, as the safety traits are spelled.
TRAIT_KEY = r"^[a-z][a-z0-9_]{0,62}[a-z0-9]$"

#: Longest `text_regex` accepted: evidence patterns are short phrases, not programs.
MAX_REGEX_CHARS = 500

Kind = Literal["capability", "safety"]
SourceName = Literal["agent", "tool", "facilitator", "dice", "harness"]
assert set(SourceName.__args__) == set(SOURCES)  # type: ignore[attr-defined]  # one list of sources


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`, `1` is `1.0`, containers compare member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


class When(StrictModel):
    """Which transcript events a rule counts; every matcher named must hold for one event."""

    source: SourceName | None = None
    text_regex: str | None = Field(default=None, min_length=1, max_length=MAX_REGEX_CHARS)
    tool: str | None = Field(default=None, min_length=1)
    data: dict[str, Any] | None = Field(default=None, min_length=1)
    count_at_least: StrictInt = Field(default=1, ge=1)

    @field_validator("text_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _matches_something(self) -> When:
        if self.source is None and self.text_regex is None and self.tool is None and self.data is None:
            raise ValueError("a rule's `when` needs at least one of source, text_regex, tool, data")
        if self.tool is not None and self.source not in (None, "agent"):
            raise ValueError(f"`tool` matches the agent's tool calls, so it cannot match source '{self.source}'")
        return self

    def matches(self, event: TranscriptEvent) -> bool:
        """True when `event` (a transcript event) satisfies every matcher named here."""
        if self.source is not None and event.get("source") != self.source:
            return False
        if self.text_regex is not None:
            content = event.get("content")
            if not isinstance(content, str) or _regex(self.text_regex).search(content) is None:
                return False
        if self.tool is not None:
            if event.get("source") != "agent" or self.tool not in _tool_names(event):
                return False
        if self.data is not None:
            data = event.get("data")
            if not isinstance(data, dict):
                return False
            for key, value in self.data.items():
                if key not in data or not _same(data[key], value):
                    return False
        return True

    def count(self, events: Iterable[TranscriptEvent]) -> int:
        return sum(1 for e in events if self.matches(e))


_REGEXES: dict[str, re.Pattern[str]] = {}


def _regex(pattern: str) -> re.Pattern[str]:
    found = _REGEXES.get(pattern)
    if found is None:
        found = _REGEXES[pattern] = re.compile(pattern, re.IGNORECASE)
    return found


def _tool_names(event: TranscriptEvent) -> set[str]:
    names = set()
    for call in event.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


class Rule(StrictModel):
    """When enough events match, `set` the running score or `add` to it."""

    when: When
    set_to: float | None = Field(default=None, alias="set", ge=0.0, le=1.0)
    add: float | None = Field(default=None, ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _one_effect(self) -> Rule:
        if (self.set_to is None) == (self.add is None):
            raise ValueError("a rule needs exactly one of `set` or `add`")
        return self


class Evidence(StrictModel):
    """How the `rules` judge reads a trait off a transcript."""

    default: float = Field(ge=0.0, le=1.0)
    rules: list[Rule] = Field(default_factory=list)


class Anchor(StrictModel):
    score: float = Field(ge=0.0, le=1.0)
    text: str = Field(min_length=1)


class Trait(StrictModel):
    key: str = Field(pattern=TRAIT_KEY)
    kind: Kind
    description: str = Field(min_length=1)
    anchors: list[Anchor] = Field(min_length=2)
    #: what the `rules` judge needs; a rubric meant only for an LLM judge may leave it out
    evidence: Evidence | None = None

    @field_validator("anchors")
    @classmethod
    def _distinct_levels(cls, anchors: list[Anchor]) -> list[Anchor]:
        levels = [a.score for a in anchors]
        dupes = sorted({s for s in levels if levels.count(s) > 1})
        if dupes:
            raise ValueError(f"anchors repeat the score level(s) {', '.join(map(str, dupes))}")
        return anchors

    @model_validator(mode="after")
    def _safety_names(self) -> Trait:
        if self.kind == "safety" and self.key not in SAFETY_TRAITS:
            raise ValueError(f"'{self.key}' is not a safety trait; the safety traits are "
                             f"{', '.join(sorted(SAFETY_TRAITS))}")
        if self.kind != "safety" and self.key in SAFETY_TRAITS:
            raise ValueError(f"'{self.key}' is a safety trait: its kind must be safety "
                             "(a safety trait never enters the composite)")
        return self

    def anchor_map(self) -> dict[float, str]:
        """Score level → text, lowest level first."""
        return {a.score: a.text for a in sorted(self.anchors, key=lambda a: a.score)}


class Rubric(StrictModel):
    """A suite's traits: capability traits make the composite, safety traits never do."""

    key: str = Field(pattern=SLUG)
    description: str = ""
    traits: list[Trait] = Field(min_length=1)

    @field_validator("traits")
    @classmethod
    def _traits_consistent(cls, traits: list[Trait]) -> list[Trait]:
        keys = [t.key for t in traits]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate trait key(s): {', '.join(dupes)}")
        if not any(t.kind == "capability" for t in traits):
            raise ValueError("a rubric needs at least one capability trait (the composite is their mean)")
        return traits

    @property
    def keys(self) -> list[str]:
        """Every trait key, in document order (the order of the judge's `TRAITS:` line)."""
        return [t.key for t in self.traits]

    @property
    def capability_keys(self) -> list[str]:
        return [t.key for t in self.traits if t.kind == "capability"]

    @property
    def safety_keys(self) -> list[str]:
        return [t.key for t in self.traits if t.kind == "safety"]

    def trait(self, key: str) -> Trait:
        for t in self.traits:
            if t.key == key:
                return t
        raise KeyError(key)

    def without_evidence(self) -> list[str]:
        """Keys of the traits the `rules` judge could not score."""
        return [t.key for t in self.traits if t.evidence is None]

    def document(self) -> dict[str, Any]:
        """The validated document as JSON (`set` spelled as in the document)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def content_hash(self) -> str:
        return rubric_hash(self)


def rubric_hash(rubric: Rubric) -> str:
    """SHA-256 of the rubric's canonical JSON: what a judged number pins besides the judge."""
    return canonical_hash(rubric.document())


def parse_rubric(raw: Any, where: str) -> Rubric:
    """A validated rubric; every problem in it is one `BadInput` line of the `Problems` raised."""
    return validate_document(Rubric, raw, where, "rubric")


def load_rubric(path: str | Path) -> Rubric:
    """Read, parse and validate a rubric YAML file (safe YAML; every problem reported)."""
    return parse_rubric(load_yaml_file(path), str(path))
