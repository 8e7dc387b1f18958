"""Statistical rank (issue 12, item 2): 1 + the number of entries whose interval lies wholly above
this entry's (their lower bound > this upper bound); ties and indistinguishable entries share a rank."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats.ranks import statistical_rank, statistical_ranks

FAST = settings(max_examples=200, deadline=None)

intervals = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 20)).map(lambda t: (min(t) / 20, max(t) / 20)), max_size=15)


def test_separated_entries_count_down_and_overlapping_ones_share() -> None:
    diligent, mixed, idle_a, idle_b = (0.566, 1.0), (0.3, 0.9), (0.0, 0.434), (0.0, 0.434)
    assert statistical_ranks([diligent, mixed, idle_a, idle_b]) == [1, 1, 2, 2]
    assert statistical_ranks([(0.8, 0.9), (0.5, 0.6), (0.1, 0.2)]) == [1, 2, 3]


def test_touching_is_not_above() -> None:
    """Wholly above means strictly: a lower bound equal to this upper bound does not count."""
    assert statistical_ranks([(0.5, 0.9), (0.1, 0.5)]) == [1, 1]


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(intervals)
def test_the_fast_count_is_the_definition(found: list[tuple[float, float]]) -> None:
    assert statistical_ranks(found) == [statistical_rank(i, found) for i in found]
    assert statistical_ranks(found) == [
        1 + sum(1 for j, other in enumerate(found) if j != i and other[0] > mine[1])
        for i, mine in enumerate(found)]


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(intervals)
def test_ranks_run_from_1_to_n_and_follow_the_upper_bound(found: list[tuple[float, float]]) -> None:
    ranks = statistical_ranks(found)
    assert all(1 <= r <= len(found) for r in ranks)
    if found:
        assert min(ranks) == 1  # the highest upper bound has nothing wholly above it
    for i, a in enumerate(found):
        for j, b in enumerate(found):
            if a[1] <= b[1]:
                assert ranks[i] >= ranks[j]
            if a == b:
                assert ranks[i] == ranks[j]


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@FAST
@given(intervals, st.randoms(use_true_random=False))
def test_ranks_do_not_depend_on_the_order_given(found: list[tuple[float, float]], rnd) -> None:
    order = list(range(len(found)))
    rnd.shuffle(order)
    ranks = statistical_ranks(found)
    assert statistical_ranks([found[i] for i in order]) == [ranks[i] for i in order]


@FAST
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)).map(lambda t: (min(t) / 10, max(t) / 10)),
                min_size=1, max_size=10))
@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_best_point_estimate_is_rank_1(found: list[tuple[float, float]]) -> None:
    points = [(lo + hi) / 2 for lo, hi in found]  # any estimate inside its interval
    best = max(range(len(found)), key=points.__getitem__)
    assert statistical_ranks(found)[best] == 1


def test_an_inverted_interval_is_refused() -> None:
    with pytest.raises(ValueError):
        statistical_ranks([(0.6, 0.4)])
