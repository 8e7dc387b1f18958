"""Pure aggregation over trials: pass rate, consistency, false success, pass^k.

Inputs are plain per-trial outcomes grouped by case; the denominator is always the plan (a
trial that never produced a record is a failed trial, never a dropped one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb


@dataclass(frozen=True)
class TrialOutcome:
    passed: bool
    false_success: bool


def pass_rate(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    n = sum(len(t) for t in cases.values())
    return sum(o.passed for t in cases.values() for o in t) / n if n else 0.0


def consistent(trials: Sequence[TrialOutcome]) -> bool:
    """A case is consistent when every one of its trials agrees (all pass or all fail)."""
    return len({o.passed for o in trials}) <= 1


def consistency(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    return sum(consistent(t) for t in cases.values()) / len(cases) if cases else 0.0


def false_successes(cases: Mapping[str, Sequence[TrialOutcome]]) -> int:
    return sum(o.false_success for t in cases.values() for o in t)


def false_success_rate(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    n = sum(len(t) for t in cases.values())
    return false_successes(cases) / n if n else 0.0


def pass_hat_k(cases: Mapping[str, Sequence[TrialOutcome]], k: int) -> float:
    """Mean over cases of C(c, k) / C(n, k): the chance that k trials drawn from n all pass."""
    if not cases:
        return 0.0
    total = 0.0
    for trials in cases.values():
        n, c = len(trials), sum(o.passed for o in trials)
        if k < 1 or k > n:
            raise ValueError(f"pass^k needs 1 <= k <= trials ({n}), got {k}")
        total += comb(c, k) / comb(n, k)
    return total / len(cases)


def summary(cases: Mapping[str, Sequence[TrialOutcome]]) -> dict[str, object]:
    k_max = min((len(t) for t in cases.values()), default=0)
    return {
        "cases": len(cases),
        "trials": sum(len(t) for t in cases.values()),
        "pass_rate": pass_rate(cases),
        "consistency": consistency(cases),
        "false_success_rate": false_success_rate(cases),
        "false_successes": false_successes(cases),
        "pass_hat_k": {str(k): pass_hat_k(cases, k) for k in range(1, k_max + 1)},
    }
