"""Every board figure from per-run facts (`stats.board`), checked against hand counts; each
interval built from the figure's own per-case parts, through the one adapter per kind of figure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats import board as figures
from assay.stats.board import PlannedRunFacts
from assay.stats.ranks import statistical_ranks


def run(case: str, slot: int, *, passed: bool = False, false_success: bool = False, status: str = "completed",
        win_total: int = 0, win_met: int = 0, **extra: Any) -> PlannedRunFacts:
    return PlannedRunFacts(case_id=case, slot=slot, status=status, n_checks=1, passed=passed,
                           false_success=false_success, swept=True, player_messages=3, actions=3,
                           min_player_messages=0, min_actions_per_turn=0.0,
                           win_total=win_total, win_met=win_met, **{"ranked_eligible": True, **extra})


def _issue_board() -> list[PlannedRunFacts]:
    """The issue's example: six cases, one with 30 of 30 win conditions met, five with 0 of 3."""
    runs = [run("big", 0, passed=True, win_total=30, win_met=30)]
    runs += [run(f"small-{i}", i + 1, win_total=3, win_met=0) for i in range(5)]
    return runs


def test_objective_met_rate_is_sum_met_over_sum_total_and_its_interval_gets_its_per_case_parts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[tuple[float, float]]] = []
    real = figures.rate_interval

    def spy(parts: Any) -> Any:
        seen.append(list(parts))
        return real(parts)

    monkeypatch.setattr(figures, "rate_interval", spy)
    found = figures.entry_figures(_issue_board())
    assert found["objective_met_rate"] == round(30 / 45, 4) == 0.6667
    assert found["win_total"] == 45 and found["win_met"] == 30
    # pass_rate, false_success_rate, objective_met_rate: each its own (numerator, denominator) per case
    assert seen == [[(1, 1)] + [(0, 1)] * 5, [(0, 1)] * 6, [(30, 30)] + [(0, 3)] * 5]


def test_a_hand_counted_entry() -> None:
    runs = [
        run("a", 0, passed=True), run("a", 1, passed=True),  # consistent, 2/2
        run("b", 2, passed=True), run("b", 3, false_success=True, win_total=2, win_met=1),  # mixed
        run("c", 4, status="crashed"), run("c", 5, status=None),  # a crash and a run never recorded
    ]
    found = figures.entry_figures(runs)
    # the crash is recorded and scored: a failure in every denominator; the run never recorded is not scored
    assert (found["n_planned"], found["n_recorded"], found["n_scored"], found["n_runs"]) == (6, 5, 5, 5)
    assert (found["n_passed"], found["n_false_successes"], found["n_cases"], found["n_consistent_cases"]) == (3, 1, 3, 2)
    assert (found["pass_rate"], found["consistency"], found["false_success_rate"]) == (0.6, 0.6667, 0.2)
    assert found["objective_met_rate"] == 0.5 and found["status"] == "incomplete"
    assert found["leaderboard_class"] == "platform" and found["facilitator_models"] == []
    for rate in figures.RATES:
        lo, hi = found[f"{rate}_ci"]
        assert 0.0 <= lo <= hi <= 1.0
    assert figures.ranking(found) == (False, None)  # incomplete: never ranked


def test_a_trait_entry_keeps_every_key_trait_figures_gives_and_ranks_on_the_composite() -> None:
    runs = [run("a", 0, passed=True), run("b", 1, passed=True)]
    judge = {"model": "rules", "prompt_hash": "f00d"}
    traits = {"composite": 0.75, "traits": {"planning": 0.75}, "safety": {"candour": 1.0}, "stability": "stable",
              "trait_n": {"planning": 2}, "composite_by_case": {"a": 0.5, "b": 1.0}, "judge": judge}
    found = figures.entry_figures(runs, traits, judge)
    assert "composite_by_case" not in found and found["trait_n"] == {"planning": 2}
    assert found["judge_is_pinned"] is True and found["composite_ci"][0] <= 0.75 <= found["composite_ci"][1]
    fields = figures.trait_fields(found)
    assert fields[:4] == ["composite", "composite_ci", "traits", "safety"] and fields[-1] == "trait_n"
    ranked, interval = figures.ranking(found)
    assert ranked and interval == found["composite_ci"]
    other = figures.entry_figures(runs, traits, {"model": "another", "prompt_hash": "f00d"})
    assert figures.ranking(other) == (False, None)  # another judge: shown, never ranked


def test_the_order_key_sorts_as_the_board_lists() -> None:
    best = figures.entry_figures([run("a", 0, passed=True), run("b", 1, passed=True)])
    worse = figures.entry_figures([run("a", 0, passed=True), run("b", 1)])
    unranked = figures.entry_figures([run("a", 0, passed=True, ranked_eligible=False), run("b", 1, passed=True)])
    keys = [figures.order_key(sid, f) for sid, f in (("z", best), ("a", worse), ("b", unranked))]
    assert sorted(keys) == keys


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30))
def test_a_rank_counted_from_sorted_lower_bounds_is_the_statistical_rank(pairs: list[tuple[float, float]]) -> None:
    intervals = [(min(a, b), max(a, b)) for a, b in pairs]
    lows = sorted(lo for lo, _ in intervals)
    assert [figures.statistical_rank(hi, lows) for _, hi in intervals] == statistical_ranks(intervals)
