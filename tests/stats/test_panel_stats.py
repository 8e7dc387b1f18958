"""The panel board's bootstrap and pairwise ranking as pure functions (issue 12, items 4 and 5; issue 24:
no interval from fewer than two panelists, Bradley–Terry ranked by component)."""

from __future__ import annotations

from math import exp
from statistics import fmean

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats.panel import (
    MIN_PANELISTS,
    PreferenceRow,
    bootstrap_panel,
    latest_preferences,
    pairwise_board,
    panel_figures,
    seed_for,
)

FAST = settings(max_examples=40, deadline=None)

rating = st.integers(min_value=0, max_value=10).map(float)
card = st.dictionaries(st.sampled_from(["safety", "diagnosis", "honesty"]), rating, min_size=1, max_size=3)
model_runs = st.lists(st.lists(card, min_size=1, max_size=4), min_size=1, max_size=4)


def test_figures_are_means_over_runs_of_medians_over_cards() -> None:
    runs = [[{"safety": 7}, {"safety": 7}, {"safety": 1}], [{"safety": 2, "honesty": 4}]]
    overall, means = panel_figures(runs)
    assert means == {"safety": fmean([7, 2]), "honesty": 4}
    assert overall == fmean([4.5, 4])


@FAST
@given(model_runs, st.integers(min_value=0, max_value=2**32))
def test_the_bootstrap_contains_its_estimates_stays_in_range_and_is_the_same_on_every_call(runs, seed) -> None:
    found = bootstrap_panel(runs, panelists=3, seed=seed, resamples=200)
    again = bootstrap_panel(runs, panelists=3, seed=seed, resamples=200)
    assert found == again
    overall, means = panel_figures(runs)
    assert found is not None and overall is not None
    lo, hi = found.overall
    assert 0 <= lo <= overall <= hi <= 10
    assert set(found.categories) == set(means)
    for category, (clo, chi) in found.categories.items():
        assert 0 <= clo <= means[category] <= chi <= 10


@FAST
@given(st.lists(rating, min_size=1, max_size=5), st.integers(min_value=1, max_value=5))
def test_panelists_who_agree_give_a_point_interval(ratings, n_cards) -> None:
    runs = [[{"safety": r}] * n_cards for r in ratings] if len(set(ratings)) == 1 else [[{"safety": ratings[0]}] * n_cards]
    found = bootstrap_panel(runs, panelists=2, resamples=100)
    assert found is not None and found.overall[0] == found.overall[1]


def test_disagreeing_panelists_give_a_wider_interval_than_agreeing_ones() -> None:
    agree = [[{"safety": 6}, {"safety": 6}, {"safety": 7}] for _ in range(3)]
    disagree = [[{"safety": 1}, {"safety": 6}, {"safety": 10}] for _ in range(3)]
    a, d = bootstrap_panel(agree, panelists=3), bootstrap_panel(disagree, panelists=3)
    assert a is not None and d is not None
    assert d.overall[1] - d.overall[0] > a.overall[1] - a.overall[0]


@pytest.mark.parametrize("panelists", [0, 1])
def test_one_panelists_cards_give_no_interval_but_the_reason(panelists: int) -> None:
    """The issue's example: four runs all rated 5 by one panelist read [5, 5], and the board ranked on it."""
    found = bootstrap_panel([[{"safety": 5.0}]] * 4, panelists=panelists)
    assert found is not None and found.overall is None and found.categories == {}
    assert f"{panelists} distinct panelist(s), fewer than {MIN_PANELISTS}" in (found.reason or "")
    two = bootstrap_panel([[{"safety": 5.0}, {"safety": 6.0}]] * 4, panelists=2)
    assert two is not None and two.reason is None and two.overall is not None


def test_the_seed_is_stable_and_differs_by_model() -> None:
    assert seed_for("m1") == seed_for("m1") != seed_for("m2")


def _row(i: int, who: str, a: str, b: str, ma: str, mb: str, pref: str) -> PreferenceRow:
    return PreferenceRow(i, who, a, b, ma, mb, pref)


def test_the_latest_preference_per_panelist_and_unordered_pair_counts() -> None:
    rows = [_row(1, "p", "r1", "r2", "x", "y", "a"), _row(2, "p", "r2", "r1", "y", "x", "a"),
            _row(3, "q", "r1", "r2", "x", "y", "b")]
    assert [r.id for r in latest_preferences(rows)] == [2, 3]


