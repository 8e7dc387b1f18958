"""Paired comparison of two agents on the same cases.

Two submissions on one suite version met the same worlds, case for case, so the honest question
is about the per-case differences d_k = a_k − b_k of their case means, not about two separate
intervals (which overlap long after a paired test can tell the agents apart, because the case's
difficulty cancels out of d_k).

- `difference` = mean(d);
- `ci`: the paired t-interval, mean(d) ± t(0.975, K−1) · sd(d) / √K, or None when the d_k do
  not vary (a zero sd says nothing about the spread of differences on other cases);
- `p_value`: the two-sided sign-flip permutation test. Under "no difference", each d_k is as
  likely to have come out −d_k, so every one of the 2^K sign patterns is equally likely; p is the
  share of patterns whose |mean| is at least the observed |mean|. Exact (all 2^K patterns) for
  K ≤ 16; beyond that 100,000 seeded random patterns, with the observed pattern counted once
  more (p = (hits + 1) / (N + 1)) so a sampled p is never 0.
- `min_p` = 2 / 2^K: the observed pattern and its mirror image always count, so with 5 cases no
  difference, however large, can reach p < 0.05 (min_p = 0.0625). `too_few_cases` says so.

Pure: the only randomness is `random.Random(seed)`, so a comparison is the same on every read.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from assay.stats.intervals import LEVEL, Interval, t_interval

EXACT_MAX_CASES = 16
RANDOM_PATTERNS = 100_000
SEED = 0
ALPHA = 0.05
#: Relative tolerance for "|mean| is at least the observed |mean|": a pattern whose sum equals
#: the observed one as a real number must count, whatever order its floats were added in. It is
#: relative to the differences' own scale (Σ|d_k|), so differences of 1e-10 are told apart as
#: well as differences of 1 (the float error of any sum of them is below 1e-12 of that scale).
REL_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PairedComparison:
    """What a paired comparison found; `differences` are a − b, case by case."""

    differences: tuple[float, ...]
    difference: float
    ci: Interval | None
    p_value: float
    n_cases: int
    min_p: float
    exact: bool
    patterns: int

    @property
    def too_few_cases(self) -> bool:
        """True when no difference at all could reach p ≤ ALPHA with this many cases."""
        return self.min_p > ALPHA


def min_p_value(n_cases: int) -> float:
    """The smallest p the sign-flip test can give with `n_cases` cases: 2 / 2^K (1 for K = 1)."""
    if n_cases < 1:
        raise ValueError("a comparison needs at least one case")
    return min(1.0, 2.0 / 2.0**n_cases)


def _tolerance(differences: Sequence[float]) -> float:
    return REL_TOLERANCE * sum(abs(d) for d in differences)


def _exact_hits(differences: Sequence[float], observed: float, tol: float) -> int:
    """How many of the 2^K sign patterns give |sum| ≥ observed − tol.

    Walks the patterns in Gray-code order, so each step flips one sign and updates the sum in
    O(1): 2^16 patterns take milliseconds. The walk's float error stays far below `tol`.
    """
    k = len(differences)
    total = sum(differences)  # pattern 0: every sign +
    signs = [1] * k
    hits = 1 if abs(total) >= observed - tol else 0
    for i in range(1, 2**k):
        bit = (i & -i).bit_length() - 1  # the sign that flips between Gray codes i-1 and i
        signs[bit] = -signs[bit]
        total += 2 * signs[bit] * differences[bit]
        if abs(total) >= observed - tol:
            hits += 1
    return hits


def _random_hits(differences: Sequence[float], observed: float, tol: float, n: int, seed: int) -> int:
    rng = random.Random(seed)
    k = len(differences)
    hits = 0
    for _ in range(n):
        bits = rng.getrandbits(k)
        total = 0.0
        for j, d in enumerate(differences):
            total += -d if (bits >> j) & 1 else d
        if abs(total) >= observed - tol:
            hits += 1
    return hits


def sign_flip_p_value(
    differences: Sequence[float], *, exact_max: int = EXACT_MAX_CASES, n_random: int = RANDOM_PATTERNS,
    seed: int = SEED,
) -> tuple[float, bool, int]:
    """(p, exact, patterns) of the two-sided sign-flip test on `differences`; p in (0, 1]."""
    k = len(differences)
    if k == 0:
        raise ValueError("a comparison needs at least one case")
    observed = abs(sum(differences))
    tol = _tolerance(differences)
    if k <= exact_max:
        patterns = 2**k
        return _exact_hits(differences, observed, tol) / patterns, True, patterns
    hits = _random_hits(differences, observed, tol, n_random, seed)
    return (hits + 1) / (n_random + 1), False, n_random


def paired_comparison(
    a: Sequence[float], b: Sequence[float], *, level: float = LEVEL, seed: int = SEED,
    exact_max: int = EXACT_MAX_CASES, n_random: int = RANDOM_PATTERNS,
) -> PairedComparison:
    """Compare per-case values `a` and `b` (the same cases, in the same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired values need the same cases: {len(a)} against {len(b)}")
    if not a:
        raise ValueError("a comparison needs at least one case")
    differences = tuple(float(x) - float(y) for x, y in zip(a, b))
    p, exact, patterns = sign_flip_p_value(differences, exact_max=exact_max, n_random=n_random, seed=seed)
    return PairedComparison(
        differences=differences,
        difference=fmean(differences),
        ci=t_interval(differences, level),
        p_value=p,
        n_cases=len(differences),
        min_p=min_p_value(len(differences)),
        exact=exact,
        patterns=patterns,
    )
