"""The panel board's uncertainty: bootstrap intervals on the medians board, and the pairwise ranking.

Item 4 of issue 12. A model's panel figures are means over its scored runs of per-run medians
across panelists (`assay.store.views.panel_0008`). Two sources of noise feed them: which runs the
model happened to get, and which panelists happened to rate each run. So the bootstrap is
two-stage (a nested, or "cluster", bootstrap): draw the model's runs with replacement, and within
each drawn run draw its scorecards with replacement; recompute every per-run, per-category median,
the per-category means over runs, and the overall mean over categories. 2,000 resamples; the 95%
interval is the 2.5th and 97.5th percentiles of the resampled figures. The generator is seeded
from the model's slug, so every read gives the same interval, and a model's interval does not
depend on which other models are on the board.

A percentile interval need not contain its own point estimate (a median can sit at the edge of
its bootstrap distribution); the board promises that it does, so each end is widened to the
estimate where needed. Panelists who agree give resamples that agree, hence a narrow interval;
panelists who disagree give a wide one. A model rated by fewer than two distinct panelists gets no
interval (None, with the reason): the spread between panelists cannot be seen in one panelist's cards.

Item 5's pairwise part: `latest_preferences` keeps one preference per (panelist, unordered run
pair), the latest; `pairwise_board` turns the counted ones into Bradley–Terry strengths with
`assay.stats.bt`, a bootstrap interval in one frame and a rank within and between the
components of the comparison graph.

Pure: rows in, numbers out; no I/O.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, median
from typing import Any

from assay.stats import bt

RESAMPLES = 2000
LEVEL = 0.95
SEED = 0
#: Distinct panelists whose comparisons must involve a model before it is ranked pairwise.
PAIRWISE_QUORUM = 3
#: Distinct panelists whose cards a model's panel intervals need (see `bootstrap_panel`).
MIN_PANELISTS = 2

#: A scorecard's ratings: category -> 0..10 (a scorecard may be partial).
Card = Mapping[str, float]
Interval = tuple[float, float]


def seed_for(name: str, seed: int = SEED) -> int:
    """A generator seed for one model: stable across processes (never Python's `hash()`)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")


def panel_figures(runs: Sequence[Sequence[Card]]) -> tuple[float | None, dict[str, float]]:
    """(overall, {category: mean}) as the board computes them: per run and category the median
    across the cards that rate it, per category the mean over the runs that have one, overall the
    mean over categories. (None, {}) when nothing is rated."""
    per_category: dict[str, list[float]] = {}
    for cards in runs:
        ratings: dict[str, list[float]] = {}
        for card in cards:
            for category, rating in card.items():
                ratings.setdefault(category, []).append(float(rating))
        for category, values in ratings.items():
            per_category.setdefault(category, []).append(median(values))
    means = {c: fmean(v) for c, v in per_category.items()}
    return (fmean(means.values()) if means else None), means


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics ("type 7")."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentile_interval(draws: list[float], estimate: float, level: float) -> Interval:
    """The `level` percentile interval of bootstrap `draws`, widened to hold the estimate itself."""
    values = sorted(draws)
    tail = (1.0 - level) / 2.0
    lo, hi = percentile(values, tail), percentile(values, 1.0 - tail)
    return min(lo, estimate), max(hi, estimate)


@dataclass(frozen=True)
class PanelIntervals:
    """A model's intervals, or (overall None, no categories) with the reason they are withheld."""

    overall: Interval | None
    categories: dict[str, Interval]
    reason: str | None = None


def bootstrap_panel(runs: Sequence[Sequence[Card]], *, panelists: int, seed: int = SEED,
                    resamples: int = RESAMPLES, level: float = LEVEL) -> PanelIntervals | None:
    """The two-stage percentile bootstrap of a model's panel figures (see the module's docstring),
    `panelists` being how many distinct panelists wrote its cards; None for a model with no rated
    run. Every interval contains its point estimate. Below `MIN_PANELISTS` distinct panelists the
    intervals are withheld with the reason: one panelist's cards resample to that panelist's own
    ratings, so the spread between panelists, half of what the interval measures, is never seen
    (four runs all rated 5 by one panelist would read [5, 5])."""
    runs = [list(cards) for cards in runs if cards]
    overall, means = panel_figures(runs)
    if overall is None:
        return None
    if panelists < MIN_PANELISTS:
        return PanelIntervals(None, {}, f"rated by {panelists} distinct panelist(s), fewer than {MIN_PANELISTS}: "
                                        "no interval")
    rng = random.Random(seed)
    overall_draws: list[float] = []
    category_draws: dict[str, list[float]] = {c: [] for c in means}
    for _ in range(resamples):
        sample = [rng.choices(cards, k=len(cards)) for cards in rng.choices(runs, k=len(runs))]
        figure, sample_means = panel_figures(sample)
        if figure is None:  # cannot happen (every run has a card, every card a rating) but cheap
            continue
        overall_draws.append(figure)
        for category, value in sample_means.items():
            category_draws[category].append(value)
    return PanelIntervals(
        overall=percentile_interval(overall_draws, overall, level),
        categories={c: percentile_interval(d, means[c], level) if d else (means[c], means[c])
                    for c, d in category_draws.items()},
    )


# -- pairwise preferences ---------------------------------------------------------------------


@dataclass(frozen=True)
class PreferenceRow:
    """One stored preference: `preferred` names run_a ("a"), run_b ("b") or neither ("tie")."""

    id: int
    panelist: str
    run_a: str
    run_b: str
    model_a: str
    model_b: str
    preferred: str


def latest_preferences(rows: Sequence[PreferenceRow]) -> list[PreferenceRow]:
    """One preference per (panelist, unordered run pair): the one with the highest id; by id."""
    latest: dict[tuple[str, frozenset[str]], PreferenceRow] = {}
    for row in sorted(rows, key=lambda r: r.id):
        latest[(row.panelist, frozenset((row.run_a, row.run_b)))] = row
    return sorted(latest.values(), key=lambda r: r.id)


NOTES = {
    "never_wins": "never preferred in any comparison: its strength has no finite estimate (it ranks below every "
                  "model preferred to it)",
    "never_loses": "preferred in every comparison: its strength has no finite estimate (it ranks above every "
                   "model it was preferred to)",
    "separated": "no cycle of preferences ties it to another model on one scale: no finite estimate (it ranks "
                 "below the models preferred to it, directly or through others, and above those it beat)",
}
#: Said of a fitted model whose component the bootstrap could not keep whole often enough.
NO_INTERVAL = "too few resamples keep its comparisons on one scale: no interval"


def pairwise_board(rows: Sequence[PreferenceRow], *, quorum: int = PAIRWISE_QUORUM, seed: int = SEED,
                   resamples: int = bt.RESAMPLES, level: float = LEVEL) -> tuple[list[dict[str, Any]], list[str]]:
    """(ranked, provisional): the Bradley–Terry board over the counted preferences `rows` (already
    the latest per panelist and pair). A model is ranked once preferences from at least `quorum`
    distinct panelists involve it; the fit and its bootstrap use the preferences among ranked
    models only.

    A ranked entry: `model`, `strength` (None with a `note` when the MLE is not finite), `ci`
    [lo, hi] (None with a `note` when the bootstrap cannot support one; widened to contain the
    strength), `scale` (the models whose strengths share its scale: its component, see
    `assay.stats.bt`), `rank` (`bt.ranks`: 1 + the models of components above its own + those of
    its own whose interval lies wholly above its), `n_comparisons` (its counted preferences
    against ranked models). Listed component by component from the top (`bt.BTFit.components`),
by strength within one. Preferences between two runs of the
    same model say nothing about models and are left out."""
    between = [r for r in rows if r.model_a != r.model_b]
    panelists: dict[str, set[str]] = {}
    for r in between:
        panelists.setdefault(r.model_a, set()).add(r.panelist)
        panelists.setdefault(r.model_b, set()).add(r.panelist)
    eligible = {m for m, who in panelists.items() if len(who) >= quorum}
    provisional = sorted(set(panelists) - eligible)
    prefs: list[bt.Preference] = [(r.model_a, r.model_b, r.preferred) for r in between  # type: ignore[misc]
                                  if r.model_a in eligible and r.model_b in eligible]
    fit = bt.bradley_terry(prefs)
    cis = bt.bootstrap_intervals(prefs, resamples=resamples, seed=seed, level=level) if prefs else {}
    ranks = bt.ranks(fit, cis)
    entries = []
    for m in sorted(eligible):
        got = fit.models.get(m)
        if got is None:  # ranked, but with no comparison against another ranked model
            entries.append({"model": m, "strength": None, "ci": None, "scale": [m], "n_comparisons": 0,
                            "note": NOTES["separated"], "rank": 1, "_key": (len(fit.components), 0.0)})
            continue
        entry: dict[str, Any] = {"model": m, "strength": got.strength, "ci": None,
                                 "scale": list(fit.components[got.component]), "n_comparisons": got.n_comparisons,
                                 "rank": ranks[m], "_key": (got.component, -(got.strength or 0.0))}
        ci = cis.get(m)
        if got.strength is None:
            entry["note"] = NOTES[got.status]
        elif ci is None:
            entry["note"] = NO_INTERVAL
        else:
            entry["ci"] = [min(ci[0], got.strength), max(ci[1], got.strength)]
        entries.append(entry)
    entries.sort(key=lambda e: (e["_key"], e["model"]))
    for entry in entries:
        del entry["_key"]
    return entries, provisional
