"""Bradley–Terry strengths from pairwise preferences, with a seeded bootstrap and ranks.

A panelist who says "run A was better than run B" needs no calibrated absolute scale, so
pairwise preferences rank models independently of how each panelist uses 0..10. Bradley–Terry
models P(i beats j) = p_i / (p_i + p_j); the fit is the maximum-likelihood p, reported as the
log-strength log p_i. A tie counts as half a win to each side.

The fit is Hunter's MM algorithm (Hunter, "MM algorithms for generalized Bradley–Terry models",
2004): p_i ← W_i / Σ_j n_ij / (p_i + p_j), which increases the likelihood at every step and
stops when no log-strength moves by more than `tol` (the convergence test; `converged` says
whether it passed within `max_iter`).

**Components.** The maximum-likelihood estimate is finite only among models that are strongly
connected by "has beaten" (a tie beats both ways): each can be reached from every other along
wins (Ford, 1957). So the models are split into the strongly connected components of that
graph. Within a component of two or more models the MLE is finite, and it is the MLE of the
preferences among them alone: in the likelihood over all models, the components lie infinitely
far apart, which makes every comparison between components certain. Strengths are centred so a
component's strengths average 0, and are comparable only within one component. A component of
one model has no finite strength: its `status` says why, `never_wins` (it never won), `never_loses`
(it never lost) or `separated` (it won and lost, but no cycle of wins ties it to any other model).

Between components the comparisons all point one way: component X is *above* Y when some model
of X beat some model of Y, directly or through other components. `ranks` counts, for each model,
the models above it: those of every component above its own, and those of its own component whose
bootstrap interval lies wholly above its interval (the board's statistical rank). A model that
lost every comparison it had therefore ranks below every model it lost to; components that never
meet (no chain of comparisons links them) are not ordered against each other.

**Bootstrap, in one frame.** Each resample draws len(preferences) preferences with replacement.
For each component of the full fit, the resample's preferences among its models are refitted,
centred on the same models as the full fit: one frame. A resample in which those models are not
strongly connected has no finite fit in that frame and is skipped for that component, so the
interval is conditional on the component staying one component; when fewer than half the
resamples keep it (`MIN_DEFINED_SHARE`), there is no interval (None).

Pure: preferences in, numbers out; the bootstrap's only randomness is `random.Random(seed)`.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import exp, log
from typing import Literal

Outcome = Literal["a", "b", "tie"]
Preference = tuple[str, str, Outcome]
Status = Literal["fitted", "never_wins", "never_loses", "separated"]
Interval = tuple[float, float]

OUTCOMES: tuple[str, ...] = ("a", "b", "tie")
TOLERANCE = 1e-10
MAX_ITERATIONS = 100_000
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
#: A component's bootstrap interval needs at least this share of resamples to fit it in one frame.
MIN_DEFINED_SHARE = 0.5


@dataclass(frozen=True)
class BTModel:
    """One model's fit: `strength` is None unless `status` is "fitted"; `component` indexes
    `BTFit.components`."""

    name: str
    strength: float | None
    status: Status
    wins: float
    losses: float
    n_comparisons: int
    component: int = 0


@dataclass(frozen=True)
class BTFit:
    models: dict[str, BTModel]
    iterations: int
    converged: bool
    #: The strongly connected components, each sorted, listed from the top: a component comes
    #: after every component above it.
    components: tuple[tuple[str, ...], ...] = ()
    #: For each component (by index), the indices of the components above it.
    above: tuple[frozenset[int], ...] = ()

    def strengths(self) -> dict[str, float]:
        """The fitted models' log-strengths, each centred within its component."""
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


