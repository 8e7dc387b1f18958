"""The one shape of every API refusal, `{"detail": str, "field": str | null}`, and request
validation said in it.

FastAPI answers a body or parameter its models refuse with its own list
(`{"detail": [{"loc": ["body", "agent", "literal['remote']"], …}]}`); `validation_refusal` says the
first problem in plain words instead, naming the field by its dotted place without the `body` /
`query` / `path` prefix and without pydantic's union tags (`agent`, `agent.base_url`,
`ratings.safety`), and never echoing the input (it may be large, secret, or not even encodable): a
wrong value is described by its kind only ("must be a string, not a number").

`document_refusals(schema)` rewrites a generated OpenAPI document so that every API operation's
4xx answers name the one `Refusal` component (FastAPI's `HTTPValidationError` and
`ValidationError` are gone), with 422 and 429 documented on every `/api` operation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from assay.scenario.load import PATTERN_WORDS

#: The first part of a request error's location: where in the request it is, not a field.
_SOURCES = {"body", "query", "path", "header", "cookie"}
#: A field's name as this API spells them (lowercase, digits, `_`); anything else in a location is a
#: pydantic union tag (`literal['remote']`, `ModelAgent`, `function-after[…]`, `str`).
_FIELD = re.compile(r"^[a-z_][a-z0-9_\-]*$")
_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none", "json", "url", "bytes", "decimal"}
_EXPECTED = {"int": "a whole number", "string": "a string", "bool": "true or false", "float": "a number",
             "dict": "an object", "model": "an object", "model_attributes": "an object", "list": "a list",
             "json": "valid JSON", "bytes": "bytes", "decimal": "a number", "uuid": "a UUID"}


def field_of(loc: Sequence[Any]) -> str | None:
    """The dotted field a validation error's location names (`["body", "agent", "base_url"]` →
    `agent.base_url`), list positions in brackets; None when it names the body as a whole."""
    parts = list(loc)
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _FIELD.match(part) and part not in _TYPE_TAGS:
            out += ("." if out else "") + part
    return out or None


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "something else"


def words(error: dict[str, Any]) -> str:
    """One validation error in plain words, never quoting the value sent."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind in ("json_invalid", "json_type"):
        return "the body is not valid JSON"
    if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
        expected = _EXPECTED.get(kind.rsplit("_", 1)[0])
        if expected is not None:
            return f"must be {expected}, not {_kind_of(value)}"
    if kind == "string_pattern_mismatch":
        return "not allowed here; " + PATTERN_WORDS.get(str(ctx.get("pattern")), f"it must match {ctx.get('pattern')}")
    if kind == "string_too_short":
        bound = ctx.get("min_length")
        return "must not be empty" if bound == 1 else f"must be at least {bound} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        need = "needs at least" if kind == "too_short" else "takes at most"
        return f"{need} {bound} item{'s' if bound != 1 else ''}"
    bounds = {"greater_than_equal": ("ge", "at least"), "less_than_equal": ("le", "at most"),
              "greater_than": ("gt", "greater than"), "less_than": ("lt", "less than")}
    if kind in bounds:
        key, said = bounds[kind]
        return f"must be {said} {ctx.get(key)}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    if kind == "enum":
        return f"must be one of {ctx.get('expected')}"
    if kind in ("value_error", "assertion_error"):
        message = str(error.get("msg", ""))
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        return message
    return "not a valid value here"


def _one_of(said: list[str]) -> str:
    """A union's complaints about one field as one: `must be 'remote' or an object, not a number`."""
    if all(w.startswith("must be ") for w in said):
        wanted = list(dict.fromkeys(w.removeprefix("must be ").split(", not ")[0] for w in said))
        got = next((w.split(", not ", 1)[1] for w in said if ", not " in w), None)
        return "must be " + " or ".join(wanted) + (f", not {got}" if got else "")
    return "not any of the accepted forms (see /docs)"


def validation_refusal(errors: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """The refusal body for a request its models refuse: the first field at fault and what is wrong
    with it, and which other fields are at fault. Where a union's member is an object whose own
    field is at fault (`agent.base_url`), that field is the one named, not the union's other
    members' complaints about the whole (`agent`); a union's several complaints about one field are
    one sentence."""
    by_field: dict[str | None, list[dict[str, Any]]] = {}
    for error in errors:
        by_field.setdefault(field_of(error.get("loc", ())), []).append(error)
    deeper = [f for f in by_field if f is not None]
    for name in list(by_field):
        if name is not None and any(other.startswith(name + ".") or other.startswith(name + "[") for other in deeper):
            del by_field[name]
    if not by_field:
        return {"detail": "the request is not valid", "field": None}
    field, first = next(iter(by_field.items()))
    said = list(dict.fromkeys(words(e) for e in first))
    sentence = said[0] if len(said) == 1 else _one_of(said)
    others = [name or "body" for name in list(by_field)[1:]]
    tail = f" (also at fault: {', '.join(others)})" if others else ""
    return {"detail": f"{field or 'body'}: {sentence}{tail}", "field": field}


# -- the OpenAPI document ------------------------------------------------------------------------

_REF = "#/components/schemas/Refusal"
_DESCRIPTIONS = {
    "422": "A malformed request: `detail` says what is wrong in plain words, `field` names the field "
           "(dotted, e.g. `agent.base_url`).",
    "429": "Too many requests from this caller; `Retry-After` says when to try again.",
}
REFUSAL_SCHEMA: dict[str, Any] = {
    "title": "Refusal",
    "description": "Every refusal of the API (every 4xx, request validation included): one line saying "
                   "what is wrong, and the field at fault when one is.",
    "type": "object",
    "properties": {
        "detail": {"type": "string", "title": "Detail",
                   "description": "What is wrong, in one line; never a trace, a secret or the value sent."},
        "field": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Field",
                  "description": "The field at fault (`suite`, `version`, `agent.base_url`, …), or null."},
    },
    "required": ["detail", "field"],
    "additionalProperties": False,
}


def _json_refusal(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": _REF}}}}


def document_refusals(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an OpenAPI document FastAPI generated) with every 4xx of an operation naming the
    `Refusal` component, and 422 and 429 on every `/api` operation; returned for chaining."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Refusal"] = REFUSAL_SCHEMA
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for path, item in schema.get("paths", {}).items():
        for operation in item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for code, answer in list(responses.items()):
                if str(code).startswith("4"):
                    content = answer.setdefault("content", {})
                    content["application/json"] = {"schema": {"$ref": _REF}}
            if path.startswith("/api/"):
                for code in ("422", "429"):
                    if code not in responses:
                        responses[code] = _json_refusal(_DESCRIPTIONS[code])
                if "headers" not in responses["429"]:
                    responses["429"]["headers"] = {"Retry-After": {"description": "Seconds to wait.",
                                                                   "schema": {"type": "integer"}}}
            if responses.get("422", {}).get("description") == "Validation Error":
                responses["422"]["description"] = _DESCRIPTIONS["422"]
    return schema
