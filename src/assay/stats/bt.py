"""Bradley–Terry strengths from pairwise preferences, with a seeded bootstrap.

A panelist who says "run A was better than run B" needs no calibrated absolute scale, so
pairwise preferences rank models independently of how each panelist uses 0..10. Bradley–Terry
models P(i beats j) = p_i / (p_i + p_j); the fit is the maximum-likelihood p, reported as the
log-strength log p_i, centred so the fitted models' strengths average 0 (only differences are
identified). A tie counts as half a win to each side.

The fit is Hunter's MM algorithm (Hunter, "MM algorithms for generalized Bradley–Terry models",
2004): p_i ← W_i / Σ_j n_ij / (p_i + p_j), which increases the likelihood at every step and
stops when no log-strength moves by more than `tol` (the convergence test; `converged` says
whether it passed within `max_iter`).

The maximum-likelihood estimate is finite only when every model both wins and loses against the
others, in a connected way (Ford, 1957). A model that never wins has MLE strength −∞ and one that
never loses +∞; they are reported by `status`, never as ±infinity, and removed from the fit —
which is exactly the limit of the likelihood as their strength runs off, so the others' fitted
strengths are the true maxima. Removal is repeated: a model whose only losses were to a model
that never loses now never loses among the rest. Whatever is still not strongly connected after
that cannot be placed on one finite scale, and is `separated`.

Pure: preferences in, numbers out; the bootstrap's only randomness is `random.Random(seed)`.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import exp, inf, isfinite, log
from typing import Literal

Outcome = Literal["a", "b", "tie"]
Preference = tuple[str, str, Outcome]
Status = Literal["fitted", "never_wins", "never_loses", "separated"]

OUTCOMES: tuple[str, ...] = ("a", "b", "tie")
TOLERANCE = 1e-10
MAX_ITERATIONS = 100_000
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class BTModel:
    """One model's fit: `strength` is None unless `status` is "fitted"."""

    name: str
    strength: float | None
    status: Status
    wins: float
    losses: float
    n_comparisons: int


@dataclass(frozen=True)
class BTFit:
    models: dict[str, BTModel]
    iterations: int
    converged: bool

    def strengths(self) -> dict[str, float]:
        """The fitted models' centred log-strengths."""
        return {n: m.strength for n, m in self.models.items() if m.strength is not None}


def _checked(preferences: Iterable[Preference]) -> list[Preference]:
    out = []
    for a, b, outcome in preferences:
        if outcome not in OUTCOMES:
            raise ValueError(f"a preference is 'a', 'b' or 'tie', got {outcome!r}")
        if a == b:
            raise ValueError(f"a model is not compared with itself: {a!r}")
        out.append((a, b, outcome))
    return out


def win_matrix(preferences: Iterable[Preference]) -> dict[str, dict[str, float]]:
    """w[i][j] = how often i beat j, a tie counting half to each."""
    wins: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for a, b, outcome in preferences:
        wins[a]
        wins[b]
        if outcome == "a":
            wins[a][b] += 1.0
        elif outcome == "b":
            wins[b][a] += 1.0
        else:
            wins[a][b] += 0.5
            wins[b][a] += 0.5
    return wins


