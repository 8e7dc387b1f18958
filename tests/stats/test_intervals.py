"""Case-clustered 95% intervals.

`rate_interval` / `mean_interval` (issue 24): the one interval of every board figure in [0, 1], a
Wilson-form score interval with the worst-case variance, the Kish n_eff of cases and t(0.975, K−1).
Its bounds never move against the data and it contains its figure; checked against statsmodels.

`case_interval`, the rule of issue 12, item 1, until its last caller moves:

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
    mean_interval,
    rate_interval,
    t_cdf,
    t_interval,
    t_quantile,
    wilson_interval,
    z_quantile,
)
from assay.stats.ranks import statistical_ranks
from tests.support.strategies import examples, small_fractions

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


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(small_fractions(-1, 1, max_denominator=6), min_size=2, max_size=12))
def test_t_interval_contains_the_mean(values: list[Fraction]) -> None:
    floats = [float(v) for v in values]
    assume(len(set(values)) > 1)
    lo, hi = t_interval(floats)
    assert lo < fmean(floats) < hi


# -- rate_interval / mean_interval: the board's one interval -------------------------------------

Part = tuple[int, int]


def parts_lists(min_size: int = 1, max_size: int = 10, max_den: int = 8) -> st.SearchStrategy[list[Part]]:
    """Random boards of one entry: per case (numerator, denominator), denominators unequal, some 0."""
    return st.lists(st.integers(0, max_den).flatmap(lambda d: st.tuples(st.integers(0, d), st.just(d))),
                    min_size=min_size, max_size=max_size)


def ratio(parts: list[Part]) -> float:
    return sum(n for n, _ in parts) / sum(d for _, d in parts)


def test_the_issues_bottom_pair_ranks_the_better_record_at_least_as_high() -> None:
    """5 cases x 3 trials: 0/15 and 1/15 (one case at 1/3). The old rule gave [0, 0.4345] and
    [0, 0.2518], ranking 0/15 first and 1/15 second."""
    none = rate_interval([(0, 3)] * 5)
    one = rate_interval([(1, 3)] + [(0, 3)] * 4)
    assert none is not None and one is not None
    assert one[0] >= none[0] and one[1] >= none[1]
    zero_rank, one_rank = statistical_ranks([none, one])
    assert one_rank <= zero_rank
    assert case_interval([0.0] * 5)[1] > case_interval([1 / 3] + [0.0] * 4)[1]  # the inversion, for the record


def test_the_issues_top_pair_ranks_the_better_record_at_least_as_high() -> None:
    """15/15 against 14/15 on 5 cases: the old rule's lower bounds were 0.566 and 0.748."""
    all_ = rate_interval([(3, 3)] * 5)
    most = rate_interval([(2, 3)] + [(3, 3)] * 4)
    assert all_ is not None and most is not None
    assert all_[0] >= most[0] and all_[1] >= most[1]
    all_rank, most_rank = statistical_ranks([all_, most])
    assert all_rank <= most_rank


def test_a_pooled_ratio_lies_inside_its_own_interval() -> None:
    """objective_met_rate = Σmet/Σtotal: one case with 30/30 met and five with 0/3 is 0.6667; the old
    interval over case ratios was [0, 0.5951]."""
    parts = [(30, 30)] + [(0, 3)] * 5
    lo, hi = rate_interval(parts)
    assert lo <= 30 / 45 <= hi
    assert not case_interval([1.0] + [0.0] * 5)[1] >= 30 / 45


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(parts_lists())
def test_the_interval_is_the_score_interval_of_statsmodels(parts: list[Part]) -> None:
    """Independent check: statsmodels' Wilson interval at the Kish n_eff of cases, with its normal
    quantile set to t(0.975, K−1) through alpha (cases with no runs left out)."""
    from scipy import stats as scipy_stats
    from statsmodels.stats.proportion import proportion_confint

    counted = [(n, d) for n, d in parts if d > 0]
    assume(counted)
    k = len(counted)
    total = sum(d for _, d in counted)
    n_eff = total * total / sum(d * d for _, d in counted)
    c = scipy_stats.t.ppf(0.975, max(k - 1, 1))
    p = ratio(counted)
    lo, hi = proportion_confint(p * n_eff, n_eff, alpha=2 * scipy_stats.norm.sf(c), method="wilson")
    found = rate_interval(parts)
    assert found == pytest.approx((max(0.0, lo), min(1.0, hi)), abs=1e-9)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(parts_lists())
