"""Fixtures the harness tests share: the forge suite (a fresh SQLite store is tests/conftest.py's)."""

from __future__ import annotations

import pytest

from assay.service.suites import SuiteBundle, resolve_suite


@pytest.fixture(scope="module")
def forge() -> SuiteBundle:
    return resolve_suite("forge")
