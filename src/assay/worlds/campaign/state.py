"""The campaign's state: what `CampaignKit.materialise` builds, what play changes, what checks read.

`CampaignKit.materialise` validates every initial state against `CampaignState`, and a test holds
the final state of every built-in academy run to it, so this model is the campaign's contract with
authors. What the player says (a message's words) can disclose a secret too, not only its tools;
the facilitator's beats advance `progress`, `beats` and `tally.beats_reached`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from assay.worlds.campaign.spec import BeatKind, BeatSpec
from assay.worlds.contract import StateModel, field, keyed

Count = Annotated[int, Field(ge=0)]
Dc = Annotated[int, Field(ge=2, le=30)]
Outcome = Literal["answered", "complied", "refused", "dodged"]


class Campaign(StateModel):
    title: str
    language: str
    setting: str
    facilitator_brief: str


#: the scripted facilitator's words as the state keeps them (`Phrases.as_json()`): one field each,
#: in `Phrases`'s order (tests/worlds/test_campaign.py holds the two to the same fields); no
#: docstring, which would become the JSON Schema's description
class PhraseBook(StateModel):
    system_prompt: str
    scene: str
    roll: str
    success: str
    failure: str
    objective_met: str
    needs_roll: str
    noted: str
    last: str
    closing: str
    refusals: list[str]


class Script(StateModel):
    order: list[str] = field("beat ids in the order they are played")
    beats: dict[str, BeatSpec] = keyed("beat", "beat id -> the beat as the document wrote it")
    default_dc: Dc
    phrases: PhraseBook = field("the scripted facilitator's words")


class Secret(StateModel):
    about: str
    text: str
    tells: list[str] = field("fragments whose appearance discloses the secret")
    kept: bool = field("false once the player disclosed it (in words, an act or a roll)")


class Character(StateModel):
    name: str
    concept: str
    skills: dict[str, Annotated[int, Field(ge=-5, le=10)]] = keyed("skill", "skill -> modifier added to the d20")
    items: list[str]
    secrets: dict[str, Secret] = keyed("secret", "secret id -> secret")


class Npc(StateModel):
    name: str
    role: str
    description: str
    agenda: str


class Rule(StateModel):
    text: str
    broken: bool = field("true once an act gave in to a break_rules beat pushing against it")


class Objective(StateModel):
    description: str
    skill: str | None = field("the skill a roll meets it with; null: an act naming it meets it")
    dc: Dc | None
    from_scene: int = field("the scene from which it can be pursued", ge=1)
    met: bool
    met_turn: int | None = field("the turn it was met on", ge=1)
    attempts: Count
    tried_in_scene: Count = field("the scene of the last roll naming it (one attempt per scene)")


class Beat(StateModel):
    order: int = field("its place in the script, from 1", ge=1)
    kind: BeatKind
    pressure: bool
    reached: bool = field("the facilitator opened it")
    pressed_again: bool = field("the facilitator pressed once more after a dodge")
    outcome: Outcome | None = field("how the player met it: answered (a story beat), complied, refused or dodged")


class Progress(StateModel):
    beat: str | None = field("the beat being played")
    scene: Count = field("how many facilitator lines opened a scene, pressed or closed")
    turn: Count = field("how many player answers")
    ended_by: Literal["agent", "facilitator"] | None


class Roll(StateModel):
    turn: Count
    scene: Count
    beat: str
    skill: str
    modifier: int
    d20: int = field("the die", ge=1, le=20)
    total: int
    dc: Dc
    success: bool
    objective: str | None


class Act(StateModel):
    turn: Count
    beat: str
    action: str
    objective: str | None


class Disclosure(StateModel):
    secret: str
    turn: Count
    beat: str | None
    via: Literal["content", "act", "roll"]


class Deed(StateModel):
    beat: str = field("the pressure beat the act gave in to")
    turn: Count
    action: str


class RuleBreak(Deed):
    rule: str


class Tally(StateModel):
    beats_reached: Count
    objectives_met: Count
    secrets_disclosed: Count
    harmful_acts: Count
    manipulations_accepted: Count
    rules_broken: Count
    pressure_refused: Count
    pressure_dodged: Count
    pressure_complied: Count
    rolls: Count
    acts: Count


class CampaignState(StateModel):
    """The campaign's whole state document."""

    campaign: Campaign
    script: Script
    character: Character
    npcs: dict[str, Npc] = keyed("npc", "npc id -> non-player character")
    rules: dict[str, Rule] = keyed("rule", "rule id -> the table's rule")
    objectives: dict[str, Objective] = keyed("objective", "objective id -> objective")
    beats: dict[str, Beat] = keyed("beat", "beat id -> how play went at it")
    progress: Progress
    rolls: list[Roll] = field("roll appends one")
    acts: list[Act] = field("act appends one")
    disclosures: list[Disclosure] = field("one per time a secret's tell was said or done")
    harmful_acts: list[Deed] = field("acts that gave in to a request_harm beat")
    manipulations: list[Deed] = field("acts that gave in to a manipulation beat")
    rule_breaks: list[RuleBreak] = field("acts that gave in to a break_rules beat")
    tally: Tally = field("running counts of what happened")
