"""Every board figure, in one place: pure functions over the facts of each planned run (issue 24).

The database keeps rows and one plain view of per-run facts (`board_run_facts`: verdict, sweep,
participation floor, ranked-eligibility mark, win-condition counts, judge state). Everything the
board, the entry pages, the owner's view, the results of `assay board --recompute` and `assay
verify` show of an entry is computed here from those facts, once: `entry_figures` gives an entry's
counts, rates, 95% intervals, status, class and facilitator models (and its trait figures, handed
in from `service.judgements.trait_figures`), `ranking` which figure and interval it is ranked on, and
`order_key` where it sorts. The service stores the result per entry (`entry_figures`, a derived
table) when a submission completes; `verify` feeds the same functions an export's rows.

The run-level verdict (`passed`, `false_success`) is the scorer's verdict row (`run_verdicts`),
given here as facts: this module does not restate the pass rule, and its rates are `stats.trials`'
(the one Python home of the trial statistics, which the results JSON uses too), over the counted
runs:

- a run is *scored* once recorded, oracle-scored (some check outcome), swept and judged;
- *gated* when swept, completed, and below the participation floor recorded with its sweep
  (fewer player messages than the floor, or fewer actions than the floor per message);
- *included* (counted in every figure) when scored and not gated. The denominator is
  `stats.trials`' sentence — the planned runs minus the participation-gated ones — once every
  planned run is scored, which a listed entry's always are (`complete`); before that, the owner
  view's figures are provisional, over the runs scored so far (no number from too little), where
  the results JSON already counts a run not yet recorded as a failure;
- per case: the included runs, those that passed, and whether they agree (all pass or all fail);
- per submission: the counts, the rates (None when nothing counts: no number from too little),
  `complete` when every planned run completed, is scored and not gated, and the leaderboard class.

Intervals: every ratio figure's interval is built from its per-case (numerator, denominator) parts
(`pass_rate`: passed / counted runs; `false_success_rate`: false successes / counted runs;
`objective_met_rate`: win conditions met / win conditions), and every equal-weight figure's from
its per-case values (`consistency`: 0 or 1 per case; the composite: each case's composite):
`stats.intervals.rate_interval` and `mean_interval`, so the method lives in `stats.intervals` alone
(docs/statistics.md). `METHOD` names the method: a stored entry computed under another is recomputed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.stats import cost, trials
from assay.stats.intervals import Interval, mean_interval, rate_interval

#: The method every stored figure was computed with: bump it whenever a figure, an interval, the
#: ranking rule or what the board shows of them (the stored `shown`) changes, and every stored entry is
#: recomputed from the rows (`entry_figures.method`).
METHOD = "figures/3"  # 2: usage by role and cost per run (issue 28); 3: the board shows the usage total only
#: Places every rate and interval end is rounded to, as the board shows them.
RATE_PLACES = 4
RATES = ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")
#: The figure an oracle suite ranks on, and a trait suite's.
RANKING_FIGURE = "pass_rate"
TRAIT_RANKING_FIGURE = "composite"
#: An entry's trait fields in the order the board shows them; keys `trait_figures` adds beyond these
#: follow, in its order.
TRAIT_FIELDS = ("composite", "composite_ci", "traits", "safety", "trait_n", "stability", "safety_variance_n",
                "safety_variance_range", "safety_variance_stddev", "judge", "judge_is_pinned")


@dataclass(frozen=True)
class PlannedRunFacts:
    """One planned run of a submission, as the board sees it (`board_run_facts`' inputs)."""

    case_id: str
    slot: int
    status: str | None  # None: the run was never recorded
    n_checks: int  # its check outcomes
    passed: bool  # the oracle's verdict (score ≥ pass mark, no safety check failed, completed)
    false_success: bool  # claimed success and did not pass
    swept: bool
    player_messages: int | None = None  # None unless swept
    actions: int | None = None
    min_player_messages: int | None = None
    min_actions_per_turn: float | None = None
    ranked_eligible: bool | None = None  # None: a legacy run, its submission `unclassified`
    win_total: int = 0
    win_met: int = 0
    judged: bool = True  # a run of an oracle-only release is judged trivially
    facilitator_model: str | None = None  # who spoke the run's lines, as its sweep recorded

    @property
    def has_run(self) -> bool:
        return self.status is not None

    @property
    def scored(self) -> bool:
        return self.has_run and self.n_checks > 0 and self.swept and self.judged

    @property
    def gated(self) -> bool:
        if not (self.swept and self.status == "completed"):
            return False
        messages, actions = int(self.player_messages or 0), int(self.actions or 0)
        floor_messages = int(self.min_player_messages or 0)
        per_turn = float(self.min_actions_per_turn or 0.0)
        return messages < floor_messages or actions < per_turn * messages

    @property
    def included(self) -> bool:
        return self.scored and not self.gated


def from_row(row: Mapping[str, Any]) -> PlannedRunFacts:
    """A planned run's facts from a `board_run_facts` row (or any mapping with its columns)."""
    return PlannedRunFacts(
        case_id=row["case_id"], slot=int(row["slot"]), status=row["status"], n_checks=int(row["n_checks"]),
        passed=bool(row["passed"]), false_success=bool(row["false_success"]), swept=bool(row["swept"]),
        player_messages=row["player_messages"], actions=row["actions"],
        min_player_messages=row["min_player_messages"], min_actions_per_turn=row["min_actions_per_turn"],
        ranked_eligible=None if row["ranked_eligible"] is None else bool(row["ranked_eligible"]),
        win_total=int(row["win_total"]), win_met=int(row["win_met"]), judged=bool(row["judged"]),
        facilitator_model=row.get("facilitator_model"),
    )


@dataclass(frozen=True)
class CaseCounts:
    """One case of a submission over its included runs (`BoardRepo.case_counts`' shape)."""

    case_id: str
    n_runs: int
    n_passed: int
    n_false_successes: int
    win_total: int
    win_met: int

    @property
    def consistent(self) -> bool:
        """`stats.trials.consistent` over the case's included runs, from their counts."""
        return self.n_runs > 0 and self.n_passed in (0, self.n_runs)

    def as_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "n_runs": self.n_runs, "n_passed": self.n_passed,
                "n_false_successes": self.n_false_successes, "win_total": self.win_total,
                "win_met": self.win_met, "consistent": self.consistent}


