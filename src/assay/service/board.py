"""The public board of one suite version: entries from the `board_entries` view, formatted.

Every count comes from the SQL views over append-only rows. The uncertainty on each figure and
the statistical rank come from pure functions in `stats/` fed with per-case counts read from the
same views (issue 12): a 95% interval clustered by case on every rate, and a rank that only
separates entries whose intervals do not overlap. This module shapes them into JSON, with rates
and interval ends rounded to 4 places and a fixed order, so the same submissions give
byte-identical board JSON on SQLite and PostgreSQL. Nothing public carries a seed: seeds are for
the suite owner (`assay results SUBMISSION`), never for the board.

Visibility: the default is the latest *public* version, with the history of public versions;
an unlisted version only when named; internal suites never (they do not exist here).
"""

from __future__ import annotations

import json
from typing import Any

from assay.errors import NotFound
from assay.service import releases, scoring
from assay.service.actors import Actor
from assay.stats.intervals import case_interval
from assay.stats.ranks import statistical_ranks
from assay.store.board_repo import BoardRepo
from assay.store.export_repo import ExportRepo
from assay.store.db import Store

RATE_PLACES = 4
RATES = ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")
#: The figure ranks are decided on (its interval), and the point estimates entries are listed by.
RANKING_FIGURE = "pass_rate"
#: What a trait suite's entries carry besides the oracle figures (`scoring.trait_figures`).
TRAIT_FIELDS = ("composite", "composite_ci", "traits", "safety", "stability", "safety_variance_n",
                "safety_variance_range", "safety_variance_stddev", "judge", "judge_is_pinned")
TRAIT_RANKING = (
    "platform-class, complete entries only, listed by composite desc (the mean over capability "
    "traits of their per-scenario means; safety traits never enter it), then pass_rate desc; "
    "rank = 1 + the number of ranked entries whose 95% composite interval (clustered by case) lies "
    "wholly above this entry's, so entries the data cannot tell apart share a rank; an entry scored "
    "by another judge than the release pins is shown unranked"
)
RANKING = (
    "platform-class, complete entries only, listed by pass_rate desc, then false_success_rate asc, "
    "then consistency desc; rank = 1 + the number of ranked entries whose 95% pass_rate interval "
    "(clustered by case) lies wholly above this entry's (their lower bound above its upper bound), "
    "so ties and entries the data cannot tell apart share a rank"
)

#: For each rate: per-case (numerator, denominator) from `BoardRepo.case_counts` rows.
_CASE_PARTS: dict[str, tuple[str, str | None]] = {
    "pass_rate": ("n_passed", "n_runs"),
    "false_success_rate": ("n_false_successes", "n_runs"),
    "objective_met_rate": ("win_met", "win_total"),
    "consistency": ("consistent", None),  # 0 or 1 per case with counted runs
}


def round_rate(value: float | None) -> float | None:
    return None if value is None else round(float(value), RATE_PLACES)


def entry_numbers(facts: dict[str, Any]) -> dict[str, Any]:
    """The aggregates an entry shows (rates rounded); None where nothing counts yet."""
    return {"n_runs": facts["n_runs"], **{k: round_rate(facts[k]) for k in RATES}}


def case_rates(cases: list[dict[str, Any]], metric: str) -> dict[str, float]:
    """Each case's mean of `metric` over its counted runs, in case order (failures count as 0).

    Cases with nothing counted for the metric (no counted run; no win condition, for
    `objective_met_rate`) have no mean and are left out: no number from too little.
    """
    numerator, denominator = _CASE_PARTS[metric]
    out: dict[str, float] = {}
    for case in cases:
        if case["n_runs"] <= 0:
            continue
        if denominator is None:
            out[case["case_id"]] = float(case[numerator])
        elif case[denominator] > 0:
            out[case["case_id"]] = case[numerator] / case[denominator]
    return out


def _rounded(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], RATE_PLACES), round(interval[1], RATE_PLACES)]


def entry_intervals(facts: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, list[float] | None]:
    """`<rate>_ci` for every rate: the case-clustered 95% interval, rounded as the rates are;
    None wherever the figure itself is None."""
    return {f"{k}_ci": None if facts[k] is None else _rounded(case_interval(list(case_rates(cases, k).values())))
            for k in RATES}


def _rankable(facts: dict[str, Any]) -> bool:
    # Which entries are ranked is the view's decision (it ranks only complete platform entries);
    # its RANK() value itself is the point-estimate order, superseded by the statistical rank.
    return facts["rank"] is not None


