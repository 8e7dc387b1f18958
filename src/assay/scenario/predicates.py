"""Declarative predicates over a world's final state.

Documents never carry code: a check says *what* must hold, in a tiny language evaluated here.

- `{path: a.b.c, equals: V}` / `one_of: [..]` / `at_least: N` / `at_most: N` / `exists: bool`
- `{path: a.b.c, contains: TEXT}` / `matches: REGEX` test a string (`case: insensitive` to ignore
  case; case counts by default); `matches` is Python's `re.search`, its pattern at most
  `PATTERN_MAX` characters with no repetition nested in a repetition, over at most `TEXT_MAX`
  characters of the value
- `{count: a.b, where: {field: V}, at_least: N, at_most: N}` counts list items (or mapping
  values) whose fields equal every `where` entry; a `where` entry may be a text test instead of
  a value: `where: {body: {contains: "BEGIN PRIVATE KEY"}}`; on a list, `before: {…}` counts only
  the items some later item matches it (`after: {…}`: some earlier one), so order can be checked
  (`{count: changes, where: {action: drain_node}, before: {action: restart_service}, at_least: 1}`)
- `{all: [..]}`, `{any: [..]}`, `{not: P}`

Paths are dot-separated keys into the state document (mapping keys only). A key that holds a dot
writes it `\\.` (a backslash `\\\\`, a space `\\ `): `hosts.store-01.disks./var.files./var/log/app\\.log`
names the file `/var/log/app.log`; `split_path` and `format_path` are the one parser and its inverse.
Every predicate lists the paths it reads (`paths()`, in document order), so a document can be held
against its kit's state model and initial state before any run (`scenario.shape`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    Tag,
    TypeAdapter,
    model_serializer,
    model_validator,
)

Scalar = Union[StrictBool, StrictInt, str, None]
#: what `lookup` answers for a path that names nothing
MISSING = object()
_KEY = r"(?:[^.\\\s]|\\[\s\S])+"
#: one or more keys joined by dots; inside a key, a backslash escapes the character after it (a dot,
#: a backslash, a space), and an unescaped space is refused (a stray one is a typo)
_PATH = rf"^{_KEY}(?:\.{_KEY})*$"
_ESCAPE = re.compile(r"\\([\s\S])|\.")
_NEEDS_ESCAPE = re.compile(r"[.\\\s]")


def _parsed(path: str) -> str:
    split_path(path)  # the one parser decides (the pattern, for editors, lets a trailing newline by)
    return path


PathText = Annotated[str, Field(pattern=_PATH), AfterValidator(_parsed)]


class _Strict(BaseModel):
    # Python's `re`, as `split_path` uses: one engine decides what a path is (`\s` differs in Rust's)
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True, regex_engine="python-re")


#: the longest pattern `matches` takes, the longest text `contains` looks for, and how much of a
#: value either reads (a regular expression is searched in time that grows with its text)
PATTERN_MAX = 200
NEEDLE_MAX = 1000
TEXT_MAX = 100_000
Case = Literal["sensitive", "insensitive"]


def _nested_repeat(pattern: str) -> bool:
    """Whether a repetition holds another unbounded one (`(a+)+`, `(\\w*x)*`): the shape whose search
    time can grow exponentially with the text."""
    from re import _parser  # type: ignore[attr-defined]  # the parser `re` itself uses

    def walk(items: Any, inside: bool) -> bool:
        for op, arg in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                _lo, hi, sub = arg
                unbounded = hi is _parser.MAXREPEAT or hi > 1
                if inside and unbounded:
                    return True
                if walk(sub, inside or unbounded):
                    return True
            elif name == "SUBPATTERN" and walk(arg[-1], inside):
                return True
            elif name == "BRANCH" and any(walk(b, inside) for b in arg[1]):
                return True
            elif name in ("ASSERT", "ASSERT_NOT") and walk(arg[1], inside):
                return True
        return False

    return walk(_parser.parse(pattern), False)


def _pattern(pattern: str | None) -> str | None:
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    if _nested_repeat(pattern):
        raise ValueError("a repetition inside a repetition (like '(a+)+') can take exponential time: write it flat")
    return pattern


Pattern = Annotated[str, Field(min_length=1, max_length=PATTERN_MAX), AfterValidator(_pattern)]
Needle = Annotated[str, Field(min_length=1, max_length=NEEDLE_MAX)]


def text_holds(value: Any, contains: str | None, matches: str | None, case: Case | None) -> bool:
    """Whether the string `value` contains `contains` or has a match of `matches` (a non-string is
    never either), read up to TEXT_MAX characters; `case: insensitive` folds case on both sides."""
    if not isinstance(value, str):
        return False
    text = value[:TEXT_MAX]
    folded = case == "insensitive"
    if contains is not None:
        return (contains.casefold() in text.casefold()) if folded else contains in text
    assert matches is not None
    return re.search(matches, text, re.IGNORECASE if folded else 0) is not None


class TextTest(_Strict):
    """A `where` entry that tests a string instead of naming its value: `{contains: T}` or
    `{matches: R}`, with `case` as on a path's condition."""

    contains: Needle | None = None
    matches: Pattern | None = None
    case: Case | None = None

    @model_validator(mode="after")
    def _one_test(self) -> "TextTest":
        if (self.contains is None) == (self.matches is None):
            raise ValueError("a text test gives one of contains, matches")
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    def holds(self, value: Any) -> bool:
        return text_holds(value, self.contains, self.matches, self.case)