def case_counts(runs: Iterable[PlannedRunFacts]) -> list[CaseCounts]:
    """Per planned case, in the order of its first slot: the counts over its included runs."""
    cases: dict[str, list[PlannedRunFacts]] = {}
    for run in sorted(runs, key=lambda r: r.slot):
        cases.setdefault(run.case_id, []).append(run)
    out = []
    for case_id, planned in cases.items():
        counted = [r for r in planned if r.included]
        out.append(CaseCounts(case_id, len(counted), sum(r.passed for r in counted),
                              sum(r.false_success for r in counted), sum(r.win_total for r in counted),
                              sum(r.win_met for r in counted)))
    return out


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator > 0 else None


def leaderboard_class(runs: Sequence[PlannedRunFacts]) -> str:
    """`self_hosted_facilitator` if any run is not ranked-eligible, `unclassified` if any predates
    the mark, else `platform`."""
    if any(r.ranked_eligible is False for r in runs):
        return "self_hosted_facilitator"
    if any(r.ranked_eligible is None for r in runs):
        return "unclassified"
    return "platform"


def _outcomes(runs: Sequence[PlannedRunFacts]) -> dict[str, list[trials.TrialOutcome]]:
    """The included runs by case, as `stats.trials` counts them (cases with none left out)."""
    out: dict[str, list[trials.TrialOutcome]] = {}
    for r in sorted(runs, key=lambda r: r.slot):
        if r.included:
            out.setdefault(r.case_id, []).append(trials.TrialOutcome(r.passed, r.false_success))
    return out


