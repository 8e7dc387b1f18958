"""Reads never write: built-in suites are released by the store's bootstrap, once per version."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import pytest
import sqlalchemy as sa

from assay.errors import NotFound
from assay.service import releases
from assay.service.suites import SuiteBundle, builtin_case_ids, builtin_suite_names, resolve_suite
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


def test_a_run_releases_only_the_built_in_suites_that_hold_its_cases(sqlite_store: Store) -> None:
    """`assay run` passes the suite it plays (`needed`): the built-in suites that list one of its
    case ids are released (the frozen rule binds those cases from that release), the others wait
    for the next bootstrap without `needed`; the suite itself is released from the bundle."""
    store = sqlite_store
    forge = resolve_suite("forge")
    assert releases.bootstrap(store, forge) == [("forge", forge.version)]
    assert releases.bootstrap(store, forge) == []
    # a case of another built-in suite (an academy case run from its own file) releases that suite
    academy = resolve_suite("academy")
    one = SuiteBundle(academy.scenarios[0].id, None, None, academy.scenarios[:1], academy.scenarios[0].source or "")
    assert releases.bootstrap(store, one) == [("academy", academy.version)]
    rest = releases.bootstrap(store)
    assert sorted(key for key, _ in rest) == sorted(set(builtin_suite_names()) - {"forge", "academy"})
    assert _rows(store) == len(builtin_suite_names())
    # released from the bundle or loaded again: the same release
    assert releases.find_release(store, "forge", None, actor=OPERATOR)["release_hash"] == \
        releases.builtin_prepared("forge").row["release_hash"]  # type: ignore[union-attr]


@pytest.mark.parametrize("key", builtin_suite_names())
def test_the_case_ids_read_cheaply_are_those_the_suite_loads(key: str) -> None:
    assert builtin_case_ids(key) == {s.id for s in resolve_suite(key).scenarios}
