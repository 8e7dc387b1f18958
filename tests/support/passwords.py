"""Argon2id at its cheapest parameters for the web tests.

At the production parameters (`assay.service.admins`: t=3, m=64 MiB, p=4) a hash or a login costs
~0.2 s of CPU, and the web and panel tests create and log in admins a few hundred times: a large
share of `make test` on CI's two cores, spent on what no test there is about. Under `cheap_argon2`
the same code hashes and verifies with the same algorithm (Argon2id, `argon2-cffi`) at t=1, m=8 KiB,
p=1, and the unknown-email dummy hash is made at those parameters too, so a failed login costs what
a real one does. `tests/web/panel/test_admin_sessions.py` holds the production parameters with
`production_argon2`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from argon2 import PasswordHasher, Type


_production: list[tuple[PasswordHasher, str]] = []  # the module's own, kept by the first patch


@contextmanager
def cheap_argon2() -> Iterator[PasswordHasher]:
    from assay.service import admins

    cheap = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, hash_len=32, salt_len=16, type=Type.ID)
    saved = admins._HASHER, admins._DUMMY_HASH
    if not _production:
        _production.append(saved)
    admins._HASHER, admins._DUMMY_HASH = cheap, cheap.hash("dummy")
    try:
        yield cheap
    finally:
        admins._HASHER, admins._DUMMY_HASH = saved


@contextmanager
def production_argon2() -> Iterator[PasswordHasher]:
    """The production hasher and dummy hash back in place, for the tests that hold them."""
    from assay.service import admins

    inside = admins._HASHER, admins._DUMMY_HASH
    admins._HASHER, admins._DUMMY_HASH = _production[0] if _production else inside
    try:
        yield admins._HASHER
    finally:
        admins._HASHER, admins._DUMMY_HASH = inside