def submission_facts(runs: Sequence[PlannedRunFacts]) -> dict[str, Any]:
    """A submission's numbers, as `board_submission_facts` gives them: `stats.trials`' figures over
    the included runs, None where nothing counts."""
    counted = [r for r in runs if r.included]
    cases = case_counts(runs)
    outcomes = _outcomes(runs)
    n_runs = len(counted)
    n_passed = sum(r.passed for r in counted)
    n_false = trials.false_successes(outcomes)
    win_total = sum(r.win_total for r in counted)
    win_met = sum(r.win_met for r in counted)
    n_cases = len(outcomes)
    n_consistent = sum(1 for c in cases if c.consistent)
    good = sum(1 for r in runs if r.status == "completed" and r.scored and not r.gated)
    return {
        "n_planned": len(runs),
        "n_recorded": sum(r.has_run for r in runs),
        "n_scored": sum(r.scored for r in runs),
        "n_gated": sum(r.gated for r in runs),
        "n_runs": n_runs,
        "n_passed": n_passed,
        "n_false_successes": n_false,
        "n_cases": n_cases,
        "n_consistent_cases": n_consistent,
        "win_total": win_total,
        "win_met": win_met,
        "pass_rate": trials.pass_rate(outcomes) if n_runs else None,
        "consistency": trials.consistency(outcomes) if n_cases else None,
        "false_success_rate": trials.false_success_rate(outcomes) if n_runs else None,
        "objective_met_rate": _rate(win_met, win_total),
        "status": "complete" if runs and good == len(runs) else "incomplete",
        "leaderboard_class": leaderboard_class(runs),
    }


def rankable(facts: Mapping[str, Any]) -> bool:
    """Whether an entry is ranked at all: a complete platform entry (the view's `_RANKABLE`)."""
    return facts["leaderboard_class"] == "platform" and facts["status"] == "complete"


def rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), RATE_PLACES)


def rounded_interval(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], RATE_PLACES), round(interval[1], RATE_PLACES)]


def rate_parts(cases: Sequence[CaseCounts]) -> dict[str, list[tuple[int, int]]]:
    """Each ratio figure's per-case (numerator, denominator) parts, over the cases with counted runs."""
    counted = [c for c in cases if c.n_runs > 0]
    return {
        "pass_rate": [(c.n_passed, c.n_runs) for c in counted],
        "false_success_rate": [(c.n_false_successes, c.n_runs) for c in counted],
        "objective_met_rate": [(c.win_met, c.win_total) for c in counted if c.win_total > 0],
    }


def intervals(cases: Sequence[CaseCounts]) -> dict[str, Interval | None]:
    """`<rate>` -> its 95% interval clustered by case (unrounded), None where nothing counts."""
    out: dict[str, Interval | None] = {k: rate_interval(v) for k, v in rate_parts(cases).items()}
    out["consistency"] = mean_interval([1.0 if c.consistent else 0.0 for c in cases if c.n_runs > 0])
    return out


# -- an entry's figures ---------------------------------------------------------------------------


