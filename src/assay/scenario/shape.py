"""Checks held to the world's shape: every path, `count` target, `where` key, literal and bound.

A kit publishes the model of its state (`state_model`, a pydantic model; its JSON Schema is what is
read here, so this room needs nothing from `worlds/`). A check is refused, before any run, when it
can never be true, or never false, for a reason the model or the initial state shows:

- a path names a field the model does not have (`tickets.T-1.statuss`), a data key the initial state
  does not have (`hosts.app-99.isolated`), or goes below a value that has nothing below it;
- a data key not in the initial state is accepted only under a mapping whose keys a run may add
  (`x-keys: grows` in the schema); the estate's and the campaign's mappings never gain a key, so
  there every data key a check names exists when the run starts (see docs/state-reference.md);
- `exists: false` on a place no action removes (only keys of a mapping whose keys actions remove or
  add may be absent);
- a `count` names something that is not a list or a keyed mapping of mappings, a `where` key no
  item has, or asks for more items than a mapping that never grows holds;
- a literal (`equals`, `one_of`, a `where` value) that no value of the field can be (`"0"` for an
  integer, `resolvd` for one of resolved/declined), a bound no value of the field meets (`at_most:
  -5` on a percentage, `at_least` above `at_most`), and an `all` whose conditions on one path or one
  count contradict each other.

Each problem is one line, `LOCATION: message`, where LOCATION is the predicate's place in the
document (`checks[2].expect.all[1].path`), and every problem of a predicate is found in one pass.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from assay.scenario.predicates import (
    MISSING,
    AllOf,
    AnyOf,
    CountOf,
    NotOf,
    TextTest,
    ValueAt,
    format_path,
    same,
    split_path,
    text_holds,
)

Schema = dict[str, Any]


@functools.cache
def state_schema(model: type[BaseModel]) -> Schema:
    """The JSON Schema of a kit's state model (computed once per model; never mutate it)."""
    return model.model_json_schema()


@dataclass(frozen=True)
class _Place:
    """Where a path leads: the schemas the value may have, and its value in the initial state."""

    alts: list[Schema]
    initial: Any  # MISSING under a key a run adds
    vanishes: bool = False  # a run may remove it (or it may be absent): under a key actions remove or add


