"""The one JSON encoding the store writes, identical in what it accepts on every backend (a leaf:
imports nothing of assay).

A leaf, so that where a run ends (the engine, an executor's worker process) its transcript and
actions can be encoded once, exactly as the store would encode them, and written as is
(`Encoded`); `store/jsonvalue.py` is this module under the store's name.
"""

from __future__ import annotations

import json
from typing import Any


class Encoded(str):
    """JSON text the caller already encoded (a final state's canonical form): stored as is,
    after the same refusals, instead of being encoded a second time."""


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
