"""Coverage and width of the board's 95% intervals under a beta-binomial model of cases.

    .venv/bin/python benchmarks/interval_coverage.py [--boards 4000] [--seed 0]

A board entry plays K cases with `trials` runs each. Cases differ in difficulty, so each case k
has its own pass probability θ_k ~ Beta with mean μ and intra-case correlation ρ (the share of a
run's variance that is the case's: ρ = 0 makes every run an independent coin flip, ρ = 1 makes
every case all-pass or all-fail), and its runs pass ~ Binomial(trials, θ_k). The figure is the
pooled pass rate Σpassed / Σruns; the truth it estimates is μ. For each (K, μ, ρ) `--boards`
boards are drawn and each method's interval is checked for containing μ.

Methods:
- `old`: `stats.intervals.case_interval` over the per-case means (t over K − 1 when they vary,
  Wilson at n = K when they do not; the rule before issue 24);
- `new`: `stats.intervals.rate_interval` (the Wilson-form score interval with the worst-case
  variance, n_eff cases and t(0.975, K − 1); docs/statistics.md);
- `new-z`: the same score interval with 1.96 in place of the t quantile (for comparison only).

`--unequal` draws each case's number of runs from 1..2·trials instead (as objective_met_rate's
win conditions differ per case), so n_eff < K.

It prints, per K: the mean coverage over the (μ, ρ) grid, the worst cell's coverage, the mean
width, and how often the figure itself (the pooled rate) lies outside the interval. Nothing here
asserts anything; the figures are for docs/statistics.md.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from assay.stats.intervals import (
    case_interval,
    rate_interval,
    score_interval,
    z_quantile,
)

KS = (5, 10, 40)
MUS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
RHOS = (0.1, 0.4, 0.8, 0.99)
Z = z_quantile(0.975)


def _new_z(parts: list[tuple[int, int]]) -> tuple[float, float]:
    total = sum(d for _, d in parts)
    n_eff = total * total / sum(d * d for _, d in parts)
    return score_interval(sum(n for n, _ in parts) / total, n_eff, Z)


def _old(parts: list[tuple[int, int]]) -> tuple[float, float]:
    found = case_interval([n / d for n, d in parts])
    assert found is not None
    return found


METHODS = {"old": _old, "new": lambda parts: rate_interval(parts), "new-z": _new_z}


def _board(rng: random.Random, k: int, trials: int, mu: float, rho: float, unequal: bool) -> list[tuple[int, int]]:
    a, b = mu * (1.0 / rho - 1.0), (1.0 - mu) * (1.0 / rho - 1.0)
    parts = []
    for _ in range(k):
        theta = rng.betavariate(a, b)
        runs = rng.randint(1, 2 * trials) if unequal else trials
        parts.append((sum(rng.random() < theta for _ in range(runs)), runs))
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=4000, help="boards drawn per (K, mu, rho) cell")
    parser.add_argument("--trials", type=int, default=3, help="runs per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unequal", action="store_true", help="runs per case drawn from 1..2*trials")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{args.boards} boards per cell, {args.trials} trials per case"
          f"{' (unequal: 1..' + str(2 * args.trials) + ')' if args.unequal else ''}, "
          f"mu in {MUS}, rho in {RHOS}")
    print(f"{'K':>3} {'method':<6} {'mean coverage':>14} {'worst cell':>22} {'mean width':>11} {'figure outside':>15}")
    for k in KS:
        cells: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in METHODS}
        outside = {m: 0 for m in METHODS}
        for mu in MUS:
            for rho in RHOS:
                hits = {m: 0 for m in METHODS}
                widths: dict[str, list[float]] = {m: [] for m in METHODS}
                for _ in range(args.boards):
                    parts = _board(rng, k, args.trials, mu, rho, args.unequal)
                    figure = sum(n for n, _ in parts) / sum(d for _, d in parts)
                    for name, method in METHODS.items():
                        lo, hi = method(parts)
                        hits[name] += lo <= mu <= hi
                        outside[name] += not lo <= figure <= hi
                        widths[name].append(hi - lo)
                for name in METHODS:
                    cells[name].append((hits[name] / args.boards, fmean(widths[name]), mu, rho))
        for name, found in cells.items():
            worst = min(found)
            share = outside[name] / (args.boards * len(found))
            print(f"{k:>3} {name:<6} {fmean(c[0] for c in found):>14.3f} "
                  f"{worst[0]:>8.3f} (mu {worst[2]}, rho {worst[3]}) {fmean(c[1] for c in found):>11.3f} "
                  f"{share:>15.4f}")


if __name__ == "__main__":
    main()
