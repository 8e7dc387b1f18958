"""`assay compare A B`: a paired comparison of two submissions on the same suite version.

Two submissions on one release met the same cases, so the question "is A better than B?" is
answered case by case: the per-case differences of their case means, a paired t-interval, and
the exact sign-flip p-value (`stats.pairwise`). Two overlapping board intervals do not mean "no
difference"; this is the test that can tell. With few cases no difference can be significant at
all (5 cases: p ≥ 0.0625), and the answer says so in words rather than leaving a reader to
mistake "p = 0.0625" for weak evidence against a real gap.

Per-case means come from the same store counts as the board's figures (`board.case_rates`), over
each submission's counted runs; cases are paired by id, over the cases where both have a mean.

Visibility: like `assay results`, this reads any submission in the store the CLI opens; a public
front end (`GET /api/compare`) must first refuse submissions that are not on the public board.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from assay.errors import Conflict, Invalid, NotFound
from assay.service import board as boards
from assay.service.actors import Actor, prefix_owner
from assay.service.board import RATE_PLACES, RATES, case_rates, round_rate
from assay.stats.pairwise import ALPHA, paired_comparison
from assay.store.releases_repo import ReleasesRepo
from assay.store.submissions_repo import SubmissionsRepo
from assay.store.db import Store

METRICS: tuple[str, ...] = RATES
P_PLACES = 6


@dataclass(frozen=True, slots=True)
class _Compared:
    """What a comparison reads of a submission's facts (`board.submission_facts`)."""

    submission_id: str
    label: str
    status: str
    n_runs: int
    release_id: int
    rates: dict[str, float | None]  # {metric: its rate}, every one of METRICS


#: One side of a comparison as shown: submission_id, agent_label, status, n_runs, and the metric
#: compared under its own name (so no fixed keys: a flat JSON object).
Side = dict[str, str | int | float | None]


class Comparison(TypedDict):
    """`compare`'s answer (a TypedDict: printed as it is by `assay compare --json`)."""

    suite: dict[str, str]
    metric: str
    a: Side
    b: Side
    difference: float
    ci: list[float] | None
    p_value: float
    test: str
    n_cases: int
    min_p: float
    too_few_cases: bool
    note: str | None
    cases: list[dict[str, str | float]]


def _resolve(store: Store, ident: str, actor: Actor) -> _Compared:
    """A submission `actor` may compare: the staff any, others their own or one on the board."""
    found = SubmissionsRepo(store).resolve_submission_id(ident, prefix_owner(actor))
    if found is None:
        raise NotFound("no such submission", "submission", value=ident)
    facts = boards.submission_facts(store, found)
    assert facts is not None
    if not (actor.is_staff or actor.speaks_for(facts["account"]) or boards.listed_entry(store, found) is not None):
        raise NotFound("no such submission", "submission", value=ident)
    return _Compared(facts["submission_id"], facts["label"], facts["status"], facts["n_runs"], facts["release_id"],
                     {m: boards.rates_of(facts)[m] for m in METRICS})


def _side(found: _Compared, metric: str) -> Side:
    return {"submission_id": found.submission_id, "agent_label": found.label,
            "status": found.status, "n_runs": found.n_runs, metric: round_rate(found.rates[metric])}


def _round(value: float) -> float:
    return round(value, RATE_PLACES) + 0.0  # + 0.0: no "-0.0" in the JSON


def too_few_cases_note(n_cases: int, min_p: float) -> str:
    return (f"with {n_cases} case{'s' if n_cases != 1 else ''} no difference can reach p < {ALPHA:g}: "
            f"the smallest p the sign-flip test can give is {min_p:.4g}")


def compare(store: Store, a: str, b: str, metric: str = "pass_rate", *, actor: Actor) -> Comparison:
    """Compare submissions `a` and `b` (ids or unique prefixes) on `metric`, case by case."""
    if metric not in METRICS:
        raise Invalid(f"unknown metric '{metric}' (one of: {', '.join(METRICS)})", "metric")
    repo = ReleasesRepo(store)
    fa, fb = _resolve(store, a, actor), _resolve(store, b, actor)
    if fa.submission_id == fb.submission_id:
        raise Invalid(f"both name submission {fa.submission_id}; compare it with another submission",
                      "submission", value=f"{a} {b}")
    if fa.release_id != fb.release_id:
        ra, rb = repo.release_by_id(fa.release_id), repo.release_by_id(fb.release_id)
        assert ra is not None and rb is not None
        raise Conflict(
            f"submissions on different suite versions cannot be compared: {fa.submission_id} is on "
            f"{ra['suite_key']} {ra['version']}, {fb.submission_id} on {rb['suite_key']} {rb['version']}")
    release = repo.release_by_id(fa.release_id)
    assert release is not None
    cases = boards.case_counts(store, [fa.submission_id, fb.submission_id])
    ma, mb = case_rates(cases[fa.submission_id], metric), case_rates(cases[fb.submission_id], metric)
    paired = [c for c in ma if c in mb]
    if not paired:
        raise Conflict(f"no case has a counted {metric} in both submissions yet", "submission",
                       value=f"{fa.submission_id} {fb.submission_id}")
    found = paired_comparison([ma[c] for c in paired], [mb[c] for c in paired])
    return {
        "suite": {"key": release["suite_key"], "version": release["version"]},
        "metric": metric,
        "a": _side(fa, metric),
        "b": _side(fb, metric),
        "difference": _round(found.difference),
        "ci": None if found.ci is None else [_round(found.ci[0]), _round(found.ci[1])],
        "p_value": round(found.p_value, P_PLACES),
        "test": "exact two-sided sign-flip permutation over cases" if found.exact
                else f"two-sided sign-flip permutation over cases, {found.patterns} seeded random patterns",
        "n_cases": found.n_cases,
        "min_p": round(found.min_p, P_PLACES) if found.min_p >= 10**-P_PLACES else found.min_p,
        "too_few_cases": found.too_few_cases,
        "note": too_few_cases_note(found.n_cases, found.min_p) if found.too_few_cases else None,
        "cases": [{"case_id": c, "a": _round(ma[c]), "b": _round(mb[c]), "difference": _round(ma[c] - mb[c])}
                  for c in paired],
    }
