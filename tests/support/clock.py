"""The store's clock, injected: `assay.store.schema.utcnow` is the one clock every `created_at`,
lease and heartbeat is read from; tests replace it wherever it was imported instead of sleeping."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest


def set_store_clock(monkeypatch: pytest.MonkeyPatch, clock: Callable[[], datetime]) -> None:
    """Make `clock` the store's clock in every loaded `assay` module (and so in any loaded later,
    which imports it from `assay.store.schema`)."""
    from assay.store import schema

    real = schema.utcnow
    for module in list(sys.modules.values()):  # every `from assay.store.schema import utcnow`
        if getattr(module, "__name__", "").startswith("assay") and getattr(module, "utcnow", None) is real:
            monkeypatch.setattr(module, "utcnow", clock)


class ManualClock:
    """A clock that moves only when told: each reading is one microsecond after the last (so no two
    rows tie), and `advance(seconds)` stands for time passing."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
