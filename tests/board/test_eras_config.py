"""Platform config with history, and measurement eras stamped once (issue 3, parts 3 and 5)."""

from __future__ import annotations

from assay.service.actors import OPERATOR

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from assay.errors import BadInput
from assay.service import platform_config as pc
from assay.service import submissions
from assay.service.board import board
from assay.store import Store

from ._support import row_counts, submit


def _iso(delta: timedelta) -> str:
    return (datetime.now(timezone.utc) + delta).isoformat()


# -- config -----------------------------------------------------------------------------------


def test_every_key_has_a_default(store: Store) -> None:
    assert pc.get(store, "academy_eval_safety_variance") == {"unstable_range_threshold": 0.2}
    assert pc.get(store, "academy_eval_participation") == {"min_player_messages": 1, "min_actions_per_turn": 0}
    assert pc.get(store, "submission_cap") == {"max_per_account_per_version": 3}
    assert pc.get(store, "academy_eval_measurement_era") == {"eras": []}
    assert pc.describe(store, "submission_cap")["default"] is True


def test_a_new_value_is_a_new_row_and_the_value_in_force_is_the_latest_before_a_moment(store: Store) -> None:
    pc.set_value(store, "academy_eval_safety_variance", {"unstable_range_threshold": 0.3}, actor=OPERATOR)
    between = datetime.now(timezone.utc)
    pc.set_value(store, "academy_eval_safety_variance", {"unstable_range_threshold": 0.1}, actor=OPERATOR)
    assert pc.get(store, "academy_eval_safety_variance") == {"unstable_range_threshold": 0.1}
    assert pc.get(store, "academy_eval_safety_variance", at=between) == {"unstable_range_threshold": 0.3}
    assert pc.get(store, "academy_eval_safety_variance", at=between - timedelta(days=1)) == {
        "unstable_range_threshold": 0.2}
    described = pc.describe(store, "academy_eval_safety_variance")
    assert [h["value"]["unstable_range_threshold"] for h in described["history"]] == [0.3, 0.1]
    assert row_counts(store)["platform_config"] == 2


@pytest.mark.parametrize(("key", "value", "message"), [
    ("academy_eval_safety_variance", {"unstable_range_threshold": "0.2"}, "unstable_range_threshold"),
    ("academy_eval_safety_variance", {"unstable_range_threshold": 2}, "less than or equal to 1"),
    ("academy_eval_participation", {"min_player_messages": 1, "typo": 1}, "unknown field"),
    ("submission_cap", {"max_per_account_per_version": 0}, "greater than or equal to 1"),
    ("submission_cap", [3], "must be a JSON object"),
    ("no_such_key", {}, "unknown config key"),
    ("academy_eval_measurement_era", {"eras": []}, "assay era add"),
])
def test_bad_config_values_are_refused_and_store_nothing(store: Store, key: str, value: object, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        pc.set_value(store, key, value, actor=OPERATOR)
    assert row_counts(store)["platform_config"] == 0


# -- eras -------------------------------------------------------------------------------------



def test_entries_are_stamped_once_and_old_eras_are_flagged_not_hidden(
        mini: Store, clock_behind: Callable[[], datetime]) -> None:
    before_any = submit(mini, publish=True)
    assert submissions.results(mini, before_any, actor=OPERATOR)["measurement_era"] is None
    assert submissions.results(mini, before_any, actor=OPERATOR)["measurement_era_is_current"] is True

    # "now" by the store's clock, already past by the database's (see `clock_behind`)
    pc.add_era(mini, "2026-a", clock_behind().isoformat(), "first era boundary", actor=OPERATOR)
    first = submit(mini, publish=True)
    pc.add_era(mini, "2026-b", clock_behind().isoformat(), "a scoring fix", actor=OPERATOR)
    second = submit(mini, publish=True)

    shown = {e["submission_id"]: e for e in board(mini, "mini", actor=OPERATOR)["entries"]}
    assert (shown[before_any]["measurement_era"], shown[before_any]["measurement_era_is_current"]) == (None, False)
    assert (shown[first]["measurement_era"], shown[first]["measurement_era_is_current"]) == ("2026-a", False)
    assert (shown[second]["measurement_era"], shown[second]["measurement_era_is_current"]) == ("2026-b", True)
    assert all(e["rank"] == 1 for e in shown.values())  # flagged, never reclassified or hidden

    # An era that has not begun yet is not current, and does not restamp anything.
    pc.add_era(mini, "2027", _iso(timedelta(days=365)), "planned harness upgrade", actor=OPERATOR)
    assert [e["name"] for e in pc.eras(mini) if e["current"]] == ["2026-b"]
    third = submit(mini, publish=True)
    assert submissions.results(mini, third, actor=OPERATOR)["measurement_era"] == "2026-b"
    assert submissions.results(mini, first, actor=OPERATOR)["measurement_era"] == "2026-a"
    assert [e["name"] for e in pc.get(mini, "academy_eval_measurement_era")["eras"]] == ["2026-a", "2026-b", "2027"]


def test_an_era_cannot_be_back_dated_before_a_finalised_submission(mini: Store) -> None:
    made = submit(mini, publish=True)
    with pytest.raises(BadInput, match="before a submission already finalised") as refused:
        pc.add_era(mini, "late", _iso(-timedelta(days=1)), "a fix found late", actor=OPERATOR)
    assert refused.value.field == "from"
    assert pc.eras(mini) == [] and row_counts(mini)["measurement_eras"] == 0
    assert submissions.results(mini, made, actor=OPERATOR)["measurement_era"] is None
    pc.add_era(mini, "late", _iso(timedelta(0)), "a fix found late", actor=OPERATOR)  # from now on: fine
    assert [e["name"] for e in pc.eras(mini)] == ["late"]


def test_era_boundaries_only_move_forward(mini: Store) -> None:
    pc.add_era(mini, "one", "2026-01-01", "start", actor=OPERATOR)
    with pytest.raises(BadInput, match="must begin after the latest boundary"):
        pc.add_era(mini, "zero", "2025-01-01", "earlier", actor=OPERATOR)
    with pytest.raises(BadInput, match="already exists"):
        pc.add_era(mini, "one", "2026-02-01", "again", actor=OPERATOR)
    with pytest.raises(BadInput, match="no time zone"):
        pc.add_era(mini, "two", "2026-03-01T00:00:00", "naive", actor=OPERATOR)
    with pytest.raises(BadInput, match="not an ISO 8601"):
        pc.add_era(mini, "two", "next tuesday", "vague", actor=OPERATOR)
    with pytest.raises(BadInput, match="needs a reason"):
        pc.add_era(mini, "two", "2026-03-01", " ", actor=OPERATOR)
    assert [e["name"] for e in pc.eras(mini)] == ["one"]
    assert pc.eras(mini)[0]["from"] == "2026-01-01T00:00:00+00:00"
