"""The one JSON encoding the store writes, identical in what it accepts on every backend (a leaf:
imports nothing of assay).

A leaf, so that where a run ends (the engine, an executor's worker process) its transcript and
actions can be encoded once, exactly as the store would encode them, and written as is
(`Encoded`); `store/jsonvalue.py` is this module under the store's name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any


class Encoded(str):
    """JSON text the caller already encoded (a final state's canonical form): stored as is,
    after the same refusals, instead of being encoded a second time."""


def encoder(*, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": "), sort_keys: bool = False,
            allow_nan: bool = True) -> Callable[[Any], str]:
    """`json.JSONEncoder(**options).encode`, its C encoder built once rather than on every call
    (most of what encoding a small value costs: a tool's answer, a tool call's arguments). The
    same text, minus the circular-reference check (a value that holds itself raises RecursionError,
    not ValueError): for values built fresh by the caller, never for a value given from outside."""
    plain = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys,
                             allow_nan=allow_nan)
    if c_make_encoder is None:  # pragma: no cover - CPython without its _json accelerator
        return plain.encode
    made = c_make_encoder(None, plain.default, encode_basestring_ascii if ensure_ascii else encode_basestring,
                          None, separators[1], separators[0], sort_keys, False, allow_nan)
    join = "".join

    def encode(value: Any) -> str:
        return join(made(value, 0))

    return encode


#: `json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))`, built once
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def dumps(value: Any) -> str:
    """Compact JSON that both backends store alike, or a ValueError before anything is sent.

    PostgreSQL's JSONB refuses NaN/Infinity (not JSON), the NUL character and lone surrogates;
    SQLite would take all three. Refusing them everywhere keeps a run from storing on one
    backend and failing on the other.
    """
    if type(value) is Encoded:
        text = str(value)
        if "\\u0000" in text:  # conservative: the text may spell an escaped NUL
            raise ValueError("JSON value contains the NUL character (\\u0000), which cannot be stored")
        return text
    text = _encode(value)
    if "\\u0000" in text and _has_nul(value):
        raise ValueError("JSON value contains the NUL character (\\u0000), which cannot be stored")
    if not text.isascii():  # ASCII text holds no surrogate
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("JSON value contains a lone surrogate, which is not valid text") from None
    return text


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False
