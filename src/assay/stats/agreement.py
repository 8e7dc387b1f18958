"""Judge–panel agreement: how closely a trait judge's scores follow the human panel's (issue 12,
item 7). Pure functions over paired numbers, one pair per run both scored; no I/O.

A judge earns trust by being measured against people. For one (trait, category) pair the units are
runs, and each run carries two numbers: the judge's trait mean (0..1, the mean of its valid passes)
and the panel's median in the category (0..10, across the approved panelists whose scorecards
count). Before any comparison both are put on the panel's scale: **the judge's mean × 10**
(`JUDGE_SCALE`), so an α's disagreements read in rating points.

* `spearman`: Spearman's ρ, the Pearson correlation of the two rank vectors, ties given their
  average rank. It asks only whether the judge *orders* runs as people do, so any strictly
  increasing transform of either side leaves it unchanged (and the scale does not matter).
* `krippendorff_alpha`: Krippendorff's α for interval data with two coders (judge and panel) who
  both coded every unit: α = 1 − D_o / D_e, where D_o is the mean squared difference within a
  unit, (1/N) Σ (j_u − p_u)², and D_e the mean squared difference between any two of the 2N pooled
  values, 2·s² with s² their sample variance (n − 1). It asks whether the two give the same
  *numbers*: 1 is perfect agreement, 0 what chance pairing would give, below 0 systematic
  disagreement. A judge that is right about order but harsh by two points has ρ = 1 and α < 1.
* `bootstrap_interval`: a 95% percentile interval of either statistic, resampling runs with
  replacement 2,000 times from a generator with a fixed seed (`seed_for(name)`), so every read of
  the same data gives the same interval. A resample on which the statistic is undefined (every run
  drawn the same, no variation) is skipped. The interval always contains the estimate.

No number from too little (docs/architecture.md, invariant 6): below `MIN_RUNS` runs, or when a side does not
vary, a statistic is `Figure(None, reason)` — never NaN, never a crash. Its interval is withheld,
`Bounds(None, reason)`, where the data cannot support one (docs/statistics.md):

- below `MIN_INTERVAL_RUNS` runs (10). A bootstrap over 2 or 3 runs has a handful of distinct
  resamples, most of them the sample again: 3 perfectly ordered runs read ρ in [1, 1]. In
  `benchmarks/agreement_coverage.py` ρ's interval had zero width in 41% of 3-run reports and 4% of
  5-run ones, and covered 0.94–0.98 from 5 runs on (α's percentile interval undercovers at every n,
  0.84–0.92: docs/statistics.md);
- when fewer than half the resamples define the statistic;
- when every resample gives the same value (a zero-width interval would claim a certainty that
  resampling the same few values cannot give).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assay.stats.panel import LEVEL, RESAMPLES, percentile_interval, seed_for

__all__ = [
    "JUDGE_SCALE",
    "MIN_INTERVAL_RUNS",
    "MIN_RUNS",
    "Agreement",
    "Bounds",
    "Figure",
    "agreement",
    "bootstrap_interval",
    "krippendorff_alpha",
    "on_one_scale",
    "ranks",
    "seed_for",
    "spearman",
]

#: The judge's trait means (0..1) are multiplied by this to sit on the panel's 0..10 scale.
JUDGE_SCALE = 10.0
#: Fewest runs a statistic is computed from (one pair has no order and no spread).
MIN_RUNS = 2
#: Fewest runs a bootstrap interval is given for (see the module docstring).
MIN_INTERVAL_RUNS = 10
#: A resampled statistic must be defined on at least this share of resamples to give an interval.
MIN_DEFINED_SHARE = 0.5

Pair = tuple[float, float]
Interval = tuple[float, float]


@dataclass(frozen=True)
class Figure:
    """A statistic, or None with the reason in words."""

    value: float | None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.reason is None):
            raise ValueError("a figure has a value or a reason, not both and not neither")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError("a figure is never NaN or infinite")


@dataclass(frozen=True)
class Bounds:
    """An interval, or None with the reason it is withheld, in words."""

    interval: Interval | None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.interval is None) == (self.reason is None):
            raise ValueError("bounds have an interval or a reason, not both and not neither")


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of `values`, tied values sharing the average of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2.0 + 1.0  # the mean of ranks start+1 .. end+1
        for k in range(start, end + 1):
            out[order[k]] = shared
        start = end + 1
    return out


def _checked(pairs: Sequence[Pair]) -> str | None:
    if len(pairs) < MIN_RUNS:
        return f"{len(pairs)} run(s) scored by both, fewer than {MIN_RUNS}"
    if not all(math.isfinite(a) and math.isfinite(b) for a, b in pairs):
        raise ValueError("agreement is computed over finite numbers only")
    return None


def spearman(pairs: Sequence[Pair]) -> Figure:
    """Spearman's ρ over (judge, panel) pairs: the Pearson correlation of their average ranks."""
    short = _checked(pairs)
    if short is not None:
        return Figure(None, short)
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        side = "the judge" if len(set(xs)) == 1 else "the panel"
        return Figure(None, f"{side} gave every run the same score: no order to compare")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = math.fsum(rx) / len(rx), math.fsum(ry) / len(ry)
    dx = [r - mx for r in rx]
    dy = [r - my for r in ry]
    sxx = math.fsum(d * d for d in dx)
    syy = math.fsum(d * d for d in dy)
    rho = math.fsum(a * b for a, b in zip(dx, dy)) / math.sqrt(sxx * syy)
    return Figure(max(-1.0, min(1.0, rho)))


