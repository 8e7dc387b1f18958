"""Documents → validated scenarios with their content hash.

A scenario's content hash is SHA-256 over the RFC 8785 canonical JSON of
`{"document": <validated document>, "world": <fingerprint>}`, where the fingerprint is the hash of
the initial state the kit materialises from the seed: change the kit's code so the world differs,
and the hash changes with it.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar, Union, get_args, get_origin

import rfc8785
from pydantic import BaseModel, TypeAdapter, ValidationError

from assay.canonical import canonical_hash
from assay.errors import BadInput, Problems, UnknownName
from assay.located import KIND
from assay.scenario import predicates
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
    #: the model `parse_world` validates with: an unknown field of a `world` block is told the allowed ones
    world_model: type[BaseModel]
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
    #: Where the document was read from (a file, a stored version): what a problem found later names.
    source: str = field(default="", compare=False)
    #: What a run's world is forked with besides the scenario, by keyword (the campaign kit's
    #: `facilitator`): each value a factory called once per fork. Not part of any hash: it may word
    #: a run differently, never change what happens in it.
    world_options: Mapping[str, Callable[[], Any]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> str:
        return self.scenario.id


def describe_errors(exc: ValidationError, prefix: str = "", model: Any = None) -> list[str]:
    """Every validation error as one `field.path: message` line, unknown fields first, in words of
    ours rather than pydantic's (`must be an integer, not the string '30'`).

    An unknown field names the fields allowed there when `model` (the type `exc` came from) says
    which; a near miss of one of them, or of a missing sibling, is one line naming the field that
    was meant (`breifing: unknown field (did you mean 'briefing'?)`), not two.
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
            allowed = _fields_at(model, e["loc"][:-1])
            close = difflib.get_close_matches(e["loc"][-1], sorted(siblings), n=1)
            if close:
                absorbed.add(siblings[close[0]])
            else:
                close = difflib.get_close_matches(e["loc"][-1], allowed or [], n=1)
            if close:
                msg = f"unknown field (did you mean '{close[0]}'?)"
            elif allowed:
                msg = f"unknown field (allowed: {', '.join(allowed)})"
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
        raise Problems([BadInput(line, where) for line in describe_errors(exc, model=model)]) from None


def describe_error(exc: ValidationError, prefix: str = "", model: Any = None) -> str:
    """The first validation error as `field.path: message`, plus how many more there are."""
    lines = describe_errors(exc, prefix, model)
    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
    return lines[0] + more


#: The union tags pydantic puts into a predicate's location (`expect.path.at_least`: the `path` kind).
_TAGS = ("path", "count", "all", "any", "not")
_WHERE_TAGS = ("text", "value")


def _location(prefix: str, parts: tuple[Any, ...]) -> str:
    loc = prefix
    for i, part in enumerate(parts):
        if _is_tag(parts, i):
            continue
        loc += f"[{part}]" if isinstance(part, int) else ("." if loc else "") + str(part)
    return loc or "document"


def _is_tag(parts: tuple[Any, ...], i: int) -> bool:
    """Whether `parts[i]` is a union tag (which the author never wrote): a predicate's, the first
    part under an `expect`, under an item of `all`/`any`, or under the field `not`; or a `where`
    entry's, under its key."""
    if parts[i] in _WHERE_TAGS and i >= 2 and parts[i - 2] in ("where", "before", "after"):
        return True  # a `where` entry's kind: a text test or a value
    if parts[i] not in _TAGS or i == 0:
        return False
    before = parts[i - 1]
    return (before == "expect" or (isinstance(before, int) and i >= 2 and parts[i - 2] in ("all", "any"))
            or (before == "not" and i >= 2 and parts[i - 2] == "not"))


