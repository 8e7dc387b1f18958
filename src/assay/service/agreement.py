"""Judge–panel agreement on one suite version (issue 12, item 7): how a judge earns trust, measured
against people.

A panel run may name the Assay run it scored (`assay_run` on `create-run`). For a suite release
that maps traits to panel categories (`panel_categories` in the suite document), this gathers the
runs of the release's submissions that have both

- a judge trait mean: the mean of the run's valid passes (`judgements`), from a
  submission judged by the judge the release pins against the release's own rubric (a submission
  scored by another judge or against a rubric of its own measures something else, and is left out,
  counted in `excluded_runs`); and
- a finalised panel run linked to it, whose per-category medians (`panel_run_medians`: the latest
  scorecard per approved panelist) are the panel's figures; when several finalised panel runs
  name one Assay run, the latest created counts, as elsewhere the latest row wins;

and reports, per mapped (trait, category) pair, `n` (runs with both numbers), Spearman's ρ and
Krippendorff's α with their seeded bootstrap intervals (`assay.stats.agreement`; the judge's mean
× 10 is put on the panel's 0..10 scale). A pair with too little data has no number, only a note.

Reads never write. Only the platform's staff read it: it draws on unpublished submissions' runs
and on the panel's runs, which only they see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from assay.service import releases
from assay.service.judgements import JudgeProvenance, judge_provenance, judgements
from assay.service.actors import Actor, require_staff
from assay.stats import agreement as stats
from assay.store.db import Store
from assay.store.judge_repo import JudgeRepo
from assay.store.panel_repo import PanelRepo

#: Places the figures are rounded to (as the board's trait figures).
PLACES = 4
METHOD = ("Per mapped (trait, category): the runs that have both a judge trait mean (the mean of the run's "
          "valid passes, by the judge the release pins) and a scored panel run linked to them (the median "
          "across approved panelists in the category). The judge's mean is multiplied by 10 to sit on the "
          "panel's 0..10 scale. rho is Spearman's rank correlation (ties at average ranks); alpha is "
          "Krippendorff's alpha for interval data with two coders. Intervals are 95% percentile bootstraps "
          "over runs (2,000 resamples, seeded per pair, so every read gives the same interval). Fewer than "
          "2 runs, or no variation, gives no number. An interval is withheld, with its reason, below "
          f"{stats.MIN_INTERVAL_RUNS} runs, when fewer than half the resamples define the statistic, or when "
          "every resample gives the same value (docs/statistics.md).")


@dataclass(frozen=True, slots=True)
class LinkedRun:
    """An Assay run a scored panel run names: its submission, that panel run, and the panel's
    median per category."""

    submission_id: str
    panel_run: str
    medians: dict[str, float] = field(default_factory=dict)


# The report is TypedDicts: `assay agreement --json` prints it as it is, with these keys in this order.


class AgreementPair(TypedDict):
    trait: str
    category: str
    n: int
    spearman: float | None
    spearman_ci: list[float] | None
    spearman_ci_reason: str | None
    alpha: float | None
    alpha_ci: list[float] | None
    alpha_ci_reason: str | None
    notes: list[str]


class AgreementReport(TypedDict):
    suite: str
    version: str
    judge: JudgeProvenance | None
    scale: str
    mapping: dict[str, str]
    n_linked_runs: int
    excluded_runs: int
    pairs: list[AgreementPair]
    note: str | None
    method: str


class AgreementRun(TypedDict):
    run: str
    submission_id: str
    panel_run: str
    judge: dict[str, float]
    panel: dict[str, float]


def _figure(value: float | None) -> float | None:
    return None if value is None else round(value, PLACES)


def _interval(found: stats.Bounds) -> list[float] | None:
    return None if found.interval is None else [round(found.interval[0], PLACES), round(found.interval[1], PLACES)]


def pair_seed(key: str, version: str, trait: str, category: str) -> int:
    """The bootstrap's seed for one pair of one release: stable across processes and reads."""
    return stats.seed_for(f"agreement:{key}:{version}:{trait}:{category}")


def panel_medians(store: Store, release_id: int) -> dict[str, LinkedRun]:
    """{assay run: {submission_id, panel_run, medians {category: median}}} for the release's runs
    that a scored panel run names (the latest created such panel run per Assay run)."""
    chosen: dict[str, LinkedRun] = {}
    for row in PanelRepo(store).linked_medians(release_id):  # ordered by run, then created
        run = row.assay_run
        current = chosen.get(run)
        if current is None or current.panel_run != row.panel_run:
            # a later panel run of the same Assay run replaces an earlier one
            current = chosen[run] = LinkedRun(row.submission_id, row.panel_run)
        current.medians[row.category] = row.median_rating
    return chosen


