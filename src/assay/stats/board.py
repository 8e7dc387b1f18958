"""The board's numbers as pure functions: a second implementation beside the SQL views.

The board is SQL (`assay.store.views`: `board_run_facts`, `board_case_facts`,
`board_submission_facts`); `assay verify` has no database, only an export's rows. These functions
are what those views compute, written out in Python over plain facts of each planned run, so
anyone holding the rows can recount every figure; the tests hold the two equal on the same rows,
on SQLite and PostgreSQL.

The run-level verdict (`passed`, `false_success`) is the scorer's verdict row (`run_verdicts`),
given here as facts: this module does not restate the pass rule, and its rates are `stats.trials`'
(the one Python home of the trial statistics, which the results JSON uses too), over the counted
runs. From there, as the views do:

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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assay.stats import trials


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


def rankable(facts: dict[str, Any]) -> bool:
    """Whether an entry is ranked at all: a complete platform entry (the view's `_RANKABLE`)."""
    return facts["leaderboard_class"] == "platform" and facts["status"] == "complete"
