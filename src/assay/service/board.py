"""The public board of one suite version: entries from the `board_entries` view, formatted.

Every number and every rank comes from the SQL views over append-only rows; this module only
shapes their rows into JSON, with rates rounded to 4 places and a fixed order, so the same
submissions give byte-identical board JSON on SQLite and PostgreSQL. Nothing public carries a
seed: seeds are for the suite owner (`assay results SUBMISSION`), never for the board.

Visibility: the default is the latest *public* version, with the history of public versions;
an unlisted version only when named; internal suites never (they do not exist here).
"""

from __future__ import annotations

import json
from typing import Any

from assay.service import releases
from assay.store.board_repo import BoardRepo
from assay.store.db import Store

RATE_PLACES = 4
RATES = ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")


def round_rate(value: float | None) -> float | None:
    return None if value is None else round(float(value), RATE_PLACES)


def entry_numbers(facts: dict[str, Any]) -> dict[str, Any]:
    """The aggregates an entry shows (rates rounded); None where nothing counts yet."""
    return {"n_runs": facts["n_runs"], **{k: round_rate(facts[k]) for k in RATES}}


def provenance(store: Store, release: dict[str, Any]) -> dict[str, Any]:
    return {
        "suite_key": release["suite_key"],
        "version": release["version"],
        "language": release["language"],
        "release_hash_prefix": release["release_hash"][: releases.HASH_PREFIX],
        "scenarios": [{"case_id": p["case_id"], "version": p["version"], "hash_prefix": p["hash_prefix"]}
                      for p in releases.scenario_pins(store, release)],
        "judge": releases.judge_view(release),
        "facilitator_model": release["facilitator_model"],
        "reps_per_scenario": release["reps_per_scenario"],
    }


def _entry(facts: dict[str, Any], models: list[str], harness: str | None) -> dict[str, Any]:
    return {
        "submission_id": facts["submission_id"],
        "agent_label": facts["label"],
        "label_self_declared": True,
        "public_handle": facts["public_handle"],
        "play_model": facts["play_model"],
        "model_provenance": facts["model_provenance"],
        "leaderboard_class": facts["leaderboard_class"],
        "status": facts["status"],
        **entry_numbers(facts),
        "measurement_era": facts["measurement_era"],
        "measurement_era_is_current": facts["measurement_era_is_current"],
        "variance_note": facts["variance_note"],
        "facilitator_models": models,
        "harness_version": harness,
        "rank": facts["rank"],
    }


def _order(entry: dict[str, Any]) -> tuple[Any, ...]:
    # Ranked entries by rank; then the unranked, best pass rate first; ties by id (stable).
    return (entry["rank"] is None, entry["rank"] or 0, -(entry["pass_rate"] or 0.0), entry["submission_id"])


def board(store: Store, key: str, version: str | None = None) -> dict[str, Any]:
    release = releases.find_release(store, key, version, public=True)
    repo = BoardRepo(store)
    history = sorted(
        (r for r in repo.releases(key) if r["visibility"] == "public"),
        key=lambda r: releases.version_key(r["version"]), reverse=True,
    )
    rows = repo.entries(release["id"])
    ids = [r["submission_id"] for r in rows]
    models = repo.facilitator_models(ids)
    harness = repo.harness_versions(ids)
    entries = sorted((_entry(r, models.get(r["submission_id"], []), harness.get(r["submission_id"])) for r in rows),
                     key=_order)
    latest_public = history[0]["version"] if history else None
    return {
        "suite": {"key": release["suite_key"], "version": release["version"], "title": release["title"],
                  "language": release["language"], "visibility": release["visibility"],
                  "is_latest_public": release["version"] == latest_public},
        "versions": [{"version": r["version"], "released_at": r["created_at"].isoformat(),
                      "current": r["version"] == release["version"]} for r in history],
        "provenance": provenance(store, release),
        "ranking": "platform-class, complete entries only: pass_rate desc, then false_success_rate asc, "
                   "then consistency desc (ties share a rank)",
        "entries": entries,
    }


def board_text(value: dict[str, Any]) -> str:
    """The board JSON as printed and written: one canonical text for both backends."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