def statistical_ranks_of(rows: list[dict[str, Any]], figure: str = RANKING_FIGURE) -> dict[str, int]:
    """The statistical rank of each rankable entry among the rankable ones, on the rounded
    interval of `figure` — the interval the board shows, so anyone can recount a rank from the
    JSON alone. `rows` carry the `<figure>_ci` keys (`entry_intervals`, `_trait_entry`)."""
    ranked = [r for r in rows if _rankable(r) and r[f"{figure}_ci"] is not None]
    ranks = statistical_ranks([tuple(r[f"{figure}_ci"]) for r in ranked])
    return {r["submission_id"]: rank for r, rank in zip(ranked, ranks)}


def _with_figures(store: Store, rows: list[dict[str, Any]], release: dict[str, Any]) -> list[dict[str, Any]]:
    """Entry rows with their intervals, `n_cases`, and their trait figures when the release pins
    a rubric (with `judge_is_pinned`)."""
    cases = BoardRepo(store).case_counts([r["submission_id"] for r in rows])
    rows = [{**r, **entry_intervals(r, cases[r["submission_id"]])} for r in rows]
    if release.get("rubric") is not None:
        declared = scoring.judge_provenance(release)
        rows = [{**r, **_trait_entry(scoring.trait_figures(store, r["submission_id"]), declared)} for r in rows]
    return rows


def release_entries(store: Store, release_id: int) -> list[dict[str, Any]]:
    """The `board_entries` rows of a release, each with its intervals, `n_cases`, its trait
    figures when the release pins a rubric, and its statistical `rank` (None when unranked):
    on the pass-rate interval for an oracle suite, on the composite's for a trait suite."""
    repo = BoardRepo(store)
    release = repo.release_by_id(release_id)
    assert release is not None
    rows = _with_figures(store, repo.entries(release_id), release)
    if release.get("rubric") is not None:
        # an entry scored by another judge than the release pins is shown, never ranked among them
        ranks = statistical_ranks_of([r for r in rows if r["judge_is_pinned"]], "composite")
    else:
        ranks = statistical_ranks_of(rows)
    return [{**r, "rank": ranks.get(r["submission_id"])} for r in rows]


def _trait_entry(figures: dict[str, Any], declared: dict[str, Any] | None) -> dict[str, Any]:
    """An entry's trait fields, with the composite's 95% interval clustered by case, and whether
    its judge is the one the release pins (`judge_is_pinned`: same model and prompt hash)."""
    by_case = figures.pop("composite_by_case")
    interval = case_interval(list(by_case.values())) if figures["composite"] is not None else None
    judge = figures["judge"]
    pinned = bool(judge and declared and (judge["model"], judge["prompt_hash"]) == (declared["model"], declared["prompt_hash"]))
    return {**figures, "composite_ci": _rounded(interval), "judge_is_pinned": pinned}


def entry_rank(store: Store, submission_id: str) -> int | None:
    """The board rank of one submission (None when it is not a ranked entry)."""
    entry = BoardRepo(store).entry(submission_id)
    if entry is None or not _rankable(entry):
        return None
    found = {r["submission_id"]: r for r in release_entries(store, entry["release_id"])}
    return found[submission_id]["rank"]


def provenance(store: Store, release: dict[str, Any]) -> dict[str, Any]:
    return {
        "suite_key": release["suite_key"],
        "version": release["version"],
        "language": release["language"],
        "release_hash_prefix": release["release_hash"][: releases.HASH_PREFIX],
        "scenarios": [{"case_id": p["case_id"], "version": p["version"], "hash_prefix": p["hash_prefix"]}
                      for p in releases.scenario_pins(store, release)],
        "judge": scoring.judge_provenance(release),
        "rubric_hash_prefix": (releases.release_rubric(release).content_hash()[: releases.HASH_PREFIX]  # type: ignore[union-attr]
                               if release.get("rubric") is not None else None),
        "facilitator_model": release["facilitator_model"],
        "reps_per_scenario": release["reps_per_scenario"],
    }


