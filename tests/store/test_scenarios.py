"""Scenario versions: numbered per case, idempotent by content hash, and frozen checks stay put."""

from __future__ import annotations

from datetime import timezone

import pytest
import sqlalchemy as sa

from assay.errors import BadInput
from assay.store import Store
from assay.store.runs_repo import RunsRepo
from assay.store.rows import NewScenario

from ._factories import scenario


def _released(store: Store, *args: str, **kwargs: object) -> dict[str, object]:
    """Record a scenario version and pin it in a release (the frozen rule binds from then on)."""
    from assay.store.board_schema import release_scenarios, suite_releases
    from assay.store.schema import utcnow

    made = scenario(*args, **kwargs)  # type: ignore[arg-type]
    version = RunsRepo(store).add_scenario_version(**made)
    with store.engine.begin() as conn:
        key = f"s-{made['content_hash'][:12]}"
        release_id = conn.execute(sa.insert(suite_releases).values(
            suite_key=key, version="1.0", title=key, language="en", visibility="public", reps_per_scenario=1,
            baselines=[], known_limitations=[], card="", document={}, release_hash="0" * 64, builtin=False,
            created_at=utcnow())).inserted_primary_key[0]
        conn.execute(sa.insert(release_scenarios).values(
            release_id=release_id, ordinal=0, case_id=made["case_id"], scenario_hash=made["content_hash"],
            scenario_version=version))
    return made


