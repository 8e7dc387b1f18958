"""The `world` block of a campaign scenario: the table, the player's sheet, the cast and the script.

Everything the world needs to play is here, in data: the setting, the player character's sheet
(skills with modifiers, items, secrets the character was told to keep), the non-player characters
(what anyone may know of them, and an agenda only the debrief shows), the objectives, the table's
agreed rules, and the facilitator's script of beats. A pressure beat names what giving in would
look like — the secret it is after, or the words an `act` of compliance would contain — so the
world can record, as ground truth, whether the player held the line.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StrictInt,
    field_validator,
    model_validator,
)

from assay.languages import bcp47
from assay.located import checked, names, once, references
from assay.worlds.campaign.phrases import PHRASEBOOKS, Phrases, primary

ID = r"^[a-z0-9][a-z0-9\-]*$"
SKILL = r"^\w[\w\-]*$"  # letters of any script, digits, _ and -; never a dot (paths split at dots)

BeatKind = Literal["story", "extract_secret", "request_harm", "manipulation", "break_rules"]
PRESSURE_KINDS: frozenset[str] = frozenset({"extract_secret", "request_harm", "manipulation", "break_rules"})
#: Pressure beats whose compliance is an `act` the world recognises by its words.
DEED_KINDS: frozenset[str] = frozenset({"request_harm", "manipulation", "break_rules"})


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SecretSpec(_Strict):
    """Something the character was told and must keep. `about` is how the sheet labels it (and
    how someone asking for it would name it); `text` is the secret itself; `tells` are the
    fragments whose appearance in what the player says or does discloses it (default: the text)."""

    id: str = Field(pattern=ID)
    about: str = Field(min_length=1)
    text: str = Field(min_length=1)
    tells: list[str] = Field(default_factory=list)

    @field_validator("tells")
    @classmethod
    def _tells(cls, tells: list[str]) -> list[str]:
        if any(len(t.strip()) < 3 for t in tells):
            raise ValueError("a tell must be at least 3 characters (a shorter one would match by chance)")
        return tells


class CharacterSpec(_Strict):
    name: str = Field(min_length=1)
    concept: str = Field(min_length=1)
    skills: dict[str, StrictInt] = Field(min_length=1, description="skill -> modifier added to the d20")
    items: list[str] = Field(default_factory=list)
    secrets: list[SecretSpec] = Field(default_factory=list)

    _secrets_once = once("secrets", "secret id", "id")

    @field_validator("skills")
    @classmethod
    def _skills(cls, skills: dict[str, int]) -> dict[str, int]:
        for name, modifier in skills.items():
            if re.fullmatch(SKILL, name) is None or name != name.lower():
                raise ValueError(f"skill '{name}' must be lowercase letters, digits, '-' or '_'")
            if not -5 <= modifier <= 10:
                raise ValueError(f"skill '{name}': modifier {modifier} is outside -5..10")
        return skills


class NpcSpec(_Strict):
    id: str = Field(pattern=ID)
    name: str = Field(min_length=1)
    role: str = Field(min_length=1)
    description: str = Field(min_length=1, description="what the player may know of them")
    agenda: str = Field(default="", description="what they really want; hidden, shown only in the debrief")


class RuleSpec(_Strict):
    """A rule the table agreed on before play (the player's sheet lists them)."""

    id: str = Field(pattern=ID)
    text: str = Field(min_length=1)


class ObjectiveSpec(_Strict):
    """A goal of the character's. With a `skill`, a successful `roll` of it (d20 + modifier ≥ DC)
    naming the objective meets it; without one, an `act` naming the objective does."""

    id: str = Field(pattern=ID)
    description: str = Field(min_length=1)
    skill: str | None = None
    dc: StrictInt | None = Field(default=None, ge=2, le=30)
    dc_spread: StrictInt = Field(default=0, ge=0, le=5, description="the world seed moves the DC by up to this much")
    from_beat: str | None = Field(default=None, description="the beat from which it can be pursued (default: the first)")

    @model_validator(mode="after")
    def _dc_with_skill(self) -> ObjectiveSpec:
        if self.skill is None and (self.dc is not None or self.dc_spread):
            raise ValueError("a DC needs a skill to roll against it")
        return self


class BeatSpec(_Strict):
    """One move of the facilitator's script.

    `text` is what the facilitator says when the beat opens; `press` what it says once more when
    the player dodged a pressure beat (neither gave in nor refused). `comply` lists what giving in
    to a deed-pressure beat looks like: each entry is words that must all appear (as
    case-insensitive substrings, so a stem matches its inflections) in one `act` of the player's
    for that act to be the deed; an act that also says no (a refusal marker) is not."""

    id: str = Field(pattern=ID)
    kind: BeatKind = "story"
    npc: str | None = None
    text: str = Field(min_length=1)
    press: str | None = None
    secret: str | None = Field(default=None, description="extract_secret: the secret the beat is after")
    rule: str | None = Field(default=None, description="break_rules: the rule the beat pushes against")
    comply: list[str] = Field(default_factory=list)
    on_refuse: str | None = None
    on_comply: str | None = None
    dc: StrictInt | None = Field(default=None, ge=2, le=30, description="DC of a roll naming no objective in this beat")

    @model_validator(mode="after")
    def _fields_of_kind(self) -> BeatSpec:
        pressure = self.kind in PRESSURE_KINDS
        if pressure and not self.press:
            raise ValueError(f"beat {self.id}: a {self.kind} beat needs `press` (what is said when the player dodges)")
        if not pressure:
            extra = [k for k in ("press", "secret", "rule", "on_refuse", "on_comply") if getattr(self, k) is not None]
            if self.comply:
                extra.append("comply")
            if extra:
                raise ValueError(f"beat {self.id}: a story beat applies no pressure; drop {', '.join(extra)}")
        if self.kind == "extract_secret" and self.secret is None:
            raise ValueError(f"beat {self.id}: an extract_secret beat names the `secret` it is after")
        if self.kind != "extract_secret" and self.secret is not None:
            raise ValueError(f"beat {self.id}: only an extract_secret beat names a `secret`")
        if self.kind == "break_rules" and self.rule is None:
            raise ValueError(f"beat {self.id}: a break_rules beat names the `rule` it pushes against")
        if self.kind != "break_rules" and self.rule is not None:
            raise ValueError(f"beat {self.id}: only a break_rules beat names a `rule`")
        if self.kind in DEED_KINDS and not self.comply:
            raise ValueError(f"beat {self.id}: a {self.kind} beat lists what complying looks like (`comply`)")
        if self.kind == "extract_secret" and self.comply:
            raise ValueError(f"beat {self.id}: an extract_secret beat is given in to by disclosure, not `comply`")
        if any(not entry.split() for entry in self.comply):
            raise ValueError(f"beat {self.id}: an empty `comply` entry would match every act")
        return self


class PhrasesSpec(_Strict):
    """Overrides of the scripted facilitator's own words (a language without a built-in phrasebook
    gives them all)."""

    system_prompt: str | None = None
    scene: str | None = None
    roll: str | None = None
    success: str | None = None
    failure: str | None = None
    objective_met: str | None = None
    needs_roll: str | None = None
    noted: str | None = None
    last: str | None = None
    closing: str | None = None
    refusals: list[str] | None = None


class CampaignSpec(_Strict):
    campaign_language: str
    title: str = Field(min_length=1)
    setting: str = Field(min_length=1)
    character: CharacterSpec
    npcs: list[NpcSpec] = Field(default_factory=list)
    rules: list[RuleSpec] = Field(default_factory=list)
    objectives: list[ObjectiveSpec] = Field(min_length=1)
    script: list[BeatSpec] = Field(min_length=1)
    default_dc: StrictInt = Field(default=12, ge=2, le=30)
    facilitator_brief: str = Field(default="", description="for a model facilitator; never shown to the player")
    phrases: PhrasesSpec | None = None

    @field_validator("campaign_language")
    @classmethod
    def _language(cls, value: str) -> str:
        return bcp47(value)

    _npcs_once = once("npcs", "npc id", "id")
    _rules_once = once("rules", "rule id", "id")
    _objectives_once = once("objectives", "objective id", "id")
    _beats_once = once("script", "beat id", "id")

    @model_validator(mode="wrap")
    @classmethod
    def _references(cls, raw: Any, handler: ModelWrapValidatorHandler[CampaignSpec]) -> CampaignSpec:
        """What objectives and beats name (a skill, a beat, an npc, a secret, a rule) exists: each
        unknown name its own located line, read from the raw document (so even beside other errors)."""
        character = raw.get("character") if isinstance(raw, dict) else None
        skills = character.get("skills") if isinstance(character, dict) else None
        found = [*references(raw, "objectives", "skill", skills if isinstance(skills, dict) else None,
                             "skill", "on the character's sheet"),
                 *references(raw, "objectives", "from_beat", names(raw, "script", "id"), "beat"),
                 *references(raw, "script", "npc", names(raw, "npcs", "id"), "npc"),
                 *references(raw, "script", "secret", names(character, "secrets", "id"), "secret"),
                 *references(raw, "script", "rule", names(raw, "rules", "id"), "rule")]
        return checked(lambda: handler(raw), found, cls.__name__)

    @model_validator(mode="after")
    def _words(self) -> CampaignSpec:
        self.phrasebook()  # refuses a language with no words for the scripted facilitator
        return self

    def phrasebook(self) -> Phrases:
        """The scripted facilitator's words: the built-in phrasebook of the campaign language, with
        this document's overrides on top."""
        given = self.phrases.model_dump(exclude_none=True) if self.phrases is not None else {}
        base = PHRASEBOOKS.get(primary(self.campaign_language))
        if base is None:
            missing = sorted(set(Phrases.__dataclass_fields__) - set(given))
            if missing:
                raise ValueError(
                    f"the scripted facilitator has no phrasebook for '{self.campaign_language}' (it has "
                    f"{', '.join(sorted(PHRASEBOOKS))}); give every `phrases` field (missing: {', '.join(missing)})")
            return Phrases.from_json(given)
        return base.with_overrides(given)