def _strongly_connected(nodes: set[str], wins: dict[str, dict[str, float]]) -> bool:
    """Whether every model in `nodes` reaches every other along "has beaten" edges."""
    if len(nodes) <= 1:
        return True
    start = min(nodes)

    def reach(step: dict[str, set[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in step[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    forward: dict[str, set[str]] = {n: set() for n in nodes}
    backward: dict[str, set[str]] = {n: set() for n in nodes}
    for i in nodes:
        for j, w in wins[i].items():
            if j in nodes and w > 0:
                forward[i].add(j)
                backward[j].add(i)
    return reach(forward) == nodes and reach(backward) == nodes


def _peel(wins: dict[str, dict[str, float]]) -> tuple[set[str], dict[str, Status]]:
    """The models with a finite MLE, and the status of every one that has none."""
    remaining = set(wins)
    status: dict[str, Status] = {}
    while True:
        flagged: dict[str, Status] = {}
        for i in sorted(remaining):
            won = sum(w for j, w in wins[i].items() if j in remaining)
            lost = sum(wins[j].get(i, 0.0) for j in remaining)
            if won == 0 and lost == 0:
                flagged[i] = "separated"  # compared only with models already removed
            elif won == 0:
                flagged[i] = "never_wins"
            elif lost == 0:
                flagged[i] = "never_loses"
        if not flagged:
            break
        status.update(flagged)
        remaining -= set(flagged)
    if not _strongly_connected(remaining, wins):
        status.update({i: "separated" for i in remaining})
        remaining = set()
    return remaining, status


def _mm(models: Sequence[str], wins: dict[str, dict[str, float]], tol: float,
        max_iter: int) -> tuple[dict[str, float], int, bool]:
    """Centred log-strengths by MM iterations over the pairs among `models`."""
    inside = set(models)
    total_wins = {i: sum(w for j, w in wins[i].items() if j in inside) for i in models}
    pairs = {i: [(j, wins[i].get(j, 0.0) + wins[j].get(i, 0.0)) for j in models
                 if j != i and wins[i].get(j, 0.0) + wins[j].get(i, 0.0) > 0] for i in models}
    logs = {i: 0.0 for i in models}
    if len(models) < 2:
        return logs, 0, True
    p = {i: 1.0 for i in models}
    for iteration in range(1, max_iter + 1):
        new = {i: total_wins[i] / sum(n / (p[i] + p[j]) for j, n in pairs[i]) for i in models}
        new_logs = {i: log(v) for i, v in new.items()}
        centre = sum(new_logs.values()) / len(models)
        new_logs = {i: v - centre for i, v in new_logs.items()}
        moved = max(abs(new_logs[i] - logs[i]) for i in models)
        logs = new_logs
        p = {i: exp(v) for i, v in logs.items()}
        if moved < tol:
            return logs, iteration, True
    return logs, max_iter, False


def bradley_terry(preferences: Iterable[Preference], *, tol: float = TOLERANCE,
                  max_iter: int = MAX_ITERATIONS) -> BTFit:
    """The Bradley–Terry maximum-likelihood fit of `preferences` (a, b, "a" | "b" | "tie")."""
    prefs = _checked(preferences)
    wins = win_matrix(prefs)
    fitted, status = _peel(wins)
    order = sorted(fitted)
    logs, iterations, converged = _mm(order, wins, tol, max_iter)
    counts: Counter[str] = Counter()
    for a, b, _ in prefs:
        counts[a] += 1
        counts[b] += 1
    models = {
        name: BTModel(
            name=name,
            strength=logs[name] if name in fitted else None,
            status=status.get(name, "fitted"),
            wins=sum(wins[name].values(), 0.0),
            losses=sum((wins[j].get(name, 0.0) for j in wins), 0.0),
            n_comparisons=counts[name],
        )
        for name in sorted(wins)
    }
    return BTFit(models=models, iterations=iterations, converged=converged)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (the common "type 7" definition)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    a, b = sorted_values[lo], sorted_values[hi]
    if a == b or pos == lo or a == -inf:
        return a
    if b == inf:
        return b
    return a + (b - a) * (pos - lo)


def bootstrap_intervals(
    preferences: Sequence[Preference], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
    tol: float = 1e-8, max_iter: int = MAX_ITERATIONS,
) -> dict[str, tuple[float | None, float | None] | None]:
    """A percentile bootstrap interval for each model fitted on the full data.

    Each resample draws len(preferences) preferences with replacement and refits. A model that
    never wins (never loses) in a resample counts as −∞ (+∞) there, so an interval can be
    unbounded on one side: that end is None, never infinity. A resample that leaves a model out,
    or separated, says nothing about its strength and is skipped for it. Seeded: the same
    preferences give the same intervals on every read.
    """
    prefs = _checked(preferences)
    full = bradley_terry(prefs, tol=tol, max_iter=max_iter)
    names = [n for n, m in full.models.items() if m.status == "fitted"]
    draws: dict[str, list[float]] = {n: [] for n in names}
    rng = random.Random(seed)
    for _ in range(resamples):
        sample = rng.choices(prefs, k=len(prefs))
        fit = bradley_terry(sample, tol=tol, max_iter=max_iter)
        for n in names:
            m = fit.models.get(n)
            if m is None or m.status == "separated":
                continue
            draws[n].append(m.strength if m.strength is not None else (inf if m.status == "never_loses" else -inf))
    tail = (1.0 - level) / 2.0
    out: dict[str, tuple[float | None, float | None] | None] = {}
    for n in names:
        values = sorted(draws[n])
        if not values:
            out[n] = None
            continue
        lo, hi = _percentile(values, tail), _percentile(values, 1.0 - tail)
        out[n] = (lo if isfinite(lo) else None, hi if isfinite(hi) else None)
    return out
