"""Refusals located at their own path inside a document (leaf).

A validator that finds several problems (two tickets with one id, an alert on a host that does not
exist, a check id used twice) raises them together as one pydantic `ValidationError`, each at the
path of the item at fault relative to the field or model it validates; pydantic prefixes the path
of the field being validated, so every problem comes out as its own line naming where it is
(`world.tickets[1].id: duplicate ticket id 'T-1' (first at tickets[0])`) instead of one line for
the first of them. Used by the scenario models (`scenario/`) and the world specs (`worlds/`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

#: The pydantic error type of a located problem (`scenario.load.describe_errors` prints its message as is).
KIND = "assay_problem"

Loc = tuple[str | int, ...]


def at(loc: Loc, message: str, value: Any = None) -> InitErrorDetails:
    """One problem at `loc` (relative to what is being validated)."""
    # the message is passed as context, never as the template, so braces in a value stay as written
    return InitErrorDetails(type=PydanticCustomError(KIND, "{message}", {"message": message}), loc=loc, input=value)


def refuse(found: Sequence[InitErrorDetails], title: str = "document") -> None:
    """Raise every problem found at once; nothing when there is none."""
    if found:
        raise ValidationError.from_exception_data(title, list(found))


def again(exc: ValidationError) -> list[InitErrorDetails]:
    """The problems `exc` holds, to raise once more together with others (same paths and words)."""
    found = []
    for e in exc.errors(include_url=False):
        ctx = dict(e.get("ctx") or {})
        try:  # one of pydantic's own kinds, rebuilt from its context
            ValidationError.from_exception_data("", [InitErrorDetails(type=e["type"], loc=(), input=None, ctx=ctx)])
            kind: Any = e["type"]
        except (KeyError, TypeError):
            kind = PydanticCustomError(e["type"], "{message}", {**ctx, "message": e["msg"]})
        found.append(InitErrorDetails(type=kind, loc=e["loc"], input=e["input"], ctx=ctx))
    return found


def checked(validate: Callable[[], Any], found: Sequence[InitErrorDetails], title: str = "document") -> Any:
    """`validate()`'s result, or every problem it raised together with those `found` beside it
    (a wrap validator's cross-references, checked on the raw document so that they come out even
    when a field is invalid)."""
    try:
        result = validate()
    except ValidationError as exc:
        if not found:
            raise
        refuse([*again(exc), *found], title)
        raise
    refuse(found, title)
    return result


def references(raw: Any, field: str, key: str, known: Iterable[str] | None, what: str,
               among: str | None = None) -> list[InitErrorDetails]:
    """Each item of the raw list `raw[field]` whose `key` names something not in `known`, located
    at it (`alerts[0].host: unknown host 'web-99' (nearest: 'web-01')`). Read from the raw document,
    so a reference is checked even when something else in it is invalid; an item or value of the
    wrong type is left to the field's own validation, and nothing is checked when `known` is None."""
    items = raw.get(field) if isinstance(raw, dict) else None
    if known is None or not isinstance(items, list):
        return []
    names = set(known)
    return [at((field, i, key), unknown(what, item[key], names, among), item[key]) for i, item in enumerate(items)
            if isinstance(item, dict) and isinstance(item.get(key), str) and item[key] not in names]


def names(raw: Any, field: str, key: str) -> set[str] | None:
    """The `key` of every item of the raw list `raw[field]` (None when it is not a list)."""
    items = raw.get(field) if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return None
    return {item[key] for item in items if isinstance(item, dict) and isinstance(item.get(key), str)}


def repeats(items: Sequence[Any], where: str, what: str, key: str | None = None,
            value: Callable[[Any], Any] | None = None, prefix: Loc = ()) -> list[InitErrorDetails]:
    """Each item whose identity repeats an earlier item's, located at its `key` (or at the item),
    naming the first: `[3].id: duplicate ticket id 'T-1' (first at tickets[0])`.

    `where` is the list's own name, `what` what the identity is ("ticket id"); the identity is the
    item's attribute `key`, or `value(item)`, or the item itself; `prefix` goes before the index
    (the key of a mapping of lists)."""
    first: dict[Any, int] = {}
    found = []
    for i, item in enumerate(items):
        ident = value(item) if value is not None else getattr(item, key) if key is not None else item
        if ident in first:
            found.append(at((*prefix, i, key) if key is not None else (*prefix, i),
                            f"duplicate {what} '{ident}' (first at {where}[{first[ident]}])", ident))
        else:
            first[ident] = i
    return found


def once(field: str, what: str, key: str | None = None) -> Any:
    """A pydantic field validator for a model: the list `field` holds each identity once (`repeats`);
    assign it to a class attribute (`_services_once = once("services", "service name", "name")`)."""
    def check(cls: Any, items: list[Any]) -> list[Any]:
        refuse(repeats(items, field, what, key))
        return items
    return field_validator(field)(classmethod(check))


def unknown(what: str, name: str, known: Iterable[str], among: str | None = None, shown: int = 8) -> str:
    """`unknown host 'web-99' (nearest: 'web-01')`, or what there is when nothing is close; with
    `among`: `skill 'x' is not on the character's sheet (known: …)`."""
    options = sorted(known)
    close = difflib.get_close_matches(name, options, n=1)
    if close:
        hint = f"nearest: '{close[0]}'"
    elif not options:
        hint = f"there is no {what}"
    elif len(options) <= shown:
        hint = "known: " + ", ".join(options)
    else:
        hint = f"none of the {len(options)} is close"
    said = f"{what} '{name}' is not {among}" if among else f"unknown {what} '{name}'"
    return f"{said} ({hint})"