def _fields_at(model: Any, loc: tuple[Any, ...]) -> list[str] | None:
    """The fields (by the names a document uses) of the model at `loc` inside `model`, if known."""
    node = model
    for i, part in enumerate(loc):
        if node is None:
            return None
        node = _step(_bare(node), part, _is_tag(loc, i))
    node = _bare(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        return sorted(f.alias or name for name, f in node.model_fields.items())
    return None


def _bare(tp: Any) -> Any:
    """`tp` without `Annotated` and without an optional `None`."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _step(tp: Any, part: Any, tag: bool) -> Any:
    """The type at `part` inside `tp` (a model's field, a list's item, a mapping's value, a tagged
    union's member), or None when `part` leads nowhere known."""
    if tag:  # a tagged union's member: Annotated[Model, Tag(part)]
        members = get_args(tp) if get_origin(tp) in (Union, types.UnionType) else ()
        return next((m for m in members if any(getattr(x, "tag", None) == part for x in getattr(m, "__metadata__", ()))),
                    None)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        return next((f.annotation for name, f in tp.model_fields.items() if part in (name, f.alias)), None)
    if get_origin(tp) is list and isinstance(part, int):
        return get_args(tp)[0]
    if get_origin(tp) is dict and isinstance(part, str):
        return get_args(tp)[1]
    return None


#: What a field's pattern asks for, in words (a test holds every pattern the documents use to one).
PATTERN_WORDS: dict[str, str] = {
    r"^[a-z0-9][a-z0-9\-]{1,62}[a-z0-9]$": "use 3 to 64 lowercase letters, digits and '-', not starting or ending with '-'",
    r"^[a-z][a-z0-9_]*$": "use lowercase letters, digits and '_', starting with a letter",
    r"^[0-9]+(\.[0-9]+){0,2}$": "use one to three numbers separated by dots (1, 1.2, 1.2.3)",
    # a check's path: whatever form predicates gives it, said the same way
    predicates._PATH: "a path is the state's keys joined by single dots",
    r"^[a-z][a-z0-9_]{0,62}[a-z0-9]$": "use 2 to 64 lowercase letters, digits and '_', starting with a letter and not "
                                       "ending with '_'",
    r"^[a-z0-9][a-z0-9\-]*$": "use lowercase letters, digits and '-', starting with a letter or digit",
    r"^/[^\s]*$": "use an absolute path (starting with '/', without spaces)",
    r"^[a-z0-9_]+$": "use lowercase letters, digits and '_'",
}

#: What a value of each pydantic type error's kind must be.
_EXPECTED = {"int": "an integer", "string": "a string", "bool": "true or false", "float": "a number",
             "dict": "a mapping", "model": "a mapping", "model_attributes": "a mapping", "list": "a list"}


def _message(error: Any) -> str:
    """One error in words of ours; anything unforeseen keeps pydantic's own sentence."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    msg = str(error["msg"])
    if kind == "missing":
        return "required field is missing"
    if kind == KIND:
        return msg
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
        expected = _EXPECTED.get(kind.rsplit("_", 1)[0])
        if expected is not None:
            return f"must be {expected}, not {_what(value)}"
    if kind == "string_pattern_mismatch":
        words = PATTERN_WORDS.get(str(ctx.get("pattern")), f"it must match {ctx.get('pattern')}")
        return f"{value!r} is not allowed here; {words}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"must be at least {ctx['min_length']} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters long (it has {len(value)})"
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        n = ctx.get("actual_length", len(value) if hasattr(value, "__len__") else "?")
        item = "entry" if ctx.get("field_type") == "Dictionary" else "item"
        need = f"needs at least {bound}" if kind == "too_short" else f"takes at most {bound}"
        return f"{need} {item}{'s' if bound != 1 else ''} (it has {n})"
    bounds = {"greater_than_equal": ("ge", "greater than or equal to"), "less_than_equal": ("le", "less than or equal to"),
              "greater_than": ("gt", "greater than"), "less_than": ("lt", "less than")}
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {words} {ctx.get(key)} (got {value!r})"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, not {_what(value)}"
    return msg


def _what(value: Any) -> str:
    """A value as an author wrote it in YAML: `the string '30'`, `true`, `the number 30.5`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    kinds: dict[type, str] = {list: "a list", dict: "a mapping"}
    return kinds.get(type(value), type(value).__name__)


_PREDICATE: TypeAdapter[Any] = TypeAdapter(Predicate)


def parse_scenario(raw: Any, where: str, kits: KitSource) -> LoadedScenario:
    """Validate a parsed document and compute its hashes.

    Every problem that can be found is reported, each as its own `BadInput` line, together in one
    `Problems` (whose own line is the first of them and how many more there are). Besides the
    document's fields and its kit's `world` block, every check and win condition is held against
    the kit's state model and the initial state it materialises (`scenario.shape`). The world is
    materialised whenever `kit` and `world` are sound, even if other fields are not (an invalid
    `seed` stands in as 0: the world's shape is the seed's to fill, not to change), so those
    problems come out together. Without a sound `world` the checks are still held to the kit's
    model (field names, types, bounds; only data keys wait for a world), and an unknown `kit` with
    a close known name is checked as that kit's.
    """
    if not isinstance(raw, dict):
        raise BadInput("a scenario document must be a mapping at the top level", where)
    problems: list[str] = []
    scenario: Scenario | None = None
    unsound: set[Any] = set()
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        problems += describe_errors(exc, model=Scenario)
        unsound = {e["loc"][0] if e["loc"] else None for e in exc.errors(include_url=False)}

    def field(name: str) -> Any:
        return getattr(scenario, name) if scenario is not None else raw[name]

    kit: WorldKit | None = None
    if not unsound & {"kit", None}:
        try:
            kit = kits(field("kit"))
        except UnknownName as exc:  # the rest is checked as the nearest kit's, so it is reported now too
            kit = kits(exc.nearest) if exc.nearest else None
            problems.append(f"kit: {exc.message}" + (f"; the rest was checked against kit '{exc.nearest}'"
                                                      if kit is not None else ""))
        except BadInput as exc:
            problems.append(f"kit: {exc.message}")
    world_spec: BaseModel | None = None
    if kit is not None and "world" not in unsound:
        try:
            world_spec = kit.parse_world(field("world"))
        except ValidationError as exc:
            problems += describe_errors(exc, "world", kit.world_model)
    initial: dict[str, Any] | None = None
    if kit is not None and world_spec is not None:
        initial = kit.materialise(world_spec, field("seed") if "seed" not in unsound else 0)
    if kit is not None:
        # without a sound world the checks are still held to the kit's model: every field name is
        # checked, only the data keys (which ticket, which host) wait for a world to name them
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
    return LoadedScenario(scenario, document, world_spec, initial, fingerprint, content_hash, checks_hash, where)


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