def test_every_figure_lies_inside_its_interval_within_0_1_never_a_point(parts: list[Part]) -> None:
    found = rate_interval(parts)
    if all(d == 0 for _, d in parts):
        assert found is None  # no number from too little
        return
    lo, hi = found
    assert 0.0 <= lo <= ratio([p for p in parts if p[1]]) <= hi <= 1.0
    assert lo < hi


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(parts_lists(), st.data())
def test_turning_a_fail_into_a_pass_never_lowers_either_bound(parts: list[Part], data: st.DataObject) -> None:
    failing = [i for i, (n, d) in enumerate(parts) if n < d]
    assume(failing)
    i = data.draw(st.sampled_from(failing))
    better = list(parts)
    better[i] = (parts[i][0] + 1, parts[i][1])
    (lo, hi), (lo2, hi2) = rate_interval(parts), rate_interval(better)
    assert lo2 >= lo and hi2 >= hi
    assert (lo2, hi2) != (lo, hi) or (lo, hi) == (0.0, 1.0)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=examples(150), deadline=None)
@given(st.lists(parts_lists(max_size=6, max_den=4), min_size=2, max_size=6), st.data())
def test_a_pass_anywhere_never_worsens_a_statistical_rank(board: list[list[Part]], data: st.DataObject) -> None:
    """A random board (entries of random cases, trials and passes): turn one failed run of one
    entry into a pass; that entry's statistical rank never gets worse, and nobody else's improves."""
    board = [entry for entry in board if any(d for _, d in entry)]
    failing = [(e, c) for e, entry in enumerate(board) for c, (n, d) in enumerate(entry) if n < d]
    assume(len(board) >= 2 and failing)
    e, c = data.draw(st.sampled_from(failing))
    better = [list(entry) for entry in board]
    better[e][c] = (board[e][c][0] + 1, board[e][c][1])
    before = statistical_ranks([rate_interval(entry) for entry in board])
    after = statistical_ranks([rate_interval(entry) for entry in better])
    assert after[e] <= before[e]
    assert all(after[j] >= before[j] for j in range(len(board)) if j != e)


@FAST
@given(st.lists(st.integers(0, 6).map(lambda k: k / 6), min_size=1, max_size=12))
@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_mean_interval_is_rate_interval_with_denominators_1(values: list[float]) -> None:
    assert mean_interval(values) == rate_interval([(v, 1) for v in values])
    lo, hi = mean_interval(values)
    assert lo <= fmean(values) <= hi


def test_equal_denominators_count_cases_not_runs() -> None:
    """n_eff = K when every case has the same runs: 5 cases x 3 trials reads like 5 cases x 30."""
    assert rate_interval([(3, 3)] * 5) == pytest.approx(rate_interval([(30, 30)] * 5))
    assert rate_interval([(3, 3)] * 5) == pytest.approx(mean_interval([1.0] * 5))


def test_one_case_uses_one_degree_of_freedom_and_is_never_narrower_than_two() -> None:
    one, two = rate_interval([(3, 3)]), rate_interval([(3, 3)] * 2)
    assert one[1] == two[1] == 1.0 and 0.0 < one[0] < two[0]
    lo, hi = rate_interval([(1, 2)])
    assert lo < 0.5 < hi


def test_nothing_counted_is_no_interval() -> None:
    assert rate_interval([]) is None
    assert rate_interval([(0, 0), (0, 0)]) is None
    assert mean_interval([]) is None
    assert rate_interval([(0, 0), (1, 1)]) == rate_interval([(1, 1)])


@pytest.mark.parametrize("parts", [[(4, 3)], [(-1, 3)], [(1, -1)], [(float("nan"), 3)], [(1, float("inf"))]])
def test_impossible_parts_are_refused(parts: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match="numerator"):
        rate_interval(parts)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan")])
def test_values_outside_0_1_are_refused(value: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mean_interval([0.5, value])
