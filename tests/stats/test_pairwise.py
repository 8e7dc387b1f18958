"""Paired comparison (issue 12, item 3): per-case differences d_k; `difference` = mean(d); `ci` the
paired t-interval (None when the d_k do not vary); `p_value` the exact two-sided sign-flip test over
all 2^K patterns for K ≤ 16 (else 100,000 seeded random patterns), counting patterns whose |mean|
is at least the observed; the smallest possible p is 2 / 2^K (0.0625 with 5 cases)."""

from __future__ import annotations

from fractions import Fraction
from itertools import product
from math import lcm, sqrt
from statistics import fmean

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from assay.stats.intervals import t_quantile
from assay.stats.pairwise import min_p_value, paired_comparison, sign_flip_p_value
from tests.support.strategies import small_fractions

FAST = settings(max_examples=120, deadline=None)

rates = small_fractions(0, 1, max_denominator=6)  # the values of st.fractions(0, 1, max_denominator=6)


def exact_p(differences: list[Fraction]) -> Fraction:
    """The sign-flip p-value by brute force in exact rational arithmetic: the reference."""
    # scaled by the common denominator to integers: exact still, and ~20x faster than Fractions
    scale = lcm(*(d.denominator for d in differences))
    ints = [int(d * scale) for d in differences]
    observed = abs(sum(ints))
    hits = sum(1 for signs in product((1, -1), repeat=len(ints))
               if abs(sum(s * d for s, d in zip(signs, ints))) >= observed)
    return Fraction(hits, 2 ** len(ints))


def test_five_all_positive_differences_give_0_0625() -> None:
    found = paired_comparison([1.0] * 5, [0.0] * 5)
    assert found.differences == (1.0,) * 5 and found.difference == 1.0
    assert found.p_value == 0.0625 and found.min_p == 0.0625 and found.exact and found.patterns == 32
    assert found.ci is None  # the differences do not vary
    assert found.too_few_cases  # with 5 cases nothing can reach 0.05
    assert not paired_comparison([1.0] * 6, [0.0] * 6).too_few_cases  # 2/64 = 0.03125


def test_smallest_achievable_p() -> None:
    assert [min_p_value(k) for k in (1, 2, 5, 6, 10)] == [1.0, 0.5, 0.0625, 0.03125, 2 / 1024]
    for k in range(1, 12):
        assert paired_comparison([1.0] * k, [0.0] * k).p_value == min_p_value(k)


