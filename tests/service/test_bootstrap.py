"""Reads never write: built-in suites are released by the store's bootstrap, once per version."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import sqlalchemy as sa

from assay.errors import NotFound
from assay.service import releases
from assay.service.suites import builtin_suite_names
from assay.store import Store


def _rows(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM suite_releases")).scalar_one())


def test_reading_releases_writes_nothing_and_bootstrap_releases_once(store: Store) -> None:
    assert releases.list_releases(store, actor=OPERATOR) == []
    try:
        releases.find_release(store, "forge", None, public=True, actor=OPERATOR)
    except NotFound:
        pass
    assert _rows(store) == 0  # the reads above released nothing

    released = releases.bootstrap(store)
    assert [key for key, _ in released] == builtin_suite_names()  # every built-in suite, forge among them
    assert "forge" in builtin_suite_names()
    assert releases.bootstrap(store) == []  # again: nothing new, nothing written
    assert _rows(store) == len(builtin_suite_names())
    assert releases.find_release(store, "forge", None, public=True, actor=OPERATOR)["suite_key"] == "forge"
