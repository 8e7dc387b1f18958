"""Statistical ranks: an entry is outranked only by entries the data separates from it.

Ordering entries by their point estimates and numbering them 1, 2, 3 claims that a board of five
cases can tell 0.80 from 0.73; it usually cannot. The rank here is the one Chatbot Arena shows
as "rank (UB)": 1 + the number of entries whose interval lies wholly above this entry's (their
lower bound is greater than this entry's upper bound). Entries with overlapping intervals, and
so ties, share a rank; a rank only grows when another entry is clearly better.

Properties the tests hold: ranks run from 1 to n; an entry whose upper bound is no higher than
another's never gets a better rank (monotone in the upper bound); equal intervals share a rank.
When every interval contains its point estimate, the best estimate is always rank 1; further down,
ranks need not follow the estimates (a wide interval can reach above a narrow one whose estimate
is higher), which is why boards list entries by their point estimates and show the rank beside.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

Interval = tuple[float, float]


def statistical_rank(interval: Interval, others: Sequence[Interval]) -> int:
    """1 + the number of `others` whose lower bound is above `interval`'s upper bound."""
    return 1 + sum(1 for lo, _ in others if lo > interval[1])


def statistical_ranks(intervals: Sequence[Interval]) -> list[int]:
    """The statistical rank of each interval among all of them, in the order given.

    An interval never lies wholly above itself (lo ≤ hi), so counting over the whole list,
    itself included, is the same as counting over the others. O(n log n).
    """
    for lo, hi in intervals:
        if lo > hi:
            raise ValueError(f"an interval needs lo <= hi, got [{lo}, {hi}]")
    lows = sorted(lo for lo, _ in intervals)
    return [1 + len(lows) - bisect_right(lows, hi) for _, hi in intervals]