def _reach(start: str, step: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in step[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _components(wins: dict[str, dict[str, float]]) -> tuple[list[tuple[str, ...]], list[frozenset[int]]]:
    """The strongly connected components of "has beaten", from the top, and which are above which.

    O(n · edges): boards have a handful of models."""
    forward: dict[str, set[str]] = {n: {j for j, w in wins[n].items() if w > 0} for n in wins}
    backward: dict[str, set[str]] = {n: set() for n in wins}
    for i, beaten in forward.items():
        for j in beaten:
            backward[j].add(i)
    below = {n: _reach(n, forward) for n in sorted(wins)}  # n itself and every model it beat, by any chain
    found: list[tuple[str, ...]] = []
    placed: set[str] = set()
    for n in sorted(wins):
        if n not in placed:
            comp = tuple(sorted(below[n] & _reach(n, backward)))
            placed.update(comp)
            found.append(comp)
    # the models strictly above a component: those that reach it and are not in it
    over = [{m for m in wins if comp[0] in below[m]} - set(comp) for comp in found]
    order = sorted(range(len(found)), key=lambda k: (len(over[k]), found[k]))
    comps = [found[k] for k in order]
    index = {n: k for k, comp in enumerate(comps) for n in comp}
    above = [frozenset(index[m] for m in over[k]) for k in order]
    return comps, above


def _strongly_connected(nodes: Sequence[str], wins: dict[str, dict[str, float]]) -> bool:
    """Whether every model in `nodes` reaches every other along "has beaten" among `nodes`."""
    inside = set(nodes)
    forward = {n: {j for j, w in wins[n].items() if w > 0 and j in inside} for n in nodes}
    backward: dict[str, set[str]] = {n: set() for n in nodes}
    for i, beaten in forward.items():
        for j in beaten:
            backward[j].add(i)
    start = nodes[0]
    return _reach(start, forward) == inside and _reach(start, backward) == inside


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


def _singleton_status(wins: float, losses: float) -> Status:
    if wins == 0:
        return "never_wins"
    if losses == 0:
        return "never_loses"
    return "separated"


def bradley_terry(preferences: Iterable[Preference], *, tol: float = TOLERANCE,
                  max_iter: int = MAX_ITERATIONS) -> BTFit:
    """The Bradley–Terry maximum-likelihood fit of `preferences` (a, b, "a" | "b" | "tie"), one
    per strongly connected component (see the module docstring)."""
    prefs = _checked(preferences)
    wins = win_matrix(prefs)
    comps, above = _components(wins)
    counts: Counter[str] = Counter()
    for a, b, _ in prefs:
        counts[a] += 1
        counts[b] += 1
    logs: dict[str, float] = {}
    iterations, converged = 0, True
    for comp in comps:
        if len(comp) >= 2:
            found, used, ok = _mm(comp, wins, tol, max_iter)
            logs.update(found)
            iterations, converged = max(iterations, used), converged and ok
    models = {}
    for k, comp in enumerate(comps):
        for name in comp:
            won = sum(wins[name].values(), 0.0)
            lost = sum((wins[j].get(name, 0.0) for j in wins), 0.0)
            models[name] = BTModel(
                name=name,
                strength=logs.get(name),
                status="fitted" if name in logs else _singleton_status(won, lost),
                wins=won,
                losses=lost,
                n_comparisons=counts[name],
                component=k,
            )
    return BTFit(models=dict(sorted(models.items())), iterations=iterations, converged=converged,
                 components=tuple(comps), above=tuple(above))


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (the common "type 7" definition)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_intervals(
    preferences: Sequence[Preference], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
    tol: float = 1e-8, max_iter: int = MAX_ITERATIONS,
) -> dict[str, Interval | None]:
    """A percentile bootstrap interval for each model fitted on the full data, every resample in
    the full fit's frame (see the module docstring); None when fewer than `MIN_DEFINED_SHARE` of
    the resamples can be put in that frame. Seeded: the same preferences give the same intervals
    on every read."""
    prefs = _checked(preferences)
    full = bradley_terry(prefs, tol=tol, max_iter=max_iter)
    frames = [comp for comp in full.components if len(comp) >= 2]
    draws: dict[str, list[float]] = {n: [] for comp in frames for n in comp}
    rng = random.Random(seed)
    for _ in range(resamples):
        wins = win_matrix(rng.choices(prefs, k=len(prefs)))
        for comp in frames:
            if all(n in wins for n in comp) and _strongly_connected(comp, wins):
                for n, v in _mm(comp, wins, tol, max_iter)[0].items():
                    draws[n].append(v)
    tail = (1.0 - level) / 2.0
    out: dict[str, Interval | None] = {}
    for n, values in draws.items():
        if len(values) < MIN_DEFINED_SHARE * resamples or not values:
            out[n] = None
            continue
        values.sort()
        out[n] = (_percentile(values, tail), _percentile(values, 1.0 - tail))
    return out


def ranks(fit: BTFit, intervals: Mapping[str, Interval | None]) -> dict[str, int]:
    """Each model's rank: 1 + the models above it — every model of a component above its own,
    and every model of its own component whose interval lies wholly above its interval (a model
    with no interval is never above or below one of its own component)."""
    size = [len(comp) for comp in fit.components]
    out = {}
    for name, m in fit.models.items():
        rank = 1 + sum(size[k] for k in fit.above[m.component])
        mine = intervals.get(name)
        if mine is not None:
            rank += sum(1 for other in fit.components[m.component]
                        if (theirs := intervals.get(other)) is not None and theirs[0] > mine[1])
        out[name] = rank
    return out
