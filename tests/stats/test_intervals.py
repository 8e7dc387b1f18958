"""Case-clustered 95% intervals (issue 12, item 1):

- per-case means m_1..m_K, failures counting as 0;
- K ≥ 2 and the m_k vary: mean(m) ± t(0.975, K−1) · sd(m) / √K (sd with ddof = 1), clipped to [0, 1];
- otherwise (all equal, or K = 1): the Wilson score interval for mean(m) with n = K, so 15 passes
  out of 15 on 5 cases reads [0.566, 1], not [1, 1].
"""

from __future__ import annotations

from fractions import Fraction
from math import sqrt
from statistics import fmean

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from assay.stats.intervals import (
    case_interval,
    case_means,
    t_cdf,
    t_interval,
    t_quantile,
    wilson_interval,
    z_quantile,
)

FAST = settings(max_examples=150, deadline=None)
Z = 1.959963984540054

# Student t 0.975 quantiles from published tables (e.g. NIST/SEMATECH e-Handbook, 1.3.6.7.2).
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 29: 2.045, 30: 2.042,
           100: 1.984}


def case_mean_lists(min_size: int = 1, max_size: int = 12) -> st.SearchStrategy[list[float]]:
    """Per-case means as they arise: passes / reps for reps in 1..6 (shared by every case)."""
    return st.integers(1, 6).flatmap(
        lambda reps: st.lists(st.integers(0, reps).map(lambda k: k / reps), min_size=min_size, max_size=max_size))


# -- the t quantile -----------------------------------------------------------------------------


@pytest.mark.parametrize(("df", "expected"), sorted(T_TABLE.items()))
def test_t_quantile_matches_the_published_table(df: int, expected: float) -> None:
    assert round(t_quantile(0.975, df), 3) == expected


def test_t_quantile_tends_to_the_normal_quantile() -> None:
    assert z_quantile(0.975) == pytest.approx(Z, abs=1e-12)
    assert t_quantile(0.975, 100_000) == pytest.approx(Z, abs=1e-4)
    assert t_quantile(0.975, 4) > t_quantile(0.975, 5) > t_quantile(0.975, 50) > Z


@FAST
@given(st.floats(0.51, 0.9999), st.integers(1, 200))
def test_t_quantile_inverts_the_cdf(p: float, df: int) -> None:
    q = t_quantile(p, df)
    assert t_cdf(q, df) == pytest.approx(p, abs=1e-10)
    assert t_quantile(1 - p, df) == pytest.approx(-q, abs=1e-9)


def test_t_quantile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        t_quantile(0.975, 0)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


# -- Wilson -----------------------------------------------------------------------------------


def test_fifteen_of_fifteen_on_five_cases_reads_0566_to_1() -> None:
    means = case_means([(3, 3)] * 5)
    assert means == [1.0] * 5
    lo, hi = case_interval(means)
    assert (round(lo, 3), hi) == (0.566, 1.0)
    lo, hi = case_interval([0.0] * 5)
    assert (lo, round(hi, 3)) == (0.0, 0.434)


@FAST
@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_wilson_bounds_solve_the_score_equation(case: tuple[int, int]) -> None:
    """Each Wilson bound p solves (p̂ − p)² = z² p (1 − p) / n; an independent check of the formula."""
    n, k = case
    p_hat = k / n
    for bound in wilson_interval(p_hat, n):
        if bound in (0.0, 1.0) and bound == p_hat:
            continue  # at p̂ = 0 or 1 one root is p̂ itself: both sides are 0
        assert (p_hat - bound) ** 2 == pytest.approx(Z * Z * bound * (1 - bound) / n, abs=1e-12)


@FAST
@given(st.integers(0, 6), st.integers(1, 40))
def test_constant_case_means_give_the_wilson_interval_with_n_cases(k: int, n_cases: int) -> None:
    reps = 6
    means = [k / reps] * n_cases
    assert case_interval(means) == pytest.approx(wilson_interval(k / reps, n_cases), abs=1e-12)


def test_one_case_is_wilson_with_n_1() -> None:
    assert case_interval([0.5]) == wilson_interval(0.5, 1)
    lo, hi = case_interval([0.5])
    assert lo < 0.5 < hi


# -- the clustered t interval ----------------------------------------------------------------


def test_varying_case_means_use_t_with_k_minus_1_degrees_of_freedom() -> None:
    means = [1.0, 0.0, 1.0, 1.0, 0.5]
    # mean 0.7, sample sd sqrt(0.2), t(0.975, 4) = 2.7764451052
    half = 2.7764451052 * sqrt(0.2) / sqrt(5)
    lo, hi = case_interval(means)
    assert lo == pytest.approx(0.7 - half, abs=1e-9)
    assert hi == 1.0  # 0.7 + 0.555 clipped


@FAST
@given(case_mean_lists(min_size=2))
def test_the_rule_recomputed(means: list[float]) -> None:
    assume(len(set(means)) > 1)
    k = len(means)
    m = fmean(means)
    sd = sqrt(sum((x - m) ** 2 for x in means) / (k - 1))
    half = t_quantile(0.975, k - 1) * sd / sqrt(k)
    lo, hi = case_interval(means)
    assert lo == pytest.approx(max(0.0, m - half), abs=1e-12)
    assert hi == pytest.approx(min(1.0, m + half), abs=1e-12)


@FAST
@given(case_mean_lists())
def test_the_interval_contains_the_mean_and_lies_in_0_1(means: list[float]) -> None:
    lo, hi = case_interval(means)
    m = fmean(means)
    assert 0.0 <= lo <= m <= hi <= 1.0


@FAST
@given(case_mean_lists(min_size=2, max_size=8))
def test_more_cases_alike_narrow_the_interval(means: list[float]) -> None:
    """The same case means seen twice as often: the interval can only get narrower."""
    lo, hi = case_interval(means)
    lo2, hi2 = case_interval(means * 2)
    assert hi2 - lo2 <= hi - lo + 1e-12


def test_no_case_no_interval() -> None:
    assert case_interval([]) is None
    assert case_means([(0, 0), (2, 0)]) == []


def test_failures_count_as_zero_in_a_case_mean() -> None:
    # 3 planned runs of a case: one passed, one failed, one crashed (a failure): 1/3, not 1/2.
    assert case_means([(1, 3), (0, 3)]) == [pytest.approx(1 / 3), 0.0]


def test_case_means_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError):
        case_interval([1.5, 0.2])


# -- the paired t interval ----------------------------------------------------------------------


def test_t_interval_is_none_without_spread() -> None:
    assert t_interval([0.5, 0.5, 0.5]) is None
    assert t_interval([0.5]) is None


@FAST
@given(st.lists(st.fractions(-1, 1, max_denominator=6), min_size=2, max_size=12))
def test_t_interval_contains_the_mean(values: list[Fraction]) -> None:
    floats = [float(v) for v in values]
    assume(len(set(values)) > 1)
    lo, hi = t_interval(floats)
    assert lo < fmean(floats) < hi
