"""`service.compare` and the board's per-case counts, in process, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.cli.board import COMPARE_METRICS
from assay.errors import Conflict, Invalid, NotFound, http_status
from assay.service import releases
from assay.service.actors import OPERATOR
from assay.service.board import board, case_counts, case_rates, entry_rank
from assay.service.compare import METRICS, compare
from assay.store import Store

from ._support import account, flaky, set_version, submit


def test_case_counts_are_the_runs_that_count_case_by_case(mini: Store) -> None:
    sid = submit(mini, agent=flaky("CrashOnce"))
    cases = case_counts(mini, [sid])[sid]
    assert [c["case_id"] for c in cases] == ["forge-all-quiet", "forge-wrong-fix"]  # release order
    assert [c["n_runs"] for c in cases] == [2, 2]  # the crashed run counts, as a failure
    assert sorted(c["n_passed"] for c in cases) == [1, 2]
    assert sorted(c["consistent"] for c in cases) == [False, True]
    rates = case_rates(cases, "pass_rate")
    assert sorted(rates.values()) == [0.5, 1.0]
    assert sorted(case_rates(cases, "consistency").values()) == [0.0, 1.0]
    assert case_counts(mini, []) == {}


def test_compare_pairs_cases_and_refuses_with_domain_errors(mini: Store, tmp_path: Path) -> None:
    good = submit(mini)
    idle = submit(mini, agent="reference:idle")
    found = compare(mini, good, idle, actor=OPERATOR)
    assert (found["difference"], found["p_value"], found["n_cases"], found["min_p"]) == (1.0, 0.5, 2, 0.5)
    assert found["too_few_cases"] and "2 cases" in found["note"]
    assert [c["case_id"] for c in found["cases"]] == ["forge-all-quiet", "forge-wrong-fix"]

    with pytest.raises(NotFound) as missing:
        compare(mini, "f" * 32, idle, actor=OPERATOR)
    assert http_status(missing.value) == 404 and missing.value.field == "submission"
    with pytest.raises(Invalid) as metric:
        compare(mini, good, idle, metric="speed", actor=OPERATOR)
    assert metric.value.field == "metric" and "--" not in str(metric.value)

    root = tmp_path / "mini"
    set_version(root, "1.1")
    releases.release_path(mini, str(root), actor=OPERATOR)
    newer = submit(mini, agent="reference:idle")
    with pytest.raises(Conflict, match="different suite versions") as versions:
        compare(mini, good, newer, actor=OPERATOR)
    assert http_status(versions.value) == 409 and "mini 1.0" in str(versions.value) and "mini 1.1" in str(versions.value)


def test_the_cli_offers_every_metric_the_service_compares() -> None:
    assert COMPARE_METRICS == METRICS


def test_entry_rank_is_the_board_rank(mini: Store) -> None:
    account(mini, "bob", "Bob")
    ranked = submit(mini, publish=True)
    other = submit(mini, account="bob", agent="reference:hasty", publish=True)
    unlisted = submit(mini)
    shown = {e["submission_id"]: e["rank"] for e in board(mini, "mini", actor=OPERATOR)["entries"]}
    assert {sid: entry_rank(mini, sid) for sid in (ranked, other, unlisted)} == {**shown, unlisted: None}
