"""The board tests' shared fixture: a store with the small `mini` suite released (two forge cases,
two reps), an account `alice` with a public handle, and room for many submissions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from assay.service import platform_config, releases
from assay.service.actors import OPERATOR
from assay.store import Store

from tests.support.clock import set_store_clock

from ._support import account, mini_suite


@pytest.fixture
def mini(store: Store, tmp_path: Path) -> Store:
    releases.release_path(store, str(mini_suite(tmp_path / "mini")), actor=OPERATOR)
    account(store, "alice", "Alice")
    platform_config.set_value(store, "submission_cap", {"max_per_account_per_version": 10}, actor=OPERATOR)
    return store


@pytest.fixture
def clock_behind(monkeypatch: pytest.MonkeyPatch) -> Callable[[], datetime]:
    """The store's clock (`assay.store.schema.utcnow`, the one every `created_at` comes from) set two
    seconds behind the database's; returns that clock. Which era is in force is decided in SQL by the
    database's CURRENT_TIMESTAMP, which SQLite counts in whole seconds: an era that begins "now" by
    this clock has begun by the database's at once, where the real clock would need a second's wait."""
    from assay.store import schema

    real = schema.utcnow

    def behind() -> datetime:
        return real() - timedelta(seconds=2)

    set_store_clock(monkeypatch, behind)
    return behind
