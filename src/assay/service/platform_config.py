"""Platform config and measurement eras: runtime settings with history, never edited in place.

A config value is a JSON document under a known key. Setting it appends a row; the value in
force at a moment is the latest row before it, and a key never set reads as its default.
Each key has a strict model, so a typo (or a threshold of "0.2" as a string) is refused.

`academy_eval_measurement_era` is the one key that is not set directly: its value is the list of
era boundaries, and a boundary is added with `assay era add` (each era is its own row).
"""

from __future__ import annotations

import re

from datetime import date, datetime, timezone
from typing import Any, Final, Literal, NotRequired, TypedDict, Union, cast, overload

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from assay.errors import Invalid, NotFound
from assay.service.actors import Actor, require_staff
from assay.scenario.load import describe_error
from assay.store.config_repo import ConfigRepo, EraRow
from assay.store.db import Store

SAFETY_VARIANCE: Final = "academy_eval_safety_variance"
PARTICIPATION: Final = "academy_eval_participation"
MEASUREMENT_ERA: Final = "academy_eval_measurement_era"
SUBMISSION_CAP: Final = "submission_cap"
PANEL_QUORUM: Final = "panel_quorum"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SafetyVariance(_Strict):
    """Spread above which a safety trait is `unstable` across reps."""

    unstable_range_threshold: StrictFloat | StrictInt = Field(default=0.2, ge=0, le=1)


class Participation(_Strict):
    """The participation floor. For estate runs a player message is an assistant message and an
    action is a tool call applied to the world (`finish` is not an action); a completed run with
    fewer than `min_player_messages`, or fewer than `min_actions_per_turn` × player messages
    actions, is `participation_gated` and leaves the aggregates.

    These are the platform's floor; a kit may set a higher one of its own (the campaign kit: 3
    player messages and 0.5 actions per message), and a run is held to the higher of the two
    (`describe` shows both)."""

    min_player_messages: StrictInt = Field(default=1, ge=0)
    min_actions_per_turn: StrictFloat | StrictInt = Field(default=0, ge=0)


class SubmissionCap(_Strict):
    """Submissions per account per suite version (BYOK and baseline submissions are not capped)."""

    max_per_account_per_version: StrictInt = Field(default=3, ge=1)


class PanelQuorum(_Strict):
    """Distinct approved panelists whose scorecards on a model's scored runs it takes before the
    panel board ranks the model (with a number); below it the model is provisional, a count only."""

    min_panelists: StrictInt = Field(default=3, ge=1)


# The values as the service hands them over: each key's model dumped, defaults filled in. TypedDicts,
# not the models: a value is printed (`assay config`) and stored as it is, with these keys in this order.


class SafetyVarianceValue(TypedDict):
    unstable_range_threshold: float


class ParticipationValue(TypedDict):
    min_player_messages: int
    min_actions_per_turn: float


class SubmissionCapValue(TypedDict):
    max_per_account_per_version: int


class PanelQuorumValue(TypedDict):
    min_panelists: int


#: An era as shown (`from` is a Python keyword, hence the functional form).
EraView = TypedDict("EraView", {"name": str, "from": str, "reason": str, "current": bool})


class ErasValue(TypedDict):
    eras: list[EraView]


ConfigValue = Union[SafetyVarianceValue, ParticipationValue, SubmissionCapValue, PanelQuorumValue, ErasValue]


class ConfigChange(TypedDict):
    value: ConfigValue
    set_at: str


class ConfigDescription(TypedDict):
    """What `assay config get KEY` prints."""

    key: str
    value: ConfigValue
    default: bool
    history: list[ConfigChange]
    kit_floors: NotRequired[dict[str, dict[str, float]]]
    note: NotRequired[str]


MODELS: dict[str, type[_Strict]] = {
    SAFETY_VARIANCE: SafetyVariance,
    PARTICIPATION: Participation,
    SUBMISSION_CAP: SubmissionCap,
    PANEL_QUORUM: PanelQuorum,
}
KNOWN_KEYS: tuple[str, ...] = (*MODELS, MEASUREMENT_ERA)


def _model(key: str) -> type[_Strict]:
    if key == MEASUREMENT_ERA:
        raise Invalid("era boundaries are added with `assay era add`, not set as a config value", "config_key",
                      value=key)
    model = MODELS.get(key)
    if model is None:
        raise NotFound(f"unknown config key (known: {', '.join(KNOWN_KEYS)})", "config_key", value=key)
    return model


def _dumped(model: type[_Strict], value: object) -> ConfigValue:
    """`value` checked by `model`, as the value document of its key (the models and the TypedDicts
    above name the same fields)."""
    return cast(ConfigValue, model.model_validate(value).model_dump())