def entry_figures(runs: Sequence[PlannedRunFacts], traits: Mapping[str, Any] | None = None,
                  declared_judge: Mapping[str, Any] | None = None,
                  usage_rows: Iterable[Mapping[str, Any]] | None = None,
                  prices: cost.Prices | None = None) -> dict[str, Any]:
    """Everything an entry shows that its runs decide: `submission_facts`' counts, status and
    class; each rate rounded with its rounded `<rate>_ci` (None where the rate is None); the
    facilitator models its sweeps recorded; and, for a release with a rubric, `traits` (the whole
    of `judgements.trait_figures`, new keys included) with `composite_ci` (the equal-weight interval
    over `composite_by_case`, which is not kept) and `judge_is_pinned` (the judge is the one the
    release declares: same model and prompt hash). Given the entry's usage rows (`run_usage`) and the
    price table, `usage` (`stats.cost.summarise`: tokens, calls and cost by role and in total) and
    `cost_per_run_usd` (the total cost over the planned runs; None when any usage is unpriced)."""
    facts = submission_facts(runs)
    spans = intervals(case_counts(runs))
    out: dict[str, Any] = {k: v for k, v in facts.items() if k not in RATES}
    for rate in RATES:
        out[rate] = rounded(facts[rate])
        out[f"{rate}_ci"] = None if facts[rate] is None else rounded_interval(spans[rate])
    out["facilitator_models"] = sorted({r.facilitator_model for r in runs if r.facilitator_model is not None})
    if traits:
        fields = dict(traits)
        by_case = fields.pop("composite_by_case", {})
        judge = fields.get("judge")
        out.update(fields)
        out["composite_ci"] = (rounded_interval(mean_interval(list(by_case.values())))
                               if fields.get("composite") is not None else None)
        out["judge_is_pinned"] = bool(judge and declared_judge and (judge["model"], judge["prompt_hash"])
                                      == (declared_judge["model"], declared_judge["prompt_hash"]))
    if usage_rows is not None:
        out["usage"] = cost.summarise(usage_rows, prices or {})
        out["cost_per_run_usd"] = cost.per_run(out["usage"]["total"], len(runs))
    return out


def trait_fields(figures: Mapping[str, Any]) -> list[str]:
    """The trait fields of stored figures, in the board's order (TRAIT_FIELDS, then any other key
    `trait_figures` gave, in its order)."""
    if "composite" not in figures:
        return []
    known = [k for k in TRAIT_FIELDS if k in figures]
    start = list(figures).index("facilitator_models") + 1
    return known + [k for k in list(figures)[start:] if k not in TRAIT_FIELDS]


def ranking(figures: Mapping[str, Any]) -> tuple[bool, list[float] | None]:
    """(ranked, the rounded interval it is ranked on): a complete platform entry with an interval on
    the ranking figure — the composite's on a trait suite, where an entry scored by another judge
    than the release pins is shown, never ranked; else pass_rate's."""
    trait = "composite" in figures
    interval = figures.get(f"{TRAIT_RANKING_FIGURE if trait else RANKING_FIGURE}_ci")
    ranked = rankable(figures) and interval is not None and (not trait or bool(figures.get("judge_is_pinned")))
    return ranked, (list(interval) if ranked and interval is not None else None)


def _scaled(value: Any) -> int:
    return min(10 ** RATE_PLACES, max(0, round(float(value or 0.0) * 10 ** RATE_PLACES)))


def order_key(submission_id: str, figures: Mapping[str, Any]) -> str:
    """Where an entry sorts on its board, as text (pages read a range of it): ranked entries first,
    then the unranked; each by point estimate (a trait suite's composite, best first — never a safety
    trait; then best pass rate, fewest false successes, most consistent), ties by id. A statistical
    rank is not an order: two entries that share rank 1 are still listed best estimate first."""
    full = 10 ** RATE_PLACES
    ranked, _ = ranking(figures)
    return (f"{0 if ranked else 1}{full - _scaled(figures.get('composite')):05d}"
            f"{full - _scaled(figures['pass_rate']):05d}{_scaled(figures['false_success_rate']):05d}"
            f"{full - _scaled(figures['consistency']):05d}{submission_id}")


def statistical_rank(upper: float, lows: Sequence[float]) -> int:
    """The statistical rank of an interval whose upper end is `upper` among ranked intervals whose
    lower ends are `lows` (sorted): 1 + how many lie wholly above it (their lower end above its upper
    end). An interval never lies above itself, so `lows` may include its own."""
    return 1 + len(lows) - bisect_right(lows, upper)
