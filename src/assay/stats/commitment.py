"""Seed commitments: a run's secret seed, bound without being shown (issue 23, item 2).

A submission's runs are played on secret seeds (an agent that knew its seed could know its world).
The public export cannot show them, yet anyone must be able to hold the platform to them later. So
every planned run gets a random *salt* (32 bytes from `secrets`, as 64 lowercase hex digits),
stored beside the plan in the transaction that stores it (`seed_salts`), and what is published is
the run's *commitment*:

    commitment = SHA-256( b"assay-seed-commitment/1:" + <seed> + b":" + <salt> )   (lowercase hex)

where `<seed>` is the seed's decimal ASCII text (a leading "-" when negative, no leading zeros) and
`<salt>` the salt's 64 hex digits, ASCII. The message is unambiguous (the seed is digits, the salt
a fixed 64 hex digits, the two joined by ":" after a versioned prefix), so no other (seed, salt)
gives the same bytes. Without the salt the seed cannot be guessed from the commitment (2^256
salts); with them anyone can *open* it: the owner sees seed and salt (`assay results SUBMISSION
--json`, `GET /api/submissions/{id}`), and whoever is shown the pair checks `opens(commitment,
seed, salt)`, or by hand:

    printf 'assay-seed-commitment/1:%s:%s' SEED SALT | sha256sum
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

PREFIX = b"assay-seed-commitment/1:"
SALT_BYTES = 32
_SALT = re.compile(r"^[0-9a-f]{64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def new_salt() -> str:
    """A fresh salt: 32 random bytes from the operating system's CSPRNG, as 64 lowercase hex digits."""
    return secrets.token_hex(SALT_BYTES)


def message(seed: int, salt: str) -> bytes:
    """The bytes a commitment hashes (see the module docstring). `seed` an int (not a bool), `salt`
    64 lowercase hex digits; anything else is a ValueError."""
    if type(seed) is not int:
        raise ValueError(f"a seed is an integer, not {type(seed).__name__}")
    if not isinstance(salt, str) or not _SALT.match(salt):
        raise ValueError("a salt is 64 lowercase hex digits")
    return PREFIX + str(seed).encode("ascii") + b":" + salt.encode("ascii")


def seed_commitment(seed: int, salt: str) -> str:
    """The commitment to `seed` under `salt`: SHA-256 of `message(seed, salt)`, lowercase hex."""
    return hashlib.sha256(message(seed, salt)).hexdigest()


def opens(commitment: str, seed: int, salt: str) -> bool:
    """Whether (`seed`, `salt`) opens `commitment`. Never raises: a malformed value opens nothing."""
    if not isinstance(commitment, str) or not _HEX64.match(commitment):
        return False
    try:
        mine = seed_commitment(seed, salt)
    except ValueError:
        return False
    return hmac.compare_digest(mine, commitment)
