"""Canonical hashing: SHA-256 over RFC 8785 (JCS) canonical JSON.

One function for every hash in Assay, so a document, a world fingerprint and a final state are
hashed the same way on every machine and in every Python version.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 canonical JSON encoding of `value`."""
    return rfc8785.dumps(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `value`."""
    return sha256_hex(canonical_bytes(value))
