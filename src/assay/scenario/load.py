"""Documents → validated scenarios with their content hash.

A scenario's content hash is SHA-256 over the RFC 8785 canonical JSON of
`{"document": <validated document>, "world": <fingerprint>}`, where the fingerprint is the hash of
the initial state the kit materialises from the seed: change the kit's code so the world differs,
and the hash changes with it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import rfc8785
from pydantic import BaseModel, TypeAdapter, ValidationError

from assay.errors import BadInput, Problems
from assay.canonical import canonical_hash
from assay.scenario.models import Scenario
from assay.scenario.predicates import Predicate
from assay.scenario.shape import Shape, state_schema
from assay.scenario.yamlsafe import load_yaml_file


class WorldKit(Protocol):
    """What validating a scenario needs of its kit: to parse the kit's `world` block and to
    materialise the initial state from it and the seed (the state the checks are held against and
    the content hash fingerprints). `assay.worlds.base.Kit` is one; this room names only the part it
    uses, so `scenario/` does not import `worlds/` (the caller passes `worlds.kits.get_kit`)."""

    name: str
    state_model: type[BaseModel]

    def parse_world(self, world: dict[str, Any]) -> BaseModel: ...

    def materialise(self, spec: Any, seed: int) -> dict[str, Any]: ...


M = TypeVar("M", bound=BaseModel)

KitSource = Callable[[str], WorldKit]
"""A kit by name; raises BadInput for a name it does not know (`assay.worlds.kits.get_kit`)."""


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    document: dict[str, Any]
    world_spec: Any
    initial_state: dict[str, Any]
    world_fingerprint: str
    content_hash: str
    checks_hash: str
    #: What a run's world is forked with besides the scenario, by keyword (the campaign kit's
    #: `facilitator`): each value a factory called once per fork. Not part of any hash: it may word
    #: a run differently, never change what happens in it.
    world_options: Mapping[str, Callable[[], Any]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> str:
        return self.scenario.id


def describe_errors(exc: ValidationError, prefix: str = "") -> list[str]:
    """Every validation error as one `field.path: message` line, unknown fields first.

    A typo'd field name shows up twice in pydantic's list, as an unknown field and as a missing
    one; when the unknown name is a near miss of a missing sibling it is one line naming the
    field that was meant (`breifing: unknown field (did you mean 'briefing'?)`), not two.
    """
    errors = exc.errors(include_url=False)
    missing = [e for e in errors if e["type"] == "missing" and e["loc"]]
    absorbed: set[int] = set()
    unknown_lines = []
    for e in errors:
        if e["type"] != "extra_forbidden":
            continue
        msg = "unknown field"
        if e["loc"] and isinstance(e["loc"][-1], str):
            siblings = {str(m["loc"][-1]): i for i, m in enumerate(missing)
                        if m["loc"][:-1] == e["loc"][:-1] and i not in absorbed}
            close = difflib.get_close_matches(e["loc"][-1], sorted(siblings), n=1)
            if close:
                absorbed.add(siblings[close[0]])
                msg = f"unknown field (did you mean '{close[0]}'?)"
        unknown_lines.append(f"{_location(prefix, e['loc'])}: {msg}")
    taken = {id(missing[i]) for i in absorbed}
    rest = [f"{_location(prefix, e['loc'])}: {_message(e)}"
            for e in errors if e["type"] != "extra_forbidden" and id(e) not in taken]
    return unknown_lines + rest


def validate_document(model: type[M], raw: Any, where: str, noun: str) -> M:
    """`raw` validated as `model` (a suite, a rubric…); refused as one `BadInput` if it is not a
    mapping, else with every problem in it as one line of the `Problems` raised."""
    if not isinstance(raw, dict):
        raise BadInput(f"a {noun} document must be a mapping at the top level", where)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise Problems([BadInput(line, where) for line in describe_errors(exc)]) from None


def describe_error(exc: ValidationError, prefix: str = "") -> str:
    """The first validation error as `field.path: message`, plus how many more there are."""
    lines = describe_errors(exc, prefix)
    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
    return lines[0] + more


def _location(prefix: str, parts: tuple[Any, ...]) -> str:
    loc = prefix
    for part in parts:
        loc += f"[{part}]" if isinstance(part, int) else ("." if loc else "") + str(part)
    return _drop_union_tags(loc) or "document"


def _message(error: Any) -> str:
    msg = str(error["msg"])
    if error["type"] == "missing":
        return "required field is missing"
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    if error["type"].endswith("_type"):
        return f"{msg} (got {type(error.get('input')).__name__} {error.get('input')!r})"
    return msg


def _drop_union_tags(loc: str) -> str:
    # pydantic puts the chosen union tag into the location (expect.path.at_least → expect.at_least)
    for tag in ("path", "count", "all", "any", "not"):
        loc = loc.replace(f"expect.{tag}.", "expect.").replace(f"].{tag}.", "].")
    return loc


_PREDICATE: TypeAdapter[Any] = TypeAdapter(Predicate)


def parse_scenario(raw: Any, where: str, kits: KitSource) -> LoadedScenario:
    """Validate a parsed document and compute its hashes.

    Every problem that can be found is reported, each as its own `BadInput` line, together in one
    `Problems` (whose own line is the first of them and how many more there are). Besides the
    document's fields and its kit's `world` block, every check and win condition is held against
    the kit's state model and the initial state it materialises (`scenario.shape`). The world is
    materialised whenever `kit`, `seed` and `world` are sound, even if other fields are not, so
    those problems come out together.
    """
    if not isinstance(raw, dict):
        raise BadInput("a scenario document must be a mapping at the top level", where)
    problems: list[str] = []
    scenario: Scenario | None = None
    unsound: set[Any] = set()
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        problems += describe_errors(exc)
        unsound = {e["loc"][0] if e["loc"] else None for e in exc.errors(include_url=False)}

    def field(name: str) -> Any:
        return getattr(scenario, name) if scenario is not None else raw[name]

    kit: WorldKit | None = None
    if not unsound & {"kit", None}:
        try:
            kit = kits(field("kit"))
        except BadInput as exc:
            problems.append(f"kit: {exc.message}")
    world_spec: BaseModel | None = None
    if kit is not None and "world" not in unsound:
        try:
            world_spec = kit.parse_world(field("world"))
        except ValidationError as exc:
            problems += describe_errors(exc, "world")
    initial: dict[str, Any] | None = None
    if kit is not None and world_spec is not None and "seed" not in unsound:
        initial = kit.materialise(world_spec, field("seed"))
        shape = Shape(state_schema(kit.state_model), initial, f"the {kit.name} state")
        for section in ("checks", "win_conditions"):
            for i, expect in _predicates(scenario, raw, section):
                problems += shape.problems(expect, f"{section}[{i}].expect")
    if problems:
        raise Problems([BadInput(p, where) for p in problems])
    assert scenario is not None and world_spec is not None and initial is not None
    document = scenario.model_dump(mode="json", by_alias=True)
    document["world"] = world_spec.model_dump(mode="json", by_alias=True)
    try:
        fingerprint = canonical_hash(initial)
        content_hash = canonical_hash({"document": document, "world": fingerprint})
    except rfc8785.CanonicalizationError as exc:
        raise BadInput(f"not canonical JSON: {exc} (integers must lie within ±(2^53−1))", where) from None
    checks_hash = canonical_hash(document["checks"])
    return LoadedScenario(scenario, document, world_spec, initial, fingerprint, content_hash, checks_hash)


def _predicates(scenario: Scenario | None, raw: dict[str, Any], section: str) -> list[tuple[int, Any]]:
    """(index, predicate) of each check or win condition whose `expect` is itself valid."""
    if scenario is not None:
        return [(i, item.expect) for i, item in enumerate(getattr(scenario, section))]
    items = raw.get(section)
    found = []
    for i, item in enumerate(items if isinstance(items, list) else ()):
        try:
            found.append((i, _PREDICATE.validate_python(item["expect"])))
        except (TypeError, KeyError, ValidationError):  # not a mapping, no expect, a bad one: reported above
            continue
    return found


def load_scenario(path: str | Path, kits: KitSource) -> LoadedScenario:
    return parse_scenario(load_yaml_file(path), str(path), kits)
