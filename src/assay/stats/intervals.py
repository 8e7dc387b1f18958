"""95% intervals for board figures in [0, 1], clustered by case.

The trials of one case share one world, one briefing and one set of faults, so they are not
independent draws: an agent that fails a case tends to fail every trial of it. Treating 15 runs
on 5 cases as 15 independent coin flips would give intervals far too narrow. So the unit is the
case (Miller, "Adding Error Bars to Evals", 2024).

`rate_interval` is the one interval of every board figure bounded in [0, 1] (docs/statistics.md).
A figure is the ratio estimator p = Σnum_k / Σden_k over cases k = 1..K (pass_rate,
false_success_rate and objective_met_rate pool their runs; composite and consistency weigh each
case once, `mean_interval`). The interval is the Wilson-form score interval

    {π : (p − π)² ≤ c² · π(1 − π) / n_eff}

with

- the worst-case variance π(1 − π) of a [0, 1]-valued case ratio with mean π (Bhatia–Davis), so
  no spread is estimated from the same handful of cases;
- the Kish effective number of cases n_eff = (Σden)² / Σden² (= K when every case has the same
  denominator): the ratio estimator weighs case k by den_k / Σden, and Var(p) ≤ π(1 − π) / n_eff;
- c = t(0.975, K − 1), the small-sample quantile, not 1.96 (K = 1: df = 1, as for K = 2, so one
  case never reads narrower than two).

Its bounds depend on the data only through p, n_eff and K, and both are strictly increasing in p
on (0, 1): turning a failed run into a passed one (numerators up, denominators fixed) never
lowers either bound, so never worsens a statistical rank. p itself satisfies the inequality (the
left side is 0), so every figure lies inside its own interval; the interval is inside [0, 1] and
never collapses to a point.

`case_interval` is the previous rule (a t-interval over case means, switching to Wilson at n = K
when they do not vary), kept only until its last caller moves; its switch is discontinuous (0/15
read [0, 0.43] and 1/15 [0, 0.25] on 5 cases) and its interval of a pooled ratio need not contain
the ratio. `t_interval` stays for paired differences (`stats.pairwise`), which are not rates.

Pure functions: no I/O, no state. The Student t quantile is computed here (bisection on the CDF,
via the regularised incomplete beta function) so the core needs nothing beyond the stdlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import exp, fsum, isfinite, lgamma, log, sqrt
from statistics import NormalDist, fmean, stdev

LEVEL = 0.95
#: How far apart two values must be to count as varying, relative to their largest magnitude.
#: Case means are ratios of small integers, so equal rationals are equal floats; this only absorbs
#: float noise from other sums, at any scale (differences of 1e-13 vary as 1 and 2 do).
VARY_TOLERANCE = 1e-12

Interval = tuple[float, float]


def z_quantile(p: float) -> float:
    """The standard normal quantile (1.959963984540054 for p = 0.975)."""
    return NormalDist().inv_cdf(p)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, for 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2.0, 0.5)
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` ≥ 1 degrees of freedom (t(0.975, 4) = 2.7764…).

    Bisection on `t_cdf` to the last bit: slow next to a closed form, but exact enough to agree
    with any statistics table, and a board asks for only a handful of distinct `df`.
    """
    if df < 1:
        raise ValueError(f"the t distribution needs df >= 1, got {df}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def score_interval(p_hat: float, n: float, critical: float) -> Interval:
    """{π : (p_hat − π)² ≤ critical² · π(1 − π) / n}, the Wilson-form score interval for a
    proportion observed over `n` > 0 (effective) units, clipped to [0, 1].

    Both bounds are strictly increasing in `p_hat` on (0, 1) and it never collapses to a point.
    It always contains `p_hat`; the min/max below only keep float rounding from putting `p_hat` a
    hair outside its own interval.
    """
    if not n > 0:
        raise ValueError(f"a score interval needs n > 0, got {n}")
    if not 0.0 <= p_hat <= 1.0:
        raise ValueError(f"a proportion lies in [0, 1], got {p_hat}")
    c2 = critical * critical
    denom = 1.0 + c2 / n
    centre = (p_hat + c2 / (2.0 * n)) / denom
    half = critical / denom * sqrt(p_hat * (1.0 - p_hat) / n + c2 / (4.0 * n * n))
    lo, hi = _clip(centre - half), _clip(centre + half)
    return min(lo, p_hat), max(hi, p_hat)


def wilson_interval(p_hat: float, n: int, level: float = LEVEL) -> Interval:
    """The Wilson score interval for a proportion `p_hat` observed over `n` ≥ 1 independent units
    (the normal quantile)."""
    if n < 1:
        raise ValueError(f"a Wilson interval needs n >= 1, got {n}")
    return score_interval(p_hat, n, z_quantile(0.5 + level / 2.0))


def rate_interval(parts: Sequence[tuple[float, float]], level: float = LEVEL) -> Interval | None:
    """The case-clustered `level` interval of the ratio Σnum / Σden, one (num, den) per case
    with 0 ≤ num ≤ den (see the module docstring). Cases with den = 0 say nothing and are left
    out; None when no case is left (no number from too little)."""
    counted = []
    for num, den in parts:
        num, den = float(num), float(den)
        if not (isfinite(num) and isfinite(den) and 0.0 <= num <= den):
            raise ValueError(f"a case's part of a rate needs 0 <= numerator <= denominator, got {num}/{den}")
        if den > 0.0:
            counted.append((num, den))
    k = len(counted)
    if k == 0:
        return None
    total = fsum(d for _, d in counted)
    p_hat = min(1.0, fsum(n for n, _ in counted) / total)
    n_eff = total * total / fsum(d * d for _, d in counted)
    return score_interval(p_hat, n_eff, t_quantile(0.5 + level / 2.0, max(k - 1, 1)))


def mean_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The case-clustered `level` interval of the mean of per-case values in [0, 1], each case
    weighing the same: `rate_interval` with every denominator 1. None when there is no case."""
    for v in values:
        if not (isfinite(v) and 0.0 <= v <= 1.0):
            raise ValueError(f"a per-case value lies in [0, 1], got {v}")
    return rate_interval([(v, 1.0) for v in values], level)


def varies(values: Sequence[float], tolerance: float = VARY_TOLERANCE) -> bool:
    """Whether `values` hold at least two numbers that differ (beyond float noise at their scale)."""
    return len(values) >= 2 and max(values) - min(values) > tolerance * max(abs(v) for v in values)


def case_means(counts: Sequence[tuple[float, int]]) -> list[float]:
    """Per-case means from (successes, runs) per case, skipping cases with no runs that count.

    A failed run is a run with no success, so it is in `runs` and not in `successes`: failures
    count as 0, never as missing (docs/architecture.md, invariant 5).
    """
    return [s / n for s, n in counts if n > 0]


def case_interval(means: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The case-clustered interval for the mean of per-case means m_1..m_K (each in [0, 1]).

    None when there is no case (no number from too little). See the module docstring for the
    rule; the interval always contains mean(m) and lies within [0, 1].
    """
    k = len(means)
    if k == 0:
        return None
    if any(not 0.0 <= m <= 1.0 for m in means):
        raise ValueError("case means are rates in [0, 1]")
    centre = min(1.0, max(0.0, fmean(means)))
    if not varies(means):
        return wilson_interval(centre, k, level)
    half = t_quantile(0.5 + level / 2.0, k - 1) * stdev(means) / sqrt(k)
    return min(_clip(centre - half), centre), max(_clip(centre + half), centre)


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """mean ± t(·, K−1) · sd / √K over `values`, unclipped; None when they do not vary (a zero
    sd would give a zero-width interval that claims certainty it does not have)."""
    if not varies(values):
        return None
    k = len(values)
    centre = fmean(values)
    half = t_quantile(0.5 + level / 2.0, k - 1) * stdev(values) / sqrt(k)
    return centre - half, centre + half


#: The power a suite's detectable difference is stated at (the conventional 80%).
POWER = 0.8
#: Reference rates the worst case is sought over: π0 = i / POWER_GRID for i = 1 .. POWER_GRID / 2.
POWER_GRID = 1000


def detectable_difference(denominators: Sequence[float], level: float = LEVEL,
                          power: float = POWER) -> float | None:
    """The smallest pass-rate difference a suite can detect: the least δ such that, whatever the
    reference rate π0, an agent whose true rate is δ away from π0 (on the side where that is
    possible) has its board interval (`rate_interval`, at `level`) exclude π0 with probability
    `power`. `denominators` are the planned runs of each case (a suite: K cases × its reps).

    The board's interval excludes π0 exactly when |p̂ − π0| > c·√(π0(1 − π0) / n_eff) (the score
    test it inverts), with c = t(½ + level/2, K − 1) and n_eff = (Σden)² / Σden², the case-clustered
    Kish count. Taking p̂ ~ Normal(π1, π1(1 − π1) / n_eff), the same worst-case variance, the
    power is reached when π1 − π0 = c·√(π0(1 − π0) / n_eff) + t(power, K − 1)·√(π1(1 − π1) / n_eff);
    δ(π0) = π1 − π0 is solved by bisection for each π0 ≤ ½ (a rate above ½ mirrors one below,
    detected downward) and the largest is returned. None when some reference rate admits no
    detectable difference at all (π0 + c·√(π0(1 − π0) / n_eff) ≥ 1: too few cases), or no case.

    Equal denominators give n_eff = K: reps narrow nothing here, because the interval bounds a
    case's variance by the worst case rather than estimating it from its reps (docs/statistics.md).
    """
    dens = [float(d) for d in denominators if d > 0]
    k = len(dens)
    if k == 0:
        return None
    if not 0.0 < power < 1.0 or not 0.0 < level < 1.0:
        raise ValueError("level and power lie strictly between 0 and 1")
    return _detectable(k, fsum(dens) ** 2 / fsum(d * d for d in dens), level, power)


@lru_cache(maxsize=64)
def _detectable(k: int, n_eff: float, level: float, power: float) -> float | None:
    df = max(k - 1, 1)
    c = t_quantile(0.5 + level / 2.0, df)
    z = t_quantile(power, df)
    worst = 0.0
    for i in range(1, POWER_GRID // 2 + 1):
        p0 = i / POWER_GRID
        bar = p0 + c * sqrt(p0 * (1.0 - p0) / n_eff)

        def gap(p1: float) -> float:
            return p1 - bar - z * sqrt(p1 * (1.0 - p1) / n_eff)

        if gap(1.0) < 0.0:
            return None
        lo, hi = p0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2.0
            if gap(mid) < 0.0:
                lo = mid
            else:
                hi = mid
        worst = max(worst, hi - p0)
    return worst
