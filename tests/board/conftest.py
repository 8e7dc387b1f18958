"""The board tests' shared fixture: a store with the small `mini` suite released (two forge cases,
two reps), an account `alice` with a public handle, and room for many submissions."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.service import platform_config, releases
from assay.service.actors import OPERATOR
from assay.store import Store

from ._support import account, mini_suite


@pytest.fixture
def mini(store: Store, tmp_path: Path) -> Store:
    releases.release_path(store, str(mini_suite(tmp_path / "mini")), actor=OPERATOR)
    account(store, "alice", "Alice")
    platform_config.set_value(store, "submission_cap", {"max_per_account_per_version": 10}, actor=OPERATOR)
    return store
