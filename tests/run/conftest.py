"""Fixtures the harness tests share: the forge suite and a fresh SQLite store per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.service.suites import SuiteBundle, resolve_suite
from assay.store import Store, open_store


@pytest.fixture(scope="module")
def forge() -> SuiteBundle:
    return resolve_suite("forge")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'assay.db'}")
    try:
        yield store
    finally:
        store.close()
