"""Declarative predicates over a world's final state.

Documents never carry code: a check says *what* must hold, in a tiny language evaluated here.

- `{path: a.b.c, equals: V}` / `one_of: [..]` / `at_least: N` / `at_most: N` / `exists: bool`
- `{count: a.b, where: {field: V}, at_least: N, at_most: N}` counts list items (or mapping
  values) whose fields equal every `where` entry
- `{all: [..]}`, `{any: [..]}`, `{not: P}`

Paths are dot-separated keys into the state document (mapping keys only). Every predicate lists
the paths it reads (`paths()`, in document order), so a document can be held against its world's
initial state before any run (`why_unresolved`, used by `scenario.load`).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictInt, Tag, model_serializer, model_validator

Scalar = Union[StrictBool, StrictInt, str, None]
_MISSING = object()
_PATH = r"^[A-Za-z0-9_/\-]+(\.[A-Za-z0-9_/\-]+)*$"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)


class ValueAt(_Strict):
    """A condition on the single value at `path`."""

    path: str = Field(pattern=_PATH)
    equals: Scalar | list[Scalar] = None
    one_of: list[Scalar] | None = None
    at_least: StrictInt | None = None
    at_most: StrictInt | None = None
    exists: StrictBool | None = None

    @model_validator(mode="after")
    def _one_condition(self) -> "ValueAt":
        given = [k for k in ("one_of", "at_least", "at_most", "exists") if getattr(self, k) is not None]
        if "equals" in self.model_fields_set:
            given.append("equals")
        if not given:
            raise ValueError("needs one of equals, one_of, at_least, at_most, exists")
        if len(given) > 1 and set(given) != {"at_least", "at_most"}:
            raise ValueError(f"give one condition, not {', '.join(sorted(given))}")
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler: Any) -> dict[str, Any]:
        # One canonical form: conditions that were not given are absent, so a stored document
        # re-validates to the same predicate (and `equals: null` stays a real condition).
        data = handler(self)
        return {k: v for k, v in data.items()
                if k == "path" or (k == "equals" and "equals" in self.model_fields_set) or (k != "equals" and v is not None)}

    def roots(self) -> set[str]:
        return {self.path.split(".", 1)[0]}

    def paths(self) -> list[str]:
        return [self.path]


class CountOf(_Strict):
    """How many items of the list (or mapping) at `count` match `where`."""

    count: str = Field(pattern=_PATH)
    where: dict[str, Scalar] = Field(default_factory=dict)
    at_least: StrictInt | None = Field(default=None, ge=0)
    at_most: StrictInt | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> "CountOf":
        if self.at_least is None and self.at_most is None:
            raise ValueError("count needs at_least or at_most")
        return self

    def roots(self) -> set[str]:
        return {self.count.split(".", 1)[0]}

    def paths(self) -> list[str]:
        return [self.count]


class AllOf(_Strict):
    all: list["Predicate"] = Field(min_length=1)

    def roots(self) -> set[str]:
        return set().union(*(p.roots() for p in self.all))

    def paths(self) -> list[str]:
        return [path for p in self.all for path in p.paths()]


class AnyOf(_Strict):
    any: list["Predicate"] = Field(min_length=1)

    def roots(self) -> set[str]:
        return set().union(*(p.roots() for p in self.any))

    def paths(self) -> list[str]:
        return [path for p in self.any for path in p.paths()]


class NotOf(_Strict):
    not_: "Predicate" = Field(alias="not")

    def roots(self) -> set[str]:
        return self.not_.roots()

    def paths(self) -> list[str]:
        return self.not_.paths()


def _kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return {ValueAt: "path", CountOf: "count", AllOf: "all", AnyOf: "any", NotOf: "not"}[type(value)]
    if isinstance(value, dict):
        for key in ("path", "count", "all", "any", "not"):
            if key in value:
                return key
    return None


Predicate = Annotated[
    Union[
        Annotated[ValueAt, Tag("path")],
        Annotated[CountOf, Tag("count")],
        Annotated[AllOf, Tag("all")],
        Annotated[AnyOf, Tag("any")],
        Annotated[NotOf, Tag("not")],
    ],
    Discriminator(_kind, custom_error_type="predicate", custom_error_message="a predicate needs one of the keys path, count, all, any, not"),
]

for _m in (AllOf, AnyOf, NotOf):
    _m.model_rebuild()


def lookup(state: Any, path: str) -> Any:
    node = state
    for key in path.split("."):
        if isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return _MISSING
    return node


def holds(pred: Any, state: dict[str, Any]) -> bool:
    """Evaluate a predicate against a state document. A missing path is simply false."""
    if isinstance(pred, ValueAt):
        value = lookup(state, pred.path)
        if pred.exists is not None:
            return (value is not _MISSING) is pred.exists
        if value is _MISSING:
            return False
        if "equals" in pred.model_fields_set:
            return _same(value, pred.equals)
        if pred.one_of is not None:
            return any(_same(value, v) for v in pred.one_of)
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        return (pred.at_least is None or value >= pred.at_least) and (pred.at_most is None or value <= pred.at_most)
    if isinstance(pred, CountOf):
        items = lookup(state, pred.count)
        if isinstance(items, dict):
            items = list(items.values())
        if not isinstance(items, list):
            return False
        n = sum(
            1 for item in items
            if isinstance(item, dict) and all(k in item and _same(item[k], v) for k, v in pred.where.items())
        )
        return (pred.at_least is None or n >= pred.at_least) and (pred.at_most is None or n <= pred.at_most)
    if isinstance(pred, AllOf):
        return all(holds(p, state) for p in pred.all)
    if isinstance(pred, AnyOf):
        return any(holds(p, state) for p in pred.any)
    if isinstance(pred, NotOf):
        return not holds(pred.not_, state)
    raise TypeError(f"not a predicate: {pred!r}")


def _same(a: Any, b: Any) -> bool:
    """Equality without Python's bool/int conflation (True must not equal 1)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def why_unresolved(state: dict[str, Any], path: str, what: str = "the state") -> str | None:
    """Why `path` can never resolve in a world that starts from `state`; None when it may.

    The rule, held against the materialised initial state when a document is loaded: every key
    of the path but the last must exist and name a mapping; the last key may be absent. A check
    may name one key the agent's actions add or remove (`exists: false` once a file is deleted,
    an object the agent creates), but never keys below one that is not there:
    `backups.nightlyy.status` is a typo, not a backup the agent might start, and as a check it
    would fail (or, under `not`, pass) on every run. The top level of a kit's state is fixed, so
    the first key must exist even when it is the only one (`count: changes`).
    """
    keys = path.split(".")
    node: Any = state
    for depth, key in enumerate(keys):
        here = ".".join(keys[:depth])
        if not isinstance(node, dict):
            return f"'{path}' resolves to nothing: '{here}' holds {_json_kind(node)}, not a mapping"
        if key in node:
            node = node[key]
            continue
        if depth == 0:
            close = difflib.get_close_matches(key, sorted(node), n=1)
            near = f"nearest: '{close[0]}'; " if close else ""
            return f"'{key}' is not part of {what} ({near}it has {', '.join(sorted(node))})"
        if depth == len(keys) - 1:
            return None
        return f"'{path}' resolves to nothing: no key '{key}' under '{here}' ({_nearest(key, node, here)})"
    return None


def _nearest(key: str, siblings: dict[str, Any], here: str, shown: int = 8) -> str:
    """The sibling key `key` most likely meant, else what is there."""
    dotted = sorted(k for k in siblings if k.startswith(key + "."))
    if dotted:  # `files./var/app.log.gz` split the key `/var/app.log.gz` at its dots
        return f"nearest: '{dotted[0]}', which a path cannot name: paths split keys at every dot"
    close = difflib.get_close_matches(key, sorted(siblings), n=1)
    if close:
        return f"nearest: '{close[0]}'"
    if not siblings:
        return f"'{here}' is empty"
    if len(siblings) <= shown:
        return "it has " + ", ".join(f"'{k}'" for k in sorted(siblings))
    return f"none of its {len(siblings)} keys is close"


def _json_kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return {str: "a string", list: "a list"}.get(type(value), type(value).__name__)