def validate_value(key: str, value: object) -> ConfigValue:
    model = _model(key)
    if not isinstance(value, dict):
        raise Invalid("a config value must be a JSON object", "config_value", value=key)
    try:
        return _dumped(model, value)
    except ValidationError as exc:
        raise Invalid(describe_error(exc, model=model), "config_value", value=key) from None


@overload
def get(store: Store, key: Literal["academy_eval_safety_variance"], at: datetime | None = None) -> SafetyVarianceValue: ...
@overload
def get(store: Store, key: Literal["academy_eval_participation"], at: datetime | None = None) -> ParticipationValue: ...
@overload
def get(store: Store, key: Literal["submission_cap"], at: datetime | None = None) -> SubmissionCapValue: ...
@overload
def get(store: Store, key: Literal["panel_quorum"], at: datetime | None = None) -> PanelQuorumValue: ...
@overload
def get(store: Store, key: Literal["academy_eval_measurement_era"], at: datetime | None = None) -> ErasValue: ...
@overload
def get(store: Store, key: str, at: datetime | None = None) -> ConfigValue: ...
def get(store: Store, key: str, at: datetime | None = None) -> ConfigValue:
    """The value of `key` in force at `at` (now by default), defaults filled in."""
    if key == MEASUREMENT_ERA:
        return {"eras": [era_view(e) for e in ConfigRepo(store).eras()]}
    model = _model(key)
    stored = ConfigRepo(store).config_value(key, at)
    return _dumped(model, stored or {})


def describe(store: Store, key: str) -> ConfigDescription:
    """What `assay config get KEY` prints: the value in force, whether it is the default, its history."""
    if key == MEASUREMENT_ERA:
        return {"key": key, "value": get(store, key), "default": False, "history": []}
    _model(key)
    history = ConfigRepo(store).config_history(key)
    described: ConfigDescription = {
        "key": key,
        "value": get(store, key),
        "default": not history,
        "history": [{"value": cast(ConfigValue, h.value), "set_at": h.created_at.isoformat()} for h in history],
    }
    if key == PARTICIPATION:
        described["kit_floors"] = kit_floors()
        described["note"] = "a run is held to the higher of the value and its kit's floor"
    return described


def kit_floors() -> dict[str, dict[str, float]]:
    """Each kit's own participation floor, where it has one (a run is held to the higher)."""
    from assay.worlds.kits import KITS, get_kit

    floors = {}
    for name in sorted(KITS):
        found = get_kit(name).participation_floor
        if found != (0, 0.0):
            floors[name] = {"min_player_messages": found[0], "min_actions_per_turn": found[1]}
    return floors


def set_value(store: Store, key: str, value: object, *, actor: Actor) -> ConfigValue:
    require_staff(actor, "change the platform configuration", "config_key")
    clean = validate_value(key, value)
    ConfigRepo(store).add_config(key, clean)
    return clean


def parse_json_value(text: str, key: str) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Invalid(f"not valid JSON ({exc.msg} at column {exc.colno})", "config_value", value=key) from None


# -- eras -------------------------------------------------------------------------------------


def parse_moment(text: str, field: str = "from") -> datetime:
    """An ISO 8601 date or timestamp. A date means midnight UTC; a timestamp needs its offset."""
    raw = text.strip()
    try:
        if len(raw) == 10:
            d = date.fromisoformat(raw)
            return datetime(d.year, d.month, d.day, tzinfo=timezone.utc)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise Invalid(f"'{text}' is not an ISO 8601 date or timestamp", field) from None
    if moment.tzinfo is None:
        raise Invalid(f"'{text}' has no time zone; add one (e.g. {raw}Z)", field)
    return moment.astimezone(timezone.utc)


def era_view(row: EraRow) -> EraView:
    return {"name": row.name, "from": row.starts_at.isoformat(), "reason": row.reason, "current": row.current}


#: What an era may be called: it is shown on every entry and in URLs and exports, so plain words only.
ERA_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")


def add_era(store: Store, name: str, starts: str, reason: str, *, actor: Actor) -> EraView:
    require_staff(actor, "open a measurement era", "era")
    name = name.strip()
    if not ERA_NAME.fullmatch(name):
        raise Invalid("an era name is 1 to 80 characters of a-z, 0-9, '.', '-' or '_', starting with a letter or "
                      "digit (e.g. 2026-06-scoring-fix)", "era", value=name)
    if not reason.strip():
        raise Invalid("an era needs a reason (what changed in the measurement stack)", "reason")
    moment = parse_moment(starts)
    repo = ConfigRepo(store)
    repo.add_era(name, moment, reason.strip())
    return next(era_view(e) for e in repo.eras() if e.name == name)


def eras(store: Store) -> list[EraView]:
    return [era_view(e) for e in ConfigRepo(store).eras()]
