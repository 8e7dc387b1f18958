"""Coverage of the judge–panel agreement's bootstrap intervals of ρ and α by number of runs.

    .venv/bin/python benchmarks/agreement_coverage.py [--sims 300] [--resamples 400]

Each simulated report has n runs whose (judge, panel) scores are bivariate normal with
correlation r = 0.6 and equal margins, put on a 0..10-like scale and rounded to 0.1 (so ties
happen, as with real scores). The population's Spearman's ρ is (6/π)·asin(r/2) and its interval α
is r. For each n and statistic it prints how often
`stats.agreement`'s percentile bootstrap interval (computed as if n were allowed, whatever
`MIN_INTERVAL_RUNS` says) contains the truth when one is given, how often every resample gave the
same value (zero width, now withheld), and how often no interval was given at all. This is the evidence
for `MIN_INTERVAL_RUNS` (docs/statistics.md); nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from assay.stats import agreement

R = 0.6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=300)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    truths = {"rho": (agreement.spearman, 6 / math.pi * math.asin(R / 2)),
              "alpha": (agreement.krippendorff_alpha, R)}  # equal margins: alpha is the correlation
    rng = random.Random(args.seed)
    print(f"r = {R}: true rho {truths['rho'][1]:.4f}, true alpha {R}; {args.sims} reports per n, "
          f"{args.resamples} resamples each")
    print(f"{'n':>3} {'statistic':<9} {'coverage':>9} {'zero width':>11} {'no interval':>12}")
    with mock.patch.object(agreement, "MIN_INTERVAL_RUNS", 2):
        for n in (3, 4, 5, 6, 8, 10, 15, 20, 30):
            hit = {k: 0 for k in truths}
            zero = {k: 0 for k in truths}
            none = {k: 0 for k in truths}
            for sim in range(args.sims):
                pairs = []
                for _ in range(n):
                    x = rng.gauss(0, 1)
                    y = R * x + math.sqrt(1 - R * R) * rng.gauss(0, 1)
                    pairs.append((round(x * 2 + 5, 1), round(y * 2 + 5, 1)))
                for name, (statistic, truth) in truths.items():
                    found = agreement.bootstrap_interval(pairs, statistic, seed=sim, resamples=args.resamples)
                    if found.interval is None:
                        none[name] += 1
                        zero[name] += "same value" in (found.reason or "")
                        continue
                    hit[name] += found.interval[0] <= truth <= found.interval[1]
            for name in truths:
                given = args.sims - none[name]
                print(f"{n:>3} {name:<9} {hit[name] / given if given else float('nan'):>9.3f} "
                      f"{zero[name] / args.sims:>11.3f} {none[name] / args.sims:>12.3f}")


if __name__ == "__main__":
    main()