def test_no_difference_is_p_1() -> None:
    found = paired_comparison([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert (found.difference, found.p_value, found.ci) == (0.0, 1.0, None)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(st.tuples(rates, rates), min_size=1, max_size=10))
def test_the_exact_p_is_the_brute_force_p(pairs: list[tuple[Fraction, Fraction]]) -> None:
    a = [float(x) for x, _ in pairs]
    b = [float(y) for _, y in pairs]
    found = paired_comparison(a, b)
    assert found.exact and found.patterns == 2 ** len(pairs)
    assert found.p_value == float(exact_p([x - y for x, y in pairs]))
    assert 0.0 < found.p_value <= 1.0
    assert found.p_value >= found.min_p or all(x == y for x, y in pairs)


def test_float_ties_count_as_ties() -> None:
    """−0.1 − 0.2 + 0.3 + 0.6 equals the observed 0.1 + 0.2 − 0.3 + 0.6 as real numbers, not as floats."""
    d = [0.1, 0.2, -0.3, 0.6]
    assert abs(-0.1 - 0.2 + 0.3 + 0.6) != abs(0.1 + 0.2 - 0.3 + 0.6)
    p, exact, _ = sign_flip_p_value(d)
    assert exact and p == float(exact_p([Fraction(1, 10), Fraction(2, 10), Fraction(-3, 10), Fraction(6, 10)]))


def test_tiny_differences_are_differences() -> None:
    """The tolerance is relative to the differences' scale: 1e-10 on every case is not zero."""
    tiny = paired_comparison([1e-10] * 5, [0.0] * 5)
    assert tiny.p_value == 0.0625
    assert paired_comparison([1e-10, 0.0, 0.0, 0.0, 0.0], [0.0] * 5).p_value == 1.0
    lo, hi = paired_comparison([3e-13, 1e-13, 2e-13], [0.0] * 3).ci
    assert lo < 2e-13 < hi


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(st.tuples(rates, rates), min_size=1, max_size=10), st.sampled_from([1e-12, 1e-6, 1e6]))
def test_the_test_does_not_depend_on_the_unit(pairs: list[tuple[Fraction, Fraction]], scale: float) -> None:
    """Scaling every difference by the same factor changes neither p nor whether there is an interval."""
    d = [float(x - y) for x, y in pairs]
    found, scaled = paired_comparison(d, [0.0] * len(d)), paired_comparison([v * scale for v in d], [0.0] * len(d))
    assert scaled.p_value == found.p_value
    assert (scaled.ci is None) == (found.ci is None)
    if found.ci is not None:
        assert scaled.ci == pytest.approx((found.ci[0] * scale, found.ci[1] * scale), rel=1e-9)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(st.tuples(rates, rates), min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_symmetric_and_order_free(pairs: list[tuple[Fraction, Fraction]], rnd) -> None:
    a = [float(x) for x, _ in pairs]
    b = [float(y) for _, y in pairs]
    ab, ba = paired_comparison(a, b), paired_comparison(b, a)
    assert ab.p_value == ba.p_value and ab.difference == pytest.approx(-ba.difference, abs=1e-12)
    order = list(range(len(pairs)))
    rnd.shuffle(order)
    shuffled = paired_comparison([a[i] for i in order], [b[i] for i in order])
    assert shuffled.p_value == ab.p_value


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(st.tuples(rates, rates), min_size=2, max_size=12))
def test_the_paired_t_interval(pairs: list[tuple[Fraction, Fraction]]) -> None:
    d = [float(x - y) for x, y in pairs]
    found = paired_comparison([float(x) for x, _ in pairs], [float(y) for _, y in pairs])
    if len(set(d)) == 1:
        assert found.ci is None
        return
    k, m = len(d), fmean(d)
    half = t_quantile(0.975, k - 1) * sqrt(sum((x - m) ** 2 for x in d) / (k - 1)) / sqrt(k)
    lo, hi = found.ci
    assert lo == pytest.approx(m - half, abs=1e-9) and hi == pytest.approx(m + half, abs=1e-9)
    assert lo < found.difference < hi


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_sixteen_cases_are_exact_and_seventeen_are_sampled() -> None:
    a = [i / 16 for i in range(16)]
    b = [0.4] * 16
    assert paired_comparison(a, b).exact and paired_comparison(a, b).patterns == 65536
    a17, b17 = [*a, 0.9], [*b, 0.2]
    sampled = paired_comparison(a17, b17)
    assert not sampled.exact and sampled.patterns == 100_000
    assert sampled == paired_comparison(a17, b17)  # seeded: the same on every read
    exact = paired_comparison(a17, b17, exact_max=17)
    assert exact.exact and sampled.p_value == pytest.approx(exact.p_value, abs=0.005)
    assert 0.0 < sampled.p_value <= 1.0


def test_a_sampled_p_is_never_zero() -> None:
    found = paired_comparison([1.0] * 20, [0.0] * 20, n_random=1000)
    assert not found.exact and found.p_value == 1 / 1001  # only the observed pattern itself
    assert found.min_p == 2 / 2**20


def test_mismatched_or_empty_pairs_are_refused() -> None:
    with pytest.raises(ValueError):
        paired_comparison([1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        paired_comparison([], [])


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(st.lists(st.tuples(rates, rates), min_size=1, max_size=8))
def test_a_bigger_difference_on_one_case_never_raises_p(pairs: list[tuple[Fraction, Fraction]]) -> None:
    """Pushing an already-positive mean further up (on a case already in favour) cannot make the
    result less significant."""
    d = [x - y for x, y in pairs]
    assume(sum(d) > 0)
    i = max(range(len(d)), key=d.__getitem__)
    assume(d[i] > 0)
    bigger = [*d[:i], d[i] + 1, *d[i + 1:]]
    assert exact_p(bigger) <= exact_p(d)
    assert sign_flip_p_value([float(x) for x in bigger])[0] <= sign_flip_p_value([float(x) for x in d])[0]