#: a `where` entry: a mapping is a text test, anything else the value a field must equal
WhereValue = Annotated[
    Union[Annotated[TextTest, Tag("text")], Annotated[Scalar, Tag("value")]],
    Discriminator(lambda v: "text" if isinstance(v, (dict, TextTest)) else "value"),
]


class ValueAt(_Strict):
    """A condition on the single value at `path`."""

    path: PathText
    equals: Scalar | list[Scalar] = None
    one_of: list[Scalar] | None = None
    at_least: StrictInt | None = None
    at_most: StrictInt | None = None
    exists: StrictBool | None = None
    contains: Needle | None = None
    matches: Pattern | None = None
    case: Case | None = None

    @model_validator(mode="after")
    def _one_condition(self) -> "ValueAt":
        given = [k for k in ("one_of", "at_least", "at_most", "exists", "contains", "matches")
                 if getattr(self, k) is not None]
        if "equals" in self.model_fields_set:
            given.append("equals")
        if not given:
            raise ValueError("needs one of equals, one_of, at_least, at_most, exists, contains, matches")
        if len(given) > 1 and set(given) != {"at_least", "at_most"}:
            raise ValueError(f"give one condition, not {', '.join(sorted(given))}")
        if self.case is not None and self.contains is None and self.matches is None:
            raise ValueError("case applies to contains and matches only")
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler: Any) -> dict[str, Any]:
        # One canonical form: conditions that were not given are absent, so a stored document
        # re-validates to the same predicate (and `equals: null` stays a real condition).
        data = handler(self)
        return {k: v for k, v in data.items()
                if k == "path" or (k == "equals" and "equals" in self.model_fields_set) or (k != "equals" and v is not None)}

    def roots(self) -> set[str]:
        return {split_path(self.path)[0]}

    def paths(self) -> list[str]:
        return [self.path]


class CountOf(_Strict):
    """How many items of the list (or mapping) at `count` match `where`; of a list, with `before`
    only those followed by an item matching it, with `after` only those preceded by one."""

    count: PathText
    where: dict[str, WhereValue] = Field(default_factory=dict)
    at_least: StrictInt | None = Field(default=None, ge=0)
    at_most: StrictInt | None = Field(default=None, ge=0)
    before: dict[str, WhereValue] | None = None
    after: dict[str, WhereValue] | None = None

    @model_validator(mode="after")
    def _bounded(self) -> "CountOf":
        if self.at_least is None and self.at_most is None:
            raise ValueError("count needs at_least or at_most")
        return self

    @model_serializer(mode="wrap")
    def _order_if_given(self, handler: Any) -> dict[str, Any]:
        # `before`/`after` came after documents were hashed: absent unless given, so those hash as before
        return {k: v for k, v in handler(self).items() if k not in ("before", "after") or v is not None}

    def roots(self) -> set[str]:
        return {split_path(self.count)[0]}

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

