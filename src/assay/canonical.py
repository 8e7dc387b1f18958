"""Canonical hashing: SHA-256 over RFC 8785 (JCS) canonical JSON.

One function for every hash in Assay, so a document, a world fingerprint and a final state are
hashed the same way on every machine and in every Python version.

For the common case — no floats, integers within ±(2^53−1), mapping keys free of characters
outside the Basic Multilingual Plane — the standard library's sorted, compact JSON is byte for
byte the RFC 8785 form (same escapes, same code-unit key order), and about twenty times faster
than the pure-Python reference encoder; anything else goes through `rfc8785` itself. A property
test holds the two paths equal.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

_MAX_SAFE_INT = 2**53 - 1


def _plain(value: Any) -> bool:
    """True when stdlib JSON encoding is already canonical for `value`."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int:
            if -_MAX_SAFE_INT <= v <= _MAX_SAFE_INT:
                continue
            return False
        if t is dict:
            for k in v:
                if type(k) is not str or not (k.isascii() or (max(k) <= "\uffff" and not any("\ud800" <= c <= "\udfff" for c in k))):
                    return False
            push(v.values())
            continue
        if t is list:
            push(v)
            continue
        return False
    return True


#: `json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)`, built once
_encode_plain = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False).encode
#: `json.dumps(key, ensure_ascii=False)` for a member's key
_encode_key = json.JSONEncoder(ensure_ascii=False).encode


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 canonical JSON encoding of `value`."""
    if _plain(value):
        try:
            return _encode_plain(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a string value: let the reference decide
            pass
    return rfc8785.dumps(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `value`."""
    return sha256_hex(canonical_bytes(value))


class SharedSections:
    """`canonical_bytes` for mappings that share most of their top-level values with one `base`.

    Every run of a case forks the same initial state, and the sections no tool writes stay the
    very objects of that state (`EstateKit.fork`); encoding them again for every final-state hash
    is most of the cost of the hash. This encoder keeps each such section's canonical bytes the
    first time it meets it and reuses them whenever a value *is* (by identity) the base's, joining
    the members in canonical key order. The bytes are exactly `canonical_bytes(value)` (a property
    test holds them equal); mappings with non-ASCII keys, where RFC 8785's UTF-16 key order and
    Python's differ, are encoded whole. The base must not change after it is given (the initial
    state is shared by every fork and never written).
    """

    def __init__(self, base: dict[str, Any]) -> None:
        self._base = base
        self._bytes: dict[str, bytes] = {}

    def __call__(self, value: Any) -> bytes:
        if type(value) is not dict or not all(type(k) is str and k.isascii() for k in value):
            return canonical_bytes(value)
        base, cache = self._base, self._bytes
        parts = []
        for key in sorted(value):
            member = value[key]
            if key in base and base[key] is member:
                encoded = cache.get(key)
                if encoded is None:
                    encoded = cache[key] = canonical_bytes(member)
            else:
                encoded = canonical_bytes(member)
            parts.append(_encode_key(key).encode("utf-8") + b":" + encoded)
        return b"{" + b",".join(parts) + b"}"
