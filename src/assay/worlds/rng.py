"""Seeded randomness and a virtual clock: the only sources of chance and time a world may use.

The generator is SHA-256 in counter mode, so a seed gives the same stream on every platform and
every Python version (no `random` module algorithms, no `hash()`, no wall time).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def derive_seed(*parts: object) -> bytes:
    """A 32-byte seed from parts, e.g. (run seed, scenario id, trial). Order matters."""
    h = hashlib.sha256()
    for part in parts:
        b = str(part).encode("utf-8")
        h.update(len(b).to_bytes(4, "big"))
        h.update(b)
    return h.digest()


class Rng:
    """Deterministic random stream derived from a seed."""

    __slots__ = ("_seed", "_counter", "_pool")

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._counter = 0
        self._pool = b""

    @classmethod
    def of(cls, *parts: object) -> "Rng":
        return cls(derive_seed(*parts))

    def _u64(self) -> int:
        if len(self._pool) < 8:
            self._pool += hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
        value, self._pool = int.from_bytes(self._pool[:8], "big"), self._pool[8:]
        return value

    def below(self, n: int) -> int:
        """Uniform integer in [0, n) by rejection sampling (no modulo bias)."""
        if n <= 0 or n > 1 << 64:
            raise ValueError("n must be in 1..2**64")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            v = self._u64()
            if v < limit:
                return v % n

    def between(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + self.below(hi - lo + 1)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out

    def chance(self, numerator: int, denominator: int) -> bool:
        return self.below(denominator) < numerator


class VirtualClock:
    """Seconds since a fixed epoch; advanced only by the world, never by wall time."""

    EPOCH = dt.datetime(2026, 11, 30, 0, 0, 0, tzinfo=dt.timezone.utc)

    def __init__(self, now: int) -> None:
        self.now = now

    def advance(self, seconds: int) -> int:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        self.now += seconds
        return self.now

    @classmethod
    def iso(cls, t: int) -> str:
        return (cls.EPOCH + dt.timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%SZ")