def _judged_by_the_release(store: Store, release: releases.ReleaseRow, submission_id: str) -> bool:
    """Whether the submission was judged with the judge the release pins (model and prompt hash)
    against the release's own rubric."""
    declared = judge_provenance(release)
    rubric = releases.release_rubric(release)
    pinned = JudgeRepo(store).config(submission_id)
    if declared is None or rubric is None or pinned is None:
        return False
    return ((pinned["model"], pinned["prompt_hash"], pinned["rubric_hash"])
            == (declared["model"], declared["prompt_hash"], rubric.content_hash()))


def judge_means(store: Store, release: releases.ReleaseRow, submission_ids: set[str]) -> tuple[dict[str, dict[str, float]], set[str]]:
    """({run: {trait: mean of its valid passes}} over the scored runs of the submissions judged by
    the release's judge, the submissions left out because another judge or rubric scored them)."""
    means: dict[str, dict[str, float]] = {}
    other: set[str] = set()
    for sid in sorted(submission_ids):
        if not _judged_by_the_release(store, release, sid):
            other.add(sid)
            continue
        for run_id, judged in judgements(store, sid).items():
            if judged.scores is not None:
                means[run_id] = dict(judged.scores)
    return means, other


def agreement(store: Store, suite: str, version: str | None = None, *, actor: Actor) -> AgreementReport:
    """The agreement report of a suite version (default: its latest): `suite`, `version`, `judge`,
    `mapping`, `n_linked_runs`, `excluded_runs`, `pairs` [{trait, category, n, spearman,
    spearman_ci, spearman_ci_reason, alpha, alpha_ci, alpha_ci_reason, notes}] (an interval is None
    exactly when its reason is not), `note` (in words, when there is nothing to measure) and
    `method`."""
    require_staff(actor, "read judge–panel agreement", "suite")
    release = releases.find_release(store, suite, version, actor=actor)
    key, ver = release["suite_key"], release["version"]
    mapping = releases.panel_categories(release)
    report: AgreementReport = {"suite": key, "version": ver, "judge": judge_provenance(release),
                              "scale": f"judge trait mean x {stats.JUDGE_SCALE:g}, on the panel's 0..10",
                              "mapping": mapping, "n_linked_runs": 0, "excluded_runs": 0, "pairs": [],
                              "note": None, "method": METHOD}
    if not mapping:
        report["note"] = (f"{key} {ver} maps no trait to a panel category (`panel_categories` in its suite "
                          "document), so there is nothing to compare")
        return report
    linked = panel_medians(store, int(release["id"]))
    means, other = judge_means(store, release, {v.submission_id for v in linked.values()})
    report["n_linked_runs"] = len(linked)
    report["excluded_runs"] = sum(1 for v in linked.values() if v.submission_id in other)
    shared = sorted(run for run in linked if run in means)
    for trait, category in mapping.items():
        pairs = [stats.on_one_scale(means[run][trait], linked[run].medians[category]) for run in shared
                 if trait in means[run] and category in linked[run].medians]
        found = stats.agreement(pairs, seed=pair_seed(key, ver, trait, category))
        notes = [n for n in (found.spearman.reason, found.alpha.reason, found.spearman_ci.reason,
                             found.alpha_ci.reason) if n]
        report["pairs"].append({
            "trait": trait, "category": category, "n": found.n,
            "spearman": _figure(found.spearman.value), "spearman_ci": _interval(found.spearman_ci),
            "spearman_ci_reason": found.spearman_ci.reason,
            "alpha": _figure(found.alpha.value), "alpha_ci": _interval(found.alpha_ci),
            "alpha_ci_reason": found.alpha_ci.reason,
            "notes": sorted(set(notes)),
        })
    if not shared:
        report["note"] = (f"no run of {key} {ver} has both a judge trait mean and a scored panel run linked to it "
                          "(create-run with assay_run names the run a panel scored)")
    return report


def agreement_runs(store: Store, suite: str, version: str | None = None, *, actor: Actor) -> list[AgreementRun]:
    """The numbers behind `agreement`, run by run (for checking it): [{run, submission_id,
    panel_run, judge {trait: mean}, panel {category: median}}] over the runs both scored."""
    require_staff(actor, "read judge–panel agreement", "suite")
    release = releases.find_release(store, suite, version, actor=actor)
    linked = panel_medians(store, int(release["id"]))
    means, _ = judge_means(store, release, {v.submission_id for v in linked.values()})
    return [{"run": run, "submission_id": linked[run].submission_id, "panel_run": linked[run].panel_run,
             "judge": means[run], "panel": linked[run].medians} for run in sorted(linked) if run in means]


__all__ = ["METHOD", "agreement", "agreement_runs", "judge_means", "pair_seed", "panel_medians"]