def krippendorff_alpha(pairs: Sequence[Pair]) -> Figure:
    """Krippendorff's α (interval metric) for two coders who both coded every unit; `pairs` must
    already be on one scale."""
    short = _checked(pairs)
    if short is not None:
        return Figure(None, short)
    pooled = [v for pair in pairs for v in pair]
    if len(set(pooled)) == 1:
        return Figure(None, "every score, judge's and panel's, is the same: no variation to agree on")
    mean = math.fsum(pooled) / len(pooled)
    expected = 2.0 * math.fsum((v - mean) ** 2 for v in pooled) / (len(pooled) - 1)
    observed = math.fsum((a - b) ** 2 for a, b in pairs) / len(pairs)
    return Figure(1.0 - observed / expected)


def bootstrap_interval(pairs: Sequence[Pair], statistic: Callable[[Sequence[Pair]], Figure], *, seed: int,
                       resamples: int = RESAMPLES, level: float = LEVEL) -> Bounds:
    """The percentile bootstrap interval of `statistic` over runs, or the reason there is none
    (see the module docstring)."""
    estimate = statistic(pairs)
    if estimate.value is None:
        return Bounds(None, estimate.reason)
    n = len(pairs)
    if n < MIN_INTERVAL_RUNS:
        return Bounds(None, f"{n} runs, fewer than {MIN_INTERVAL_RUNS}: too few to bootstrap an interval")
    rng = random.Random(seed)
    draws: list[float] = []
    for _ in range(resamples):
        value = statistic([pairs[rng.randrange(n)] for _ in range(n)]).value
        if value is not None:
            draws.append(value)
    if len(draws) < MIN_DEFINED_SHARE * resamples or not draws:
        return Bounds(None, "too few resamples define the statistic: no interval")
    if min(draws) == max(draws):
        return Bounds(None, "every resample gives the same value: resampling cannot measure its uncertainty")
    return Bounds(percentile_interval(draws, estimate.value, level))


@dataclass(frozen=True)
class Agreement:
    """Both statistics of one (trait, category) pair, with n and their intervals."""

    n: int
    spearman: Figure
    spearman_ci: Bounds
    alpha: Figure
    alpha_ci: Bounds


def on_one_scale(judge_mean: float, panel_median: float) -> Pair:
    """A run's (judge, panel) pair on the panel's 0..10 scale: the judge's mean × `JUDGE_SCALE`."""
    return judge_mean * JUDGE_SCALE, panel_median


def agreement(pairs: Sequence[Pair], *, seed: int, resamples: int = RESAMPLES, level: float = LEVEL) -> Agreement:
    """ρ and α of `pairs` (already on one scale, see `on_one_scale`), each with its seeded
    bootstrap interval; the two intervals draw the same resampled runs (one seed)."""
    pairs = list(pairs)
    return Agreement(
        n=len(pairs),
        spearman=spearman(pairs),
        spearman_ci=bootstrap_interval(pairs, spearman, seed=seed, resamples=resamples, level=level),
        alpha=krippendorff_alpha(pairs),
        alpha_ci=bootstrap_interval(pairs, krippendorff_alpha, seed=seed, resamples=resamples, level=level),
    )
