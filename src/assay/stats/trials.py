"""Pure aggregation over trials: pass rate, consistency, false success, pass^k — the one place
these statistics are computed in Python (the results JSON's summary, and `stats.board`, which
`assay verify` recounts the board with; the board's SQL views compute the same sums and the
tests hold the two equal).

Inputs are plain per-trial outcomes grouped by case, each with the oracle's verdict as recorded
(`run_verdicts`): nothing here decides whether a run passed. The denominator, in one sentence:
**every figure counts the planned runs — a run that crashed, timed out, returned nothing or never
arrived is a failure, never a dropped one (docs/architecture.md, "Failures count") — minus the
participation-gated ones, which the methodology excludes from aggregation**; a case with no
counted trial is not counted either (`counted`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import TypedDict


@dataclass(frozen=True)
class TrialOutcome:
    passed: bool
    false_success: bool
    gated: bool = False  # below the participation floor: left out of every figure


def counted(cases: Mapping[str, Sequence[TrialOutcome]]) -> dict[str, list[TrialOutcome]]:
    """The trials every figure counts: each case's planned trials minus its participation-gated
    ones; a case left with none is dropped (it has no figure to give)."""
    out = {cid: [o for o in trials if not o.gated] for cid, trials in cases.items()}
    return {cid: trials for cid, trials in out.items() if trials}


def pass_rate(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    cases = counted(cases)
    n = sum(len(t) for t in cases.values())
    return sum(o.passed for t in cases.values() for o in t) / n if n else 0.0


def consistent(trials: Sequence[TrialOutcome]) -> bool:
    """A case is consistent when every one of its counted trials agrees (all pass or all fail)."""
    return len({o.passed for o in trials if not o.gated}) <= 1


CONSISTENCY_NEEDS_TRIALS = ("withheld: one trial a case was planned, and one trial always agrees with itself "
                            "(--trials 3 measures it)")


def consistency(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    cases = counted(cases)
    return sum(consistent(t) for t in cases.values()) / len(cases) if cases else 0.0


def false_successes(cases: Mapping[str, Sequence[TrialOutcome]]) -> int:
    return sum(o.false_success for t in counted(cases).values() for o in t)


def false_success_rate(cases: Mapping[str, Sequence[TrialOutcome]]) -> float:
    n = sum(len(t) for t in counted(cases).values())
    return false_successes(cases) / n if n else 0.0


def pass_hat_k(cases: Mapping[str, Sequence[TrialOutcome]], k: int) -> float:
    """Mean over cases of C(c, k) / C(n, k): the chance that k trials drawn from n all pass."""
    return _pass_hat(_counts(counted(cases)), k)


def _counts(cases: Mapping[str, Sequence[TrialOutcome]]) -> list[tuple[int, int]]:
    """(trials, passes) per case."""
    return [(len(trials), sum(o.passed for o in trials)) for trials in cases.values()]


def _pass_hat(counts: Sequence[tuple[int, int]], k: int) -> float:
    if not counts:
        return 0.0
    total = 0.0
    for n, c in counts:
        if k < 1 or k > n:
            raise ValueError(f"pass^k needs 1 <= k <= trials ({n}), got {k}")
        total += comb(c, k) / comb(n, k)
    return total / len(counts)


def _pass_hat_all(counts: Sequence[tuple[int, int]], k_max: int) -> list[float]:
    """`_pass_hat(counts, k)` for k = 1..k_max, with the same exact integer arithmetic, in time
    linear in k_max per case: C(c, k) and C(n, k) follow from C(c, k-1) and C(n, k-1), where
    computing each afresh would cost O(k) (a case may have thousands of trials)."""
    if not counts:
        return [0.0] * k_max
    totals = [0.0] * k_max
    for n, c in counts:
        cc = nn = 1
        for k in range(1, k_max + 1):
            cc = cc * (c - k + 1) // k if cc else 0
            nn = nn * (n - k + 1) // k
            totals[k - 1] += cc / nn
    return [t / len(counts) for t in totals]


class SummaryFigures(TypedDict):
    """The results JSON's summary as `summary` computes it (a TypedDict: `records.Summary` is made
    from it key by key)."""

    cases: int
    trials: int
    pass_rate: float
    consistency: float | None
    consistency_reason: str | None
    false_success_rate: float
    false_successes: int
    pass_hat_k: dict[str, float]


def summary(cases: Mapping[str, Sequence[TrialOutcome]]) -> SummaryFigures:
    """The results JSON's summary. `cases` and `trials` are the counted ones: the denominators.

    Consistency is withheld (None, with the reason) when the batch was planned with one trial a
    case: one trial always agrees with itself, so the figure would read 1.00 whatever the agent did.
    A case left with one counted trial by the participation gate still counts, as on the board."""
    single = bool(cases) and min(len(t) for t in cases.values()) < 2
    cases = counted(cases)
    k_max = min((len(t) for t in cases.values()), default=0)
    counts = _counts(cases)
    return {
        "cases": len(cases),
        "trials": sum(len(t) for t in cases.values()),
        "pass_rate": pass_rate(cases),
        "consistency": None if single else consistency(cases),
        "consistency_reason": CONSISTENCY_NEEDS_TRIALS if single else None,
        "false_success_rate": false_success_rate(cases),
        "false_successes": false_successes(cases),
        "pass_hat_k": {str(k): v for k, v in enumerate(_pass_hat_all(counts, k_max), start=1)},
    }
