"""Trial statistics over the plan (docs/architecture.md, Results JSON):

- pass_rate = passed trials / planned trials
- consistency = share of cases whose trials all agree
- false_success_rate = false successes / planned trials
- pass_hat_k[k] = mean over cases of C(c, k) / C(n, k): the chance that k of a case's n trials,
  drawn without replacement, all pass
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats.trials import (
    TrialOutcome,
    consistency,
    consistent,
    false_success_rate,
    false_successes,
    pass_hat_k,
    pass_rate,
    summary,
)
from tests.support.strategies import examples

P = TrialOutcome(passed=True, false_success=False)
F = TrialOutcome(passed=False, false_success=False)
X = TrialOutcome(passed=False, false_success=True)  # claimed success, did not pass

FAST = settings(max_examples=80, deadline=None)


def approx(x: float | Fraction) -> Any:
    return pytest.approx(float(x), abs=1e-12)


# ---- by hand -------------------------------------------------------------------------------

def test_a_case_with_two_of_three_passing() -> None:
    cases = {"a": [P, P, F]}
    assert pass_hat_k(cases, 1) == approx(Fraction(2, 3))
    assert pass_hat_k(cases, 2) == approx(Fraction(1, 3))  # C(2,2)/C(3,2)
    assert pass_hat_k(cases, 3) == 0.0
    assert pass_rate(cases) == approx(Fraction(2, 3))
    assert consistency(cases) == 0.0


def test_pass_hat_k_is_a_mean_over_cases() -> None:
    cases = {"a": [P, P, F], "b": [P, P, P], "c": [F, F, F]}
    assert pass_hat_k(cases, 1) == approx((Fraction(2, 3) + 1 + 0) / 3)
    assert pass_hat_k(cases, 2) == approx((Fraction(1, 3) + 1 + 0) / 3)
    assert pass_hat_k(cases, 3) == approx(Fraction(1, 3))


def test_pass_rate_counts_trials_not_cases() -> None:
    cases = {"a": [P], "b": [F, F, F]}
    assert pass_rate(cases) == approx(Fraction(1, 4))
    assert pass_hat_k(cases, 1) == approx(Fraction(1, 2))  # a mean over cases differs here


def test_consistency() -> None:
    assert consistent([P, P, P]) and consistent([F, X, F]) and consistent([P]) and consistent([])
    assert not consistent([P, F]) and not consistent([X, P])
    assert consistency({"a": [P, P], "b": [F, F], "c": [P, F], "d": [X, F]}) == approx(Fraction(3, 4))


def test_false_success() -> None:
    cases = {"a": [P, X, F], "b": [X, X, P]}
    assert false_successes(cases) == 3
    assert false_success_rate(cases) == approx(Fraction(3, 6))
    assert pass_rate(cases) == approx(Fraction(2, 6))


def test_no_cases_is_zero_everywhere() -> None:
    assert pass_rate({}) == consistency({}) == false_success_rate({}) == pass_hat_k({}, 1) == 0.0
    assert summary({})["pass_hat_k"] == {}


@pytest.mark.parametrize("k", [0, -1, 4, 10])
def test_k_out_of_range_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match="pass\\^k"):
        pass_hat_k({"a": [P, P, F]}, k)


def test_k_must_fit_every_case() -> None:
    cases = {"a": [P, P, P], "b": [P, P]}
    assert pass_hat_k(cases, 2) == 1.0
    with pytest.raises(ValueError):
        pass_hat_k(cases, 3)


def test_summary() -> None:
    cases = {"a": [P, P, F], "b": [X, P, P], "c": [F, F, F]}
    s = summary(cases)
    assert s["cases"] == 3 and s["trials"] == 9 and s["false_successes"] == 1
    assert s["pass_rate"] == approx(Fraction(4, 9))
    assert s["consistency"] == approx(Fraction(1, 3))
    assert s["false_success_rate"] == approx(Fraction(1, 9))
    assert list(s["pass_hat_k"]) == ["1", "2", "3"]
    assert s["pass_hat_k"]["2"] == approx((Fraction(1, 3) + Fraction(1, 3) + 0) / 3)


def test_one_trial_a_case_withholds_consistency_with_the_reason() -> None:
    """One trial always agrees with itself: 1.00 would say nothing about the agent (issue 29)."""
    for cases in ({"a": [P], "b": [F]}, {"a": [P, P, F], "b": [F]}):
        s = summary(cases)
        assert s["consistency"] is None
        assert "one trial a case was planned" in s["consistency_reason"]
    assert summary({"a": [P, P], "b": [F, F]})["consistency"] == 1.0
    assert summary({"a": [P, P], "b": [F, F]})["consistency_reason"] is None
    # a case the participation gate leaves with one counted trial counts, as the board counts it
    gated = {"a": [P, TrialOutcome(passed=False, false_success=False, gated=True)], "b": [P, F]}
    assert summary(gated)["consistency"] == 0.5 and summary(gated)["consistency_reason"] is None


def test_summary_stops_k_at_the_smallest_case() -> None:
    assert list(summary({"a": [P] * 5, "b": [P, F]})["pass_hat_k"]) == ["1", "2"]


# ---- properties ----------------------------------------------------------------------------

@st.composite
def trial(draw: st.DrawFn) -> TrialOutcome:
    passed = draw(st.booleans())
    claimed = draw(st.sampled_from([True, False, None]))
    return TrialOutcome(passed=passed, false_success=claimed is True and not passed)


def cases_with(n: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, list[TrialOutcome]]]:
    return st.dictionaries(st.text(min_size=1, max_size=4), n.flatmap(lambda k: st.lists(trial(), min_size=k,
                                                                                          max_size=k)),
                           min_size=1, max_size=6)


any_cases = cases_with(st.integers(min_value=1, max_value=7))


@st.composite
def uniform_cases(draw: st.DrawFn) -> dict[str, list[TrialOutcome]]:
    return draw(cases_with(st.just(draw(st.integers(min_value=1, max_value=7)))))


@FAST
@given(any_cases)
def test_pass_hat_k_is_non_increasing_in_k(cases: dict[str, list[TrialOutcome]]) -> None:
    k_max = min(len(t) for t in cases.values())
    values = [pass_hat_k(cases, k) for k in range(1, k_max + 1)]
    assert all(b <= a + 1e-12 for a, b in zip(values, values[1:]))


@FAST
@given(any_cases)
def test_pass_hat_1_is_the_mean_per_case_pass_fraction(cases: dict[str, list[TrialOutcome]]) -> None:
    mean = sum(Fraction(sum(o.passed for o in t), len(t)) for t in cases.values()) / len(cases)
    assert pass_hat_k(cases, 1) == approx(mean)


@FAST
@given(uniform_cases())
@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_with_equal_trial_counts_pass_hat_1_is_the_pass_rate(cases: dict[str, list[TrialOutcome]]) -> None:
    assert pass_hat_k(cases, 1) == approx(pass_rate(cases))


@FAST
@given(any_cases)
def test_every_figure_is_a_share(cases: dict[str, list[TrialOutcome]]) -> None:
    s = summary(cases)
    figures = [s["pass_rate"], s["consistency"], s["false_success_rate"], *s["pass_hat_k"].values()]
    assert all(0.0 <= f <= 1.0 for f in figures if f is not None)
    # consistency is withheld exactly when some case was planned with a single trial, and says why
    single = any(len(t) == 1 for t in cases.values())
    assert (s["consistency"] is None) == single == (s["consistency_reason"] is not None)
    # a false success is a failed trial, so the two can never add up to more than everything
    assert s["pass_rate"] + s["false_success_rate"] <= 1.0 + 1e-12


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=7), st.data())
def test_pass_hat_k_is_the_chance_that_k_drawn_trials_all_pass(passed: list[bool], data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=1, max_value=len(passed)))
    draws = list(combinations(passed, k))
    exact = Fraction(sum(all(d) for d in draws), len(draws))
    cases = {"a": [P if p else F for p in passed]}
    assert pass_hat_k(cases, k) == approx(exact)


@FAST
@given(any_cases)
def test_all_pass_or_all_fail_is_consistent_and_extreme(cases: dict[str, list[TrialOutcome]]) -> None:
    everything_passes = {c: [P] * len(t) for c, t in cases.items()}
    nothing_passes = {c: [F] * len(t) for c, t in cases.items()}
    k_max = min(len(t) for t in cases.values())
    for k in range(1, k_max + 1):
        assert pass_hat_k(everything_passes, k) == 1.0
        assert pass_hat_k(nothing_passes, k) == 0.0
    assert consistency(everything_passes) == consistency(nothing_passes) == 1.0


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=examples(80), deadline=None)
@given(cases_with(st.integers(min_value=1, max_value=40)))
def test_summary_pass_hat_k_is_pass_hat_k_for_every_k(cases: dict[str, list[TrialOutcome]]) -> None:
    """The summary computes all k at once (incremental binomials); each is exactly the one-k figure."""
    s = summary(cases)
    k_max = min(len(t) for t in cases.values())
    assert s["pass_hat_k"] == {str(k): pass_hat_k(cases, k) for k in range(1, k_max + 1)}