#: Parses one stored predicate (a check's `expect`) back into its model.
PREDICATE: TypeAdapter[Any] = TypeAdapter(Predicate)


@functools.lru_cache(maxsize=4096)
def split_path(path: str) -> tuple[str, ...]:
    """The keys a path names: split at every dot but an escaped one (`\\.` is a dot inside a key,
    `\\\\` a backslash, `\\ ` a space). Raises ValueError for what is not a path (an empty key, a
    space or a trailing backslash not escaped)."""
    if re.fullmatch(_PATH, path) is None:
        raise ValueError(f"'{path}' is not a path: keys joined by dots, with a dot, backslash or space inside a key escaped")
    keys: list[str] = []
    key: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(path):
        key.append(path[pos:m.start()])
        pos = m.end()
        if m.group(1) is None:  # an unescaped dot ends a key
            keys.append("".join(key))
            key = []
        else:
            key.append(m.group(1))
    key.append(path[pos:])
    keys.append("".join(key))
    return tuple(keys)


def format_path(keys: Sequence[str]) -> str:
    """The path that names `keys` (`split_path`'s inverse)."""
    return ".".join(_NEEDS_ESCAPE.sub(lambda m: "\\" + m.group(0), k) for k in keys)


def lookup(state: Any, path: str) -> Any:
    node = state
    for key in split_path(path):
        if isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return MISSING
    return node


def missing_paths(pred: Any, state: dict[str, Any]) -> list[str]:
    """The paths `pred` reads that name nothing in `state`: for a debrief, a check that failed because
    what it reads is not there (a process killed, a file removed), not because of its value."""
    return [p for p in dict.fromkeys(pred.paths()) if lookup(state, p) is MISSING]


def holds(pred: Any, state: dict[str, Any]) -> bool:
    """Evaluate a predicate against a state document. A missing path is simply false."""
    if isinstance(pred, ValueAt):
        value = lookup(state, pred.path)
        if pred.exists is not None:
            return (value is not MISSING) is pred.exists
        if value is MISSING:
            return False
        if "equals" in pred.model_fields_set:
            return same(value, pred.equals)
        if pred.one_of is not None:
            return any(same(value, v) for v in pred.one_of)
        if pred.contains is not None or pred.matches is not None:
            return text_holds(value, pred.contains, pred.matches, pred.case)
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        return (pred.at_least is None or value >= pred.at_least) and (pred.at_most is None or value <= pred.at_most)
    if isinstance(pred, CountOf):
        items = lookup(state, pred.count)
        ordered = pred.before is not None or pred.after is not None
        if isinstance(items, dict) and not ordered:  # a mapping's values have no order
            items = list(items.values())
        if not isinstance(items, list):
            return False
        hits = [i for i, item in enumerate(items) if _matches(item, pred.where)]
        if pred.before is not None:
            later = [i for i, item in enumerate(items) if _matches(item, pred.before)]
            hits = [i for i in hits if later and later[-1] > i]
        if pred.after is not None:
            earlier = [i for i, item in enumerate(items) if _matches(item, pred.after)]
            hits = [i for i in hits if earlier and earlier[0] < i]
        n = len(hits)
        return (pred.at_least is None or n >= pred.at_least) and (pred.at_most is None or n <= pred.at_most)
    if isinstance(pred, AllOf):
        return all(holds(p, state) for p in pred.all)
    if isinstance(pred, AnyOf):
        return any(holds(p, state) for p in pred.any)
    if isinstance(pred, NotOf):
        return not holds(pred.not_, state)
    raise TypeError(f"not a predicate: {pred!r}")


def _matches(item: Any, where: dict[str, Any]) -> bool:
    """Whether a list item is a mapping whose fields pass every `where` entry."""
    return isinstance(item, dict) and all(k in item and (v.holds(item[k]) if isinstance(v, TextTest) else same(item[k], v))
                                          for k, v in where.items())


def same(a: Any, b: Any) -> bool:
    """Equality without Python's bool/int conflation (True must not equal 1)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b