class Shape:
    """A kit's state schema with one world's initial state: what a check may name in it."""

    def __init__(self, schema: Schema, initial: dict[str, Any] | None, what: str) -> None:
        """`initial` is None when no world is known: every data key is then accepted."""
        self.schema = schema
        self.initial = initial
        self.what = what

    # ---- the schema ------------------------------------------------------------------------------
    def alts(self, schema: Schema) -> list[Schema]:
        """The alternatives a schema allows, references followed and unions flattened."""
        while "$ref" in schema:
            target = self.schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        for union in ("anyOf", "oneOf"):
            if union in schema:
                return [a for sub in schema[union] for a in self.alts(sub)]
        if len(schema.get("allOf", ())) == 1:
            return self.alts({**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}})
        return [schema]

    def resolve(self, path: str) -> _Place | str:
        """Where `path` leads, or why it leads nowhere (one message)."""
        keys = split_path(path)
        place = _Place(self.alts(self.schema), self.initial)
        for i, key in enumerate(keys):
            here = format_path(keys[:i]) or self.what
            alts = [a for a in place.alts if a.get("type") != "null"]
            objects = [a for a in alts if "properties" in a]
            maps = [a for a in alts if is_map(a)]
            following = [s for a in objects if key in a["properties"] for s in self.alts(a["properties"][key])]
            vanishes = place.vanishes or any(key not in a.get("required", ()) for a in objects if key in a["properties"])
            for m in maps:
                data = place.initial
                if isinstance(data, dict) and key not in data and m.get("x-keys", "fixed") != "grows":
                    if not following:
                        return _no_key(keys, i, m, data, here)
                    continue
                following += self.alts(m["additionalProperties"])
                vanishes = vanishes or m.get("x-keys", "fixed") != "fixed"
            if not following:
                if objects:
                    return _no_field(key, sorted({f for a in objects for f in a["properties"]}), here)
                if any(a.get("type") == "array" for a in alts):
                    return (f"{here} is a list: a path cannot name its items "
                            f"(count them: {{count: {here}, where: {{…}}}})")
                return f"{here} is {describe(alts)}: there is nothing below it"
            data = place.initial
            place = _Place(following, data.get(key, MISSING) if isinstance(data, dict) else MISSING, vanishes)
        return place

    # ---- predicates ----------------------------------------------------------------------------
    def problems(self, pred: Any, where: str) -> list[str]:
        """Every reason `pred` (at `where` in its document) can never be decided by play."""
        return [f"{where}{suffix}: {message}" for suffix, message in self._problems(pred)]

    def _problems(self, pred: Any) -> Iterator[tuple[str, str]]:
        if isinstance(pred, ValueAt):
            yield from self._value(pred)
        elif isinstance(pred, CountOf):
            yield from self._count(pred)
        elif isinstance(pred, (AllOf, AnyOf)):
            name, parts = ("all", pred.all) if isinstance(pred, AllOf) else ("any", pred.any)
            for j, part in enumerate(parts):
                yield from ((f".{name}[{j}]{s}", m) for s, m in self._problems(part))
            if isinstance(pred, AllOf):
                yield from ((".all", m) for m in contradictions(pred))
        elif isinstance(pred, NotOf):
            yield from ((f".not{s}", m) for s, m in self._problems(pred.not_))

    def _value(self, pred: ValueAt) -> Iterator[tuple[str, str]]:
        place = self.resolve(pred.path)
        if isinstance(place, str):
            yield ".path", place
            return
        kind = describe(place.alts)
        if pred.exists is False and not place.vanishes:
            yield ".exists", f"exists false can never hold: {pred.path} is always there (no action removes it)"
        if "equals" in pred.model_fields_set and not any(admits(a, pred.equals, self) for a in place.alts):
            yield ".equals", f"{_show(pred.equals)} can never be the value of {pred.path}, which is {kind}"
        if pred.one_of is not None:
            never = [v for v in pred.one_of if not any(admits(a, v, self) for a in place.alts)]
            if never:
                yield ".one_of", f"{', '.join(map(_show, never))} can never be the value of {pred.path}, which is {kind}"
        if pred.contains is not None or pred.matches is not None:
            test = ".contains" if pred.contains is not None else ".matches"
            if not any(_text_admits(a, pred) for a in place.alts):
                yield test, (f"{pred.path} is {kind}: contains and matches test strings" if not _stringy(place.alts)
                             else f"no value of {pred.path} can pass it: {pred.path} is {kind}")
            return
        if pred.at_least is None and pred.at_most is None:
            return
        ints = [a for a in place.alts if a.get("type") == "integer"]
        if not ints:
            yield (".at_least" if pred.at_least is not None else ".at_most",
                   f"{pred.path} is {kind}: at_least and at_most compare integers")
            return
        lows, highs = zip(*map(_range, ints))
        lo = None if None in lows else min(lows)
        hi = None if None in highs else max(highs)
        yield from _bounds(pred.at_least, pred.at_most, lo, hi, f"{pred.path}, which is {kind}")

    def _count(self, pred: CountOf) -> Iterator[tuple[str, str]]:
        place = self.resolve(pred.count)
        if isinstance(place, str):
            yield ".count", place
            return
        items: list[Schema] = []
        most: int | None = None
        ordered = pred.before is not None or pred.after is not None
        if ordered and not any(a.get("type") == "array" for a in place.alts):
            yield ".before" if pred.before is not None else ".after", (
                f"{pred.count} is {describe(place.alts)}: before and after order the items of a list")
            return
        for a in place.alts:
            if a.get("type") == "array":
                items += self.alts(a.get("items", {}))
            elif is_map(a):
                items += self.alts(a["additionalProperties"])
                if a.get("x-keys", "fixed") != "grows" and isinstance(place.initial, dict):
                    most = len(place.initial)
        if not items:
            yield ".count", (f"{pred.count} is {describe(place.alts)}: count counts the items of a list "
                             "or the values of a keyed mapping")
            return
        records = [a for a in items if "properties" in a]
        if any(is_map(a) for a in items):  # items keyed by data: a `where` key names one of them
            yield from _bounds(pred.at_least, pred.at_most, 0, most, f"{pred.count} holds {most} and never more")
            return
        if not records:
            yield ".count", (f"the items of {pred.count} are each {describe(items)}: count counts only items that "
                             "are mappings, so it would always be 0")
            return
        for name, entries in (("where", pred.where), ("before", pred.before or {}), ("after", pred.after or {})):
            yield from self._where(records, pred.count, name, entries)
        yield from _bounds(pred.at_least, pred.at_most, 0, most,
                           f"{pred.count} holds {most} and never more" if most is not None else "")


    def _where(self, records: list[Schema], count: str, name: str, entries: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for key, value in entries.items():
            fields = [s for a in records if key in a["properties"] for s in self.alts(a["properties"][key])]
            if not fields:
                yield f".{name}.{key}", _no_field(key, sorted({f for a in records for f in a["properties"]}),
                                                  f"the items of {count}")
            elif isinstance(value, TextTest):
                if not any(_text_admits(f, value) for f in fields):
                    yield f".{name}.{key}", (f"no {key} of an item of {count} can pass this text test: "
                                             f"it is {describe(fields)}")
            elif not any(admits(f, value, self) for f in fields):
                yield f".{name}.{key}", (f"{_show(value)} can never be the {key} of an item of {count}, "
                                         f"which is {describe(fields)}")


def is_map(schema: Schema) -> bool:
    return schema.get("type") == "object" and "properties" not in schema and isinstance(
        schema.get("additionalProperties"), dict)


def _bounds(at_least: int | None, at_most: int | None, lo: int | None, hi: int | None,
            what: str) -> Iterator[tuple[str, str]]:
    if at_least is not None and at_most is not None and at_least > at_most:
        yield ".at_least", f"at_least {at_least} is above at_most {at_most}: no value meets both"
        return
    if at_least is not None and hi is not None and at_least > hi:
        yield ".at_least", f"at_least {at_least} can never be met: {what}"
    if at_most is not None and lo is not None and at_most < lo:
        yield ".at_most", f"at_most {at_most} can never be met: {what}"


def admits(schema: Schema, value: Any, shape: Shape) -> bool:
    """Whether `value` (a JSON scalar or a list of them) can be a value `schema` allows."""
    if "enum" in schema or "const" in schema:
        return any(same(value, v) for v in schema.get("enum", [schema.get("const")]))
    kind = schema.get("type")
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        lo, hi = _range(schema)
        return (lo is None or lo <= value) and (hi is None or value <= hi)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        items = shape.alts(schema.get("items", {}))
        return isinstance(value, list) and all(any(admits(i, v, shape) for i in items) for v in value)
    return kind is None and "properties" not in schema  # an unconstrained value may be anything


def _stringy(alts: list[Schema]) -> bool:
    return any(a.get("type") == "string" or any(isinstance(v, str) for v in a.get("enum", [a.get("const")]))
               for a in alts)


def _text_admits(schema: Schema, test: ValueAt | TextTest) -> bool:
    """Whether some value `schema` allows can pass a text test (`contains`/`matches`): any free
    string may; of an enumeration, only a listed string that passes."""
    if "enum" in schema or "const" in schema:
        return any(text_holds(v, test.contains, test.matches, test.case)
                   for v in schema.get("enum", [schema.get("const")]))
    return schema.get("type") == "string"


def describe(alts: list[Schema]) -> str:
    """What values a field may have, in words: "an integer 0..100", "one of 'up', 'down' or null"."""
    return " or ".join(dict.fromkeys(_describe_one(a) for a in alts))


def _describe_one(schema: Schema) -> str:
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return f"one of {', '.join(map(_show, values))}" if len(values) > 1 else _show(values[0])
    kind = schema.get("type")
    if kind == "integer":
        lo, hi = _range(schema)
        if lo is not None and hi is not None:
            return f"an integer {lo}..{hi}"
        if lo is not None:
            return f"an integer ≥ {lo}"
        return f"an integer ≤ {hi}" if hi is not None else "an integer"
    if kind == "array":
        return "a list"
    if is_map(schema):
        return f"a mapping of {schema.get('x-key', 'key')} to values"
    if "properties" in schema:
        return f"a mapping of fields ({', '.join(schema['properties'])})"
    return {"null": "null", "boolean": "a boolean", "string": "a string", "number": "a number"}.get(kind or "", "any value")


def _range(schema: Schema) -> tuple[int | None, int | None]:
    """The least and greatest integer an integer schema allows (None: no bound)."""
    lo = schema.get("minimum", schema["exclusiveMinimum"] + 1 if "exclusiveMinimum" in schema else None)
    hi = schema.get("maximum", schema["exclusiveMaximum"] - 1 if "exclusiveMaximum" in schema else None)
    return lo, hi


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else f"'{value}'"


def _no_field(key: str, fields: list[str], here: str) -> str:
    close = difflib.get_close_matches(key, fields, n=1)
    hint = f"nearest: '{close[0]}'" if close else f"it has {', '.join(fields)}"
    return f"no field '{key}' in {here} ({hint})"


def _no_key(keys: tuple[str, ...], i: int, mapping: Schema, data: dict[str, Any], here: str, shown: int = 8) -> str:
    key = keys[i]
    label = mapping.get("x-key", "key")
    message = f"no {label} '{key}' in {here}"
    for j in range(len(keys), i + 1, -1):  # `files./var/app.log` split the file name at its dot
        dotted = ".".join(keys[i:j])
        if dotted in data:
            meant = format_path((*keys[:i], dotted, *keys[j:]))
            return f"{message} (nearest: '{dotted}': a dot inside a key is written '\\.', as in '{meant}')"
    close = difflib.get_close_matches(key, sorted(data), n=1)
    if close:
        return f"{message} (nearest: '{close[0]}')"
    if not data:
        return f"{message} ({here} is empty)"
    if len(data) <= shown:
        return f"{message} (it has " + ", ".join(f"'{k}'" for k in sorted(data)) + ")"
    return f"{message} (none of its {len(data)} keys is close)"


# ---- contradictions inside one `all` -------------------------------------------------------------


def contradictions(pred: AllOf) -> list[str]:
    """Conditions of one `all` (nested `all`s included) that no value of one path, or no count of
    one target and filter, can meet together."""
    values: dict[str, list[ValueAt]] = {}
    counts: dict[tuple[str, str], list[CountOf]] = {}
    for part in _conjuncts(pred):
        if isinstance(part, ValueAt):
            values.setdefault(part.path, []).append(part)
        elif isinstance(part, CountOf):
            which = {k: v for k, v in part.model_dump().items() if k not in ("at_least", "at_most")}
            counts.setdefault((part.count, json.dumps(which, sort_keys=True)), []).append(part)
    found = []
    for path, preds in values.items():
        if _conflict(preds):
            found.append(f"no value of {path} meets all of {_conditions(preds)}")
    for (path, _), counted in counts.items():
        lo = max((p.at_least for p in counted if p.at_least is not None), default=None)
        hi = min((p.at_most for p in counted if p.at_most is not None), default=None)
        if len(counted) > 1 and lo is not None and hi is not None and lo > hi:
            found.append(f"no count of {path} meets all of {_conditions(counted)}")
    return found


def _conditions(preds: Sequence[ValueAt | CountOf]) -> str:
    """The conditions of some predicates on one path, as written: "equals 'a', at_least 3"."""
    said = [f"{k} {_show(v)}" for p in preds for k, v in p.model_dump(by_alias=True).items()
            if k not in ("path", "count", "where", "before", "after") and (v is not None or k == "equals")]
    return ", ".join(said)


def _conjuncts(pred: AllOf) -> Iterator[Any]:
    for part in pred.all:
        if isinstance(part, AllOf):
            yield from _conjuncts(part)
        else:
            yield part


def _conflict(preds: list[ValueAt]) -> bool:
    """Whether no value meets every one of these conditions on one path."""
    if len(preds) < 2:
        return False
    exists = {p.exists for p in preds if p.exists is not None}
    valued = [p for p in preds if p.exists is None]
    if exists == {True, False} or (False in exists and valued):
        return True
    candidates: list[Any] | None = None
    for p in valued:
        allowed = [p.equals] if "equals" in p.model_fields_set else p.one_of
        if allowed is None:
            continue
        candidates = allowed if candidates is None else [v for v in candidates if any(same(v, w) for w in allowed)]
    lo = max((p.at_least for p in valued if p.at_least is not None), default=None)
    hi = min((p.at_most for p in valued if p.at_most is not None), default=None)
    if lo is not None and hi is not None and lo > hi:
        return True
    if candidates is not None and (lo is not None or hi is not None):
        candidates = [v for v in candidates if isinstance(v, int) and not isinstance(v, bool)
                      and (lo is None or v >= lo) and (hi is None or v <= hi)]
    return candidates == []
