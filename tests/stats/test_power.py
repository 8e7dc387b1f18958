"""A suite's statistical power (issue 27): `detectable_difference`, the smallest pass-rate
difference the board's own interval (`rate_interval`) detects at 95% with 80% power.

Checked against an independent computation with scipy (its t quantiles, `brentq` for the
alternative rate, a bounded scalar search for the worst reference rate), against the interval
itself (at the stated rates it just excludes the reference), and for the issue's figure: forge 2.0,
55 cases × 3 reps, detects a difference below 0.25, forge 1.0's 5 cases none at all.
"""

from __future__ import annotations

from math import sqrt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from assay.stats.intervals import detectable_difference, rate_interval


def scipy_detectable(cases: int, n_eff: float, level: float = 0.95, power: float = 0.8) -> float | None:
    """The same definition, computed with scipy only: for each reference rate p0 ≤ ½ the
    alternative p1 solving p1 − p0 = c·σ(p0) + zβ·σ(p1), then the worst p0."""
    df = max(cases - 1, 1)
    c, z = stats.t.ppf(0.5 + level / 2, df), stats.t.ppf(power, df)

    def delta(p0: float) -> float:
        def gap(p1: float) -> float:
            return p1 - p0 - c * sqrt(p0 * (1 - p0) / n_eff) - z * sqrt(p1 * (1 - p1) / n_eff)
        if gap(1.0) < 0:
            return float("inf")
        return optimize.brentq(gap, p0, 1.0, xtol=1e-12) - p0

    grid = [i / 200 for i in range(1, 101)]
    best = max(grid, key=delta)
    if delta(best) == float("inf"):
        return None
    found = optimize.minimize_scalar(lambda p: -delta(p), bounds=(max(best - 0.005, 1e-6), min(best + 0.005, 0.5)),
                                     method="bounded", options={"xatol": 1e-9})
    return max(delta(best), -found.fun)


@pytest.mark.parametrize("cases,reps", [(40, 3), (10, 3), (20, 5), (30, 1), (100, 3), (12, 2)])
def test_agrees_with_an_independent_scipy_computation(cases: int, reps: int) -> None:
    ours = detectable_difference([reps] * cases)
    theirs = scipy_detectable(cases, float(cases))
    assert ours is not None and theirs is not None
    assert ours == pytest.approx(theirs, abs=2e-3)  # ours searches a grid of reference rates 0.001 apart


def test_forge_two_at_three_reps_detects_less_than_a_quarter_and_forge_one_nothing() -> None:
    forge2 = detectable_difference([3] * 40)
    assert forge2 is not None and forge2 < 0.25
    assert detectable_difference([3] * 5) is None  # 15/15 reads [0.566, 1]: nothing is told apart
    assert scipy_detectable(5, 5.0) is None


def test_at_the_stated_difference_the_board_interval_just_excludes_the_reference() -> None:
    """Read back through `rate_interval` itself: an agent observed c·σ(p0) above p0 sits on the
    interval's edge at p0, which is what the power computation tests against."""
    cases, reps, p0 = 40, 3, 0.5
    c = stats.t.ppf(0.975, cases - 1)
    edge = p0 + c * sqrt(p0 * (1 - p0) / cases)
    lo, _ = rate_interval([(edge * reps, reps)] * cases)
    assert lo == pytest.approx(p0, abs=1e-9)


def test_unequal_denominators_count_as_the_kish_effective_cases() -> None:
    dens = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]
    n_eff = sum(dens) ** 2 / sum(d * d for d in dens)
    ours = detectable_difference(dens)
    assert ours is not None and ours == pytest.approx(scipy_detectable(len(dens), n_eff), abs=2e-3)


def test_no_case_no_number() -> None:
    assert detectable_difference([]) is None
    assert detectable_difference([0, 0]) is None


@settings(max_examples=25, deadline=None)
@given(cases=st.integers(min_value=8, max_value=200), reps=st.integers(min_value=1, max_value=20))
def test_more_cases_detect_smaller_differences_and_reps_change_nothing(cases: int, reps: int) -> None:
    here = detectable_difference([reps] * cases)
    more = detectable_difference([reps] * (cases + 10))
    assert here == detectable_difference([1] * cases)  # the interval is clustered by case
    if here is not None:
        assert more is not None and 0 < more < here < 1