def _entry(facts: dict[str, Any], models: list[str], pinned: dict[str, str]) -> dict[str, Any]:
    return {
        "submission_id": facts["submission_id"],
        "agent_label": facts["label"],
        "label_self_declared": True,
        "config_signature": pinned.get("config_signature"),
        "public_handle": facts["public_handle"],
        "play_model": facts["play_model"],
        "model_provenance": facts["model_provenance"],
        "leaderboard_class": facts["leaderboard_class"],
        "status": facts["status"],
        "n_runs": facts["n_runs"],
        "n_cases": facts["n_cases"],
        **{key: value for rate in RATES
           for key, value in ((rate, round_rate(facts[rate])), (f"{rate}_ci", facts[f"{rate}_ci"]))},
        "measurement_era": facts["measurement_era"],
        "measurement_era_is_current": facts["measurement_era_is_current"],
        "variance_note": facts["variance_note"],
        "facilitator_models": models,
        "harness_version": pinned.get("harness_version"),
        "digest": facts.get("digest"),
        "rank": facts["rank"],
        **{k: facts[k] for k in TRAIT_FIELDS if k in facts},
    }


def _order(entry: dict[str, Any]) -> tuple[Any, ...]:
    # Ranked entries first, then the unranked; each by point estimate (a trait suite: best
    # composite first — never a safety trait; then best pass rate, fewest false successes, most
    # consistent), ties by id (stable). A statistical rank is not an order: two entries that share
    # rank 1 are still listed best estimate first.
    return (entry["rank"] is None, -(entry.get("composite") or 0.0), -(entry["pass_rate"] or 0.0),
            entry["false_success_rate"] or 0.0, -(entry["consistency"] or 0.0), entry["submission_id"])


def _shaped(store: Store, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entry rows (with figures and ranks) as the board shows them, in the board's order."""
    repo = BoardRepo(store)
    ids = [r["submission_id"] for r in rows]
    models = repo.facilitator_models(ids)
    pinned = repo.pinned_agents(ids)
    digests = ExportRepo(store).digests(ids)  # what each entry was stamped with when finalised
    return sorted((_entry({**r, "digest": digests.get(r["submission_id"])}, models.get(r["submission_id"], []),
                          pinned.get(r["submission_id"], {})) for r in rows), key=_order)


def _suite(release: dict[str, Any], latest_public: str | None) -> dict[str, Any]:
    return {"key": release["suite_key"], "version": release["version"], "title": release["title"],
            "language": release["language"], "visibility": release["visibility"],
            "is_latest_public": release["version"] == latest_public}


def _public_history(repo: BoardRepo, key: str) -> list[dict[str, Any]]:
    return sorted((r for r in repo.releases(key) if r["visibility"] == "public"),
                  key=lambda r: releases.version_key(r["version"]), reverse=True)


def board(store: Store, key: str, version: str | None = None, *, actor: Actor) -> dict[str, Any]:
    """A suite version's public board (the latest public version by default), whoever asks."""
    release = releases.find_release(store, key, version, public=True, actor=actor)
    history = _public_history(BoardRepo(store), key)
    return {
        "suite": _suite(release, history[0]["version"] if history else None),
        "versions": [{"version": r["version"], "released_at": r["created_at"].isoformat(),
                      "current": r["version"] == release["version"]} for r in history],
        "provenance": provenance(store, release),
        "ranking": TRAIT_RANKING if release.get("rubric") is not None else RANKING,
        "entries": _shaped(store, release_entries(store, release["id"])),
    }


def entry(store: Store, submission_id: str, *, actor: Actor) -> dict[str, Any]:
    """One published entry, by its full submission id: a listed one as its board shows it (with
    its rank), or an unlisted one (a bring-your-own submission published by id: never listed,
    never ranked). `{"suite", "provenance", "listed", "entry"}`.

    Only the full id finds it: a prefix would let anyone enumerate unlisted entries."""
    repo = BoardRepo(store)
    listed = repo.entry(submission_id)
    found = listed if listed is not None else repo.entry(submission_id, unlisted=True)
    release = repo.release_by_id(found["release_id"]) if found is not None else None
    if found is None or release is None or (release["visibility"] == "internal" and not actor.is_staff):
        raise NotFound("no published entry has that submission id", "submission", value=submission_id)
    if listed is not None:  # as its board shows it, ranked among the others
        row = next(r for r in release_entries(store, release["id"]) if r["submission_id"] == submission_id)
    else:
        row = {**_with_figures(store, [found], release)[0], "rank": None}
    history = _public_history(repo, release["suite_key"])
    return {
        "suite": _suite(release, history[0]["version"] if history else None),
        "provenance": provenance(store, release),
        "listed": listed is not None,
        "entry": _shaped(store, [row])[0],
    }


def board_text(value: dict[str, Any]) -> str:
    """The board JSON as printed and written: one canonical text for both backends."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