def _count(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM scenario_versions")).scalar_one())


def test_first_version_is_one_and_reads_back(store: Store) -> None:
    kwargs = scenario(document={"id": "estate-001", "checks": [{"id": "web_up", "weight": 3}]})
    assert RunsRepo(store).add_scenario_version(**kwargs) == 1
    row = RunsRepo(store).scenario_by_hash(kwargs["content_hash"])
    assert row is not None
    assert {k: getattr(row, k) for k in kwargs} == kwargs
    assert row.version == 1
    assert row.created_at.tzinfo is not None
    assert row.created_at.utcoffset() == timezone.utc.utcoffset(None)


def test_same_hash_is_idempotent(store: Store) -> None:
    kwargs = scenario()
    assert RunsRepo(store).add_scenario_version(**kwargs) == 1
    assert RunsRepo(store).add_scenario_version(**kwargs) == 1
    assert _count(store) == 1


def test_unfrozen_case_with_changed_checks_gets_version_two(store: Store) -> None:
    assert RunsRepo(store).add_scenario_version(**scenario(body="v1", checks="a")) == 1
    assert RunsRepo(store).add_scenario_version(**scenario(body="v2", checks="b")) == 2
    assert [r.version for r in RunsRepo(store).scenario_versions("estate-001")] == [1, 2]


def test_frozen_case_with_changed_checks_is_refused_and_nothing_is_stored(store: Store) -> None:
    _released(store, body="v1", checks="a", frozen_on="2026-01-15")
    changed = scenario(body="v2", checks="b", frozen_on="2026-01-15")
    with pytest.raises(BadInput) as caught:
        RunsRepo(store).add_scenario_version(**changed)
    assert caught.value.where == "estate-001"
    assert caught.value.message == (
        "the case is frozen (since 2026-01-15) and its checks changed; "
        "a changed check needs a new case id"
    )
    assert _count(store) == 1
    assert RunsRepo(store).scenario_by_hash(changed["content_hash"]) is None


def test_a_draft_binds_nothing_until_it_is_released(store: Store) -> None:
    # run ad hoc (recorded for replay), a frozen draft's checks may still change...
    RunsRepo(store).add_scenario_version(**scenario(body="v1", checks="a", frozen_on="2026-01-15"))
    assert RunsRepo(store).add_scenario_version(**scenario(body="v2", checks="b", frozen_on="2026-01-15")) == 2
    # ...until a release pins one of its versions: from then on they are frozen
    _released(store, body="v3", checks="c", frozen_on="2026-01-15")
    with pytest.raises(BadInput, match="is frozen"):
        RunsRepo(store).add_scenario_version(**scenario(body="v4", checks="a", frozen_on="2026-01-15"))
    assert RunsRepo(store).add_scenario_version(**scenario(body="v4", checks="c", frozen_on="2026-01-15")) == 4


def test_frozen_rule_holds_even_if_the_new_document_drops_frozen_on(store: Store) -> None:
    _released(store, body="v1", checks="a", frozen_on="2026-01-15")
    with pytest.raises(BadInput, match="frozen"):
        RunsRepo(store).add_scenario_version(**scenario(body="v2", checks="b", frozen_on=None))
    assert _count(store) == 1


def test_frozen_case_may_change_anything_but_its_checks(store: Store) -> None:
    RunsRepo(store).add_scenario_version(**scenario(body="v1", checks="a", frozen_on="2026-01-15"))
    assert RunsRepo(store).add_scenario_version(**scenario(body="v2", checks="a", frozen_on="2026-01-15")) == 2


def test_freezing_a_case_for_the_first_time_is_allowed(store: Store) -> None:
    RunsRepo(store).add_scenario_version(**scenario(body="v1", checks="a"))
    assert RunsRepo(store).add_scenario_version(**scenario(body="v2", checks="b", frozen_on="2026-02-01")) == 2


def test_a_new_case_id_is_the_way_to_change_frozen_checks(store: Store) -> None:
    RunsRepo(store).add_scenario_version(**scenario("estate-001", checks="a", frozen_on="2026-01-15"))
    assert RunsRepo(store).add_scenario_version(**scenario("estate-001b", checks="b")) == 1


def test_versions_are_counted_per_case(store: Store) -> None:
    RunsRepo(store).add_scenario_version(**scenario("a-case", body="1"))
    RunsRepo(store).add_scenario_version(**scenario("a-case", body="2"))
    assert RunsRepo(store).add_scenario_version(**scenario("b-case", body="1")) == 1


def test_latest_scenarios_gives_the_newest_version_of_each_case(store: Store) -> None:
    RunsRepo(store).add_scenario_version(**scenario("b-case", body="1"))
    RunsRepo(store).add_scenario_version(**scenario("a-case", body="1"))
    RunsRepo(store).add_scenario_version(**scenario("a-case", body="2"))
    RunsRepo(store).add_scenario_version(**scenario("a-case", body="3"))
    latest = RunsRepo(store).latest_scenarios()
    assert [(r.case_id, r.version) for r in latest] == [("a-case", 3), ("b-case", 1)]
    assert latest[0].document == {"id": "a-case", "body": "3"}


def test_reads_of_unknown_things_are_empty(store: Store) -> None:
    assert RunsRepo(store).scenario_by_hash("0" * 64) is None
    assert RunsRepo(store).scenario_versions("nope") == []
    assert RunsRepo(store).latest_scenarios() == []


def test_a_content_hash_cannot_change_case(store: Store) -> None:
    kwargs = scenario("estate-001")
    RunsRepo(store).add_scenario_version(**kwargs)
    with pytest.raises(BadInput, match="already stored as case 'estate-001'"):
        RunsRepo(store).add_scenario_version(**{**kwargs, "case_id": "estate-002"})


def test_frozen_on_must_be_a_date(store: Store) -> None:
    with pytest.raises(BadInput, match="YYYY-MM-DD"):
        RunsRepo(store).add_scenario_version(**scenario(frozen_on="15/01/2026"))
    assert _count(store) == 0


def test_several_versions_are_recorded_all_or_none(store: Store) -> None:
    _released(store, "estate-001", body="v1", checks="a", frozen_on="2026-01-15")
    before = _count(store)
    fresh = scenario("estate-002", body="v1", checks="a")
    refused = scenario("estate-001", body="v2", checks="b", frozen_on="2026-01-15")
    with pytest.raises(BadInput, match="is frozen"):
        RunsRepo(store).add_scenario_versions([NewScenario(**fresh), NewScenario(**refused)])
    assert _count(store) == before  # the acceptable one was not stored either
    assert RunsRepo(store).add_scenario_versions(
        [NewScenario(**fresh), NewScenario(**scenario("estate-001", body="v2", checks="a", frozen_on="2026-01-15"))]) == [1, 2]