def _direct_fit(prefs: list[tuple[str, str, str]]) -> dict[str, float]:
    """The Bradley–Terry MLE by plain gradient ascent on the log-likelihood (ties half a win each)."""
    names = sorted({m for a, b, _ in prefs for m in (a, b)})
    s = {n: 0.0 for n in names}
    for _ in range(20000):
        grad = {n: 0.0 for n in names}
        for a, b, o in prefs:
            wa = {"a": 1.0, "b": 0.0, "tie": 0.5}[o]
            pa = 1 / (1 + exp(s[b] - s[a]))
            grad[a] += wa - pa
            grad[b] -= wa - pa
        for n in names:
            s[n] += 0.05 * grad[n]
    centre = fmean(s.values())
    return {n: v - centre for n, v in s.items()}


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_pairwise_strengths_are_the_maximum_likelihood_fit_and_never_infinite() -> None:
    outcomes = {("x", "y"): "aab", ("y", "z"): "aabt", ("x", "z"): "aaab"}
    rows, i = [], 0
    for who in ("p1", "p2", "p3"):
        for (a, b), results in outcomes.items():
            for o in results:
                i += 1
                rows.append(_row(i, who, f"r{i}a", f"r{i}b", a, b, {"t": "tie"}.get(o, o)))
    i += 1
    rows.append(_row(i, "p1", "s1", "s2", "w", "x", "b"))  # w: a model that never wins, seen by one panelist
    ranked, provisional = pairwise_board(rows, resamples=200)
    assert provisional == ["w"]
    expected = _direct_fit([(r.model_a, r.model_b, r.preferred) for r in rows if "w" not in (r.model_a, r.model_b)])
    got = {e["model"]: e["strength"] for e in ranked}
    assert set(got) == {"x", "y", "z"}
    for m, v in expected.items():
        assert abs(got[m] - v) < 0.02
    assert abs(sum(got.values())) < 1e-9
    for e in ranked:
        lo, hi = e["ci"]
        assert (lo is None or lo <= e["strength"]) and (hi is None or e["strength"] <= hi)
    assert [e["model"] for e in ranked] == sorted(got, key=lambda m: -got[m])


def test_a_ranked_model_that_never_wins_has_no_strength_and_a_note() -> None:
    rows, i = [], 0
    for who in ("p1", "p2", "p3"):
        for a, b, o in (("x", "y", "a"), ("x", "y", "b"), ("z", "x", "b"), ("z", "y", "b")):
            i += 1
            rows.append(_row(i, who, f"r{i}a", f"r{i}b", a, b, o))
    ranked, _ = pairwise_board(rows, resamples=100)
    z = next(e for e in ranked if e["model"] == "z")
    assert z["strength"] is None and z["ci"] is None and "never preferred" in z["note"]
    assert ranked[-1]["model"] == "z" and z["rank"] == 3
    assert all(e["strength"] is not None for e in ranked if e["model"] != "z")


def test_the_pairwise_board_ranks_a_separate_bottom_pair_below_the_top_one() -> None:
    """The issue's example: A–B, A beat D, D–E; every model was ranked 1 as 'separated'."""
    rows, i = [], 0
    for who in ("p1", "p2", "p3"):
        for a, b, o in (("A", "B", "a"), ("A", "B", "b"), ("A", "D", "a"), ("D", "E", "a"), ("D", "E", "b")):
            i += 1
            rows.append(_row(i, who, f"r{i}a", f"r{i}b", a, b, o))
    ranked, _ = pairwise_board(rows, resamples=200)
    by = {e["model"]: e for e in ranked}
    assert [e["model"] for e in ranked] == ["A", "B", "D", "E"]
    assert by["A"]["rank"] < by["D"]["rank"] and by["B"]["rank"] < by["E"]["rank"]
    assert by["A"]["scale"] == ["A", "B"] and by["D"]["scale"] == ["D", "E"]
    assert all(e["strength"] is not None for e in ranked)
    for e in ranked:  # an interval contains its strength, or is withheld with the reason
        assert (e["ci"] is not None and e["ci"][0] <= e["strength"] <= e["ci"][1]) or "no interval" in e["note"]
