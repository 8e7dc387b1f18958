"""The public board of one suite version, and each entry's stored figures (issue 24).

Every figure, interval, class, status and rank is computed once, in `stats.board`, from the per-run
facts the store gives (`board_run_facts`), for the board, the entry pages, the owner's view and
`assay verify` alike. A finalised submission's figures are computed when it completes (and again
when a judgement or a sweep changes them, or the method changes: `stats.board.METHOD`) and kept in
the derived table `entry_figures` (`refresh`); reads never recompute them. Which entries a board
lists (published, listed, complete, their account holding a handle) and what they show besides
figures (handle, note, era, digest) are read with the entries, in one query; the statistical rank
is counted from the stored intervals at read time (1 + the ranked entries whose lower bound lies
above this one's upper bound). `recompute` (`assay board --recompute`) rebuilds the table from the
rows and reports what differed.

Rates and interval ends are rounded to 4 places, and the entries have a fixed order (the stored
`order_key`), so the same submissions give byte-identical board JSON on SQLite and PostgreSQL.
Nothing public carries a seed: seeds are for the suite owner (`assay results SUBMISSION`), never
for the board. Boards are read whole or a page at a time (`limit`, an opaque `cursor`, `search`).

Visibility: the default is the latest *public* version, with the history of public versions;
an unlisted version only when named; internal suites never (they do not exist here).
"""

from __future__ import annotations

import base64
import binascii
import json
import operator
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring as _quote  # json.dumps' own string writer (ensure_ascii=False)
from typing import Any

from assay.errors import BadInput, Invalid, NotFound
from assay.service import releases, usage
from assay.service.actors import Actor, may_see, require_staff
from assay.service.judgements import judge_provenance, trait_figures
from assay.stats import board as figures_of
from assay.stats.digest import DIGEST_VERSION
from assay.store.board_repo import BoardRepo
from assay.store.releases_repo import ReleasesRepo
from assay.store.submissions_repo import SubmissionsRepo
from assay.store.db import Store
from assay.store.usage_repo import UsageRepo
from assay.store.runs_repo import RunsRepo

RATE_PLACES = figures_of.RATE_PLACES
RATES = figures_of.RATES
RANKING_FIGURE = figures_of.RANKING_FIGURE
TRAIT_FIELDS = figures_of.TRAIT_FIELDS
#: Entries a page shows unless asked for fewer; the most a page may hold.
PAGE = 50
MAX_PAGE = 1000
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

round_rate = figures_of.rounded


def entry_numbers(facts: dict[str, Any]) -> dict[str, Any]:
    """The aggregates an entry shows (rates rounded); None where nothing counts yet."""
    return {"n_runs": facts["n_runs"], **{k: round_rate(facts[k]) for k in RATES}}


#: For each rate: per-case (numerator, denominator) from `case_counts` rows.
_CASE_PARTS: dict[str, tuple[str, str | None]] = {
    "pass_rate": ("n_passed", "n_runs"),
    "false_success_rate": ("n_false_successes", "n_runs"),
    "objective_met_rate": ("win_met", "win_total"),
    "consistency": ("consistent", None),  # 0 or 1 per case with counted runs
}


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


# -- one submission's facts, computed from its runs ------------------------------------------------


def _planned(rows: Iterable[dict[str, Any]]) -> list[figures_of.PlannedRunFacts]:
    return [figures_of.from_row(r) for r in rows]


def submission_facts(store: Store, submission_id: str, conn: Any = None) -> dict[str, Any] | None:
    """A submission as its owner sees it: what it is (`SubmissionsRepo.submission_info`) and its figures
    now, computed from its runs (`stats.board.submission_facts`: rates unrounded, provisional until
    complete), or None."""
    repo = BoardRepo(store)
    info = SubmissionsRepo(store).submission_info(submission_id, conn)
    if info is None:
        return None
    return {**info, **figures_of.submission_facts(_planned(repo.run_rows(submission_id, conn)))}


def case_counts(store: Store, submission_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Per submission, one row per planned case, in case order: the counts its per-case means are
    made of, over the runs that count (`stats.board.case_counts`)."""
    repo = BoardRepo(store)
    return {sid: [c.as_dict() for c in figures_of.case_counts(_planned(repo.run_rows(sid)))] for sid in submission_ids}


# -- stored figures -------------------------------------------------------------------------------


def _trait_figures(store: Store, release: dict[str, Any], submission_id: str) -> dict[str, Any] | None:
    """`trait_figures` for an entry of a release that pins a rubric (the board shows trait
    figures there only), else None."""
    return trait_figures(store, submission_id) if release.get("rubric") is not None else None


def shown_fields(figures: dict[str, Any]) -> list[str]:
    """The figure fields an entry shows on its board, in order."""
    return ["leaderboard_class", "status", "n_runs", "n_cases",
            *(key for rate in RATES for key in (rate, f"{rate}_ci")), "facilitator_models",
            *figures_of.trait_fields(figures), *(k for k in ("usage", "cost_per_run_usd") if k in figures)]


#: What a board entry shows of its usage block: the total's tokens, calls and cost (and why there is
#: no cost). The block by role, with models and latency, is the entry's (`entry`, the card, the page's
#: cost table): a board of 100,000 entries would otherwise carry 60 MB of it.
BOARD_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "self_reported", "cost_usd",
               "cost_reason")


def board_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """An entry's usage block as its board shows it: `{"total": {BOARD_USAGE}}`, a part of the block."""
    total = usage["total"]
    return {"total": {k: total[k] for k in BOARD_USAGE}}


def shown(figures: dict[str, Any], *, full_usage: bool = False) -> dict[str, Any]:
    """The figures an entry shows (`shown_fields`, in order): on a board its usage is `board_usage`'s,
    with `full_usage` (an entry by its id, the card, the page's cost table) the whole block."""
    out = {k: figures[k] for k in shown_fields(figures)}
    if not full_usage and out.get("usage") is not None:
        out["usage"] = board_usage(out["usage"])
    return out


def stored_row(submission_id: str, release_id: int, figures: dict[str, Any]) -> dict[str, Any]:
    """An `entry_figures` row: the figures as canonical text (the same bytes on both backends, key
    order kept), the members the board shows of them as its text writes them (`shown`), and the
    columns a board sorts, filters and ranks by."""
    ranked, interval = figures_of.ranking(figures)
    shown_text = json.dumps(shown(figures), ensure_ascii=False)[1:-1]
    return {
        "shown": shown_text,
        "submission_id": submission_id, "release_id": release_id, "method": figures_of.METHOD,
        "complete": figures["status"] == "complete", "ranked": ranked,
        "order_key": figures_of.order_key(submission_id, figures),
        "rank_low": interval[0] if interval else None, "rank_high": interval[1] if interval else None,
        "figures": json.dumps(figures, ensure_ascii=False, separators=(",", ":")),
    }


def _computed(store: Store, release: dict[str, Any], submission_id: str,
              rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    figures = figures_of.entry_figures(_planned(rows), _trait_figures(store, release, submission_id),
                                       judge_provenance(release),
                                       UsageRepo(store).for_batch(submission_id), usage.prices(store))
    return stored_row(submission_id, release["id"], figures)


def refresh(store: Store, submission_id: str) -> None:
    """Compute one finalised submission's figures from its runs and store them (replacing any): what
    completing it, or judging it again, costs — one submission's rows, whatever the board's size."""
    repo = BoardRepo(store)
    submission = SubmissionsRepo(store).submission(submission_id)
    assert submission is not None
    release = ReleasesRepo(store).release_by_id(submission["release_id"])
    assert release is not None
    repo.put_figures([_computed(store, release, submission_id, repo.run_rows(submission_id))])


def _compute_release(store: Store, release: dict[str, Any], which: Any = None) -> Iterable[dict[str, Any]]:
    repo = BoardRepo(store)
    for sid, rows in repo.release_run_rows(release["id"], which):
        yield _computed(store, release, sid, rows)


#: (store URL, release, method) whose finalised submissions all have figures: checked once a process.
_FIGURED: set[tuple[str, int, str]] = set()


def ensure(store: Store, release: dict[str, Any]) -> None:
    """Store the figures of any finalised submission of a release that has none under the current
    method (a store upgraded to 0018, a method changed since): once per process and release."""
    key = (str(store.engine.url), int(release["id"]), figures_of.METHOD)
    if key in _FIGURED:
        return
    repo = BoardRepo(store)
    if repo.has_unfigured(release["id"], figures_of.METHOD):
        missing = repo.unfigured(release["id"], figures_of.METHOD)
        batch: list[dict[str, Any]] = []
        for row in _compute_release(store, release, missing):
            batch.append(row)
            if len(batch) >= 1000:
                repo.put_figures(batch)
                batch = []
        repo.put_figures(batch)
    _FIGURED.add(key)


def recompute(store: Store, *, actor: Actor) -> dict[str, Any]:
    """Rebuild every finalised submission's stored figures from the rows (staff only), and say what
    differed from what was stored: {"entries", "differences": [{submission_id, field, stored,
    recomputed}]} (`field` "*" when a row was missing)."""
    require_staff(actor, "recompute the board's figures", "recompute")
    repo = BoardRepo(store)
    stored = {r["submission_id"]: r for r in repo.stored_figures()}
    differences: list[dict[str, Any]] = []
    n = 0
    releases_repo = ReleasesRepo(store)
    for release_id in releases_repo.release_ids():
        release = releases_repo.release_by_id(release_id)
        assert release is not None
        rows = list(_compute_release(store, release, repo.finalised(release_id)))
        for row in rows:
            n += 1
            differences.extend(_differences(row, stored.get(row["submission_id"])))
        repo.put_figures(rows)
        _FIGURED.add((str(store.engine.url), release_id, figures_of.METHOD))
    return {"entries": n, "differences": differences}


def _differences(row: dict[str, Any], held: dict[str, Any] | None) -> list[dict[str, Any]]:
    sid = row["submission_id"]
    if held is None:
        return [{"submission_id": sid, "field": "*", "stored": None, "recomputed": "figures"}]
    mine, theirs = json.loads(row["figures"]), json.loads(held["figures"])
    out = [{"submission_id": sid, "field": k, "stored": theirs.get(k), "recomputed": mine.get(k)}
           for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
    for column in ("method", "complete", "ranked", "order_key", "rank_low", "rank_high"):
        if row[column] != held[column]:
            out.append({"submission_id": sid, "field": column, "stored": held[column], "recomputed": row[column]})
    return out


# -- entries ----------------------------------------------------------------------------------------


def _about(info: dict[str, Any]) -> dict[str, Any]:
    """What an entry shows of its submission (not a figure): label, handle, note, era, digest, agent."""
    current = info["measurement_era_is_current"]
    return {
        "submission_id": info["submission_id"],
        "agent_label": info["label"],
        "label_self_declared": True,
        "config_signature": info.get("config_signature"),
        "public_handle": info["public_handle"],
        "play_model": info["play_model"],
        "model_provenance": info["model_provenance"],
        "measurement_era": info["measurement_era"],
        "measurement_era_is_current": None if current is None else bool(current),
        "variance_note": info["variance_note"],
        "harness_version": info.get("harness_version"),
        "digest": info.get("digest"),
    }


def entry_view(info: dict[str, Any], figures: dict[str, Any], rank: int | None, *,
               full_usage: bool = False) -> dict[str, Any]:
    """An entry as a board shows it: what the submission is (`_about`), its statistical rank, and
    the figures it shows (`shown`: with `full_usage`, its whole usage block), in that order."""
    return {**_about(info), "rank": rank, **shown(figures, full_usage=full_usage)}


#: `json.dumps(value, ensure_ascii=False)`, its encoder made once (not once an entry).
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _text(value: str | None) -> str:
    return "null" if value is None else _quote(value)


#: The stored row's columns an entry line is written from, in `_line`'s order after the rank.
_LINE_COLUMNS = ("submission_id", "label", "config_signature", "public_handle", "play_model", "model_provenance",
                 "measurement_era", "measurement_era_is_current", "variance_note", "harness_version", "digest",
                 "shown")
_line_values = operator.itemgetter(*_LINE_COLUMNS)


def _line(rank: int | None, submission_id: str, label: str, signature: str | None, handle: str | None,
          play_model: str | None, provenance: str | None, era: str | None, current: Any, note: str | None,
          harness: str | None, digest: str | None, shown: str) -> str:
    """`json.dumps(entry_view(...))` of a stored row, without decoding its figures: `_about` and the
    rank written member by member (as `json.dumps` writes them, a fifth of its time: at 100,000
    entries a second), then the stored `shown` members spliced after them (the same bytes; a property
    test holds the two equal)."""
    return (f'{{"submission_id": {_quote(submission_id)}, "agent_label": {_quote(label)}, '
            f'"label_self_declared": true, "config_signature": {_text(signature)}, '
            f'"public_handle": {_text(handle)}, "play_model": {_text(play_model)}, '
            f'"model_provenance": {_text(provenance)}, "measurement_era": {_text(era)}, '
            f'"measurement_era_is_current": {"null" if current is None else "true" if current else "false"}, '
            f'"variance_note": {_text(note)}, "harness_version": {_text(harness)}, "digest": {_text(digest)}, '
            f'"rank": {"null" if rank is None else int(rank)}, {shown}}}')


def _entry_line(row: dict[str, Any], rank: int | None) -> str:
    """An entry's line from its stored row (`_line`)."""
    return _line(rank, *_line_values(row))


def _whole_lines(names: Sequence[str], rows: list[tuple[Any, ...]]) -> list[str]:
    """The whole board's entry lines, in board order, from its rows as the driver gave them (tuples
    of `names`): ranked as `_whole` ranks (`stats.board.statistical_rank` over the stored intervals),
    written as `_entry_line` writes them, without a dict a row."""
    at = {name: i for i, name in enumerate(names)}
    ranked, low, high = (operator.itemgetter(at[c]) for c in ("ranked", "rank_low", "rank_high"))
    values = operator.itemgetter(*(at[c] for c in _LINE_COLUMNS))
    lows = sorted(low(r) for r in rows if ranked(r))
    rank = figures_of.statistical_rank
    rows.sort(key=operator.itemgetter(at["order_key"]))
    return [_line(rank(high(r), lows) if ranked(r) else None, *values(r)) for r in rows]


def _whole(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], int | None]]:
    """Whole-board rows in board order, each with its statistical rank among the ranked ones
    (`stats.board.statistical_rank` over the stored intervals)."""
    lows = sorted(r["rank_low"] for r in rows if r["ranked"])
    rank = figures_of.statistical_rank
    return [(r, rank(r["rank_high"], lows) if r["ranked"] else None)
            for r in sorted(rows, key=operator.itemgetter("order_key"))]


def ranked_entries(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Whole-board entries (rows of info, `figures` text and the stored ranking columns) in board
    order, each with its statistical rank among the ranked ones."""
    return [entry_view(r, json.loads(r["figures"]), rank) for r, rank in _whole(rows)]


def _ranks(repo: BoardRepo, rows: Sequence[dict[str, Any]]) -> list[int | None]:
    """The statistical ranks of some listed entries' rows (a page), counted over the stored intervals
    of the whole board (1 + the ranked entries whose lower bound lies above each one's upper bound)."""
    ranked = [r for r in rows if r["ranked"]]
    if not ranked:
        return [None] * len(rows)
    above = iter(repo.ranked_above(ranked[0]["release_id"], [r["rank_high"] for r in ranked]))
    return [1 + next(above) if r["ranked"] else None for r in rows]


def listed_entry(store: Store, submission_id: str) -> dict[str, Any] | None:
    """The stored board row of a listed entry (published, listed, complete, handled), or None."""
    return BoardRepo(store).entry(submission_id, digest_version=DIGEST_VERSION)


def rank_of(store: Store, row: dict[str, Any] | None) -> int | None:
    """The statistical rank of a listed entry's row (None when unranked or not listed): one count
    over the stored intervals, never the board."""
    return None if row is None else _ranks(BoardRepo(store), [row])[0]


def entry_rank(store: Store, submission_id: str) -> int | None:
    """The board rank of one submission (None when it is not a ranked, listed entry)."""
    return rank_of(store, listed_entry(store, submission_id))


def _cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def _uncursor(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise Invalid("not a cursor this board gave", "cursor", value=cursor) from None


def provenance(store: Store, release: dict[str, Any]) -> dict[str, Any]:
    return {
        "suite_key": release["suite_key"],
        "version": release["version"],
        "language": release["language"],
        "release_hash_prefix": release["release_hash"][: releases.HASH_PREFIX],
        "scenarios": [{"case_id": p["case_id"], "version": p["version"], "hash_prefix": p["hash_prefix"]}
                      for p in releases.scenario_pins(store, release)],
        "judge": judge_provenance(release),
        "rubric_hash_prefix": (releases.release_rubric(release).content_hash()[: releases.HASH_PREFIX]  # type: ignore[union-attr]
                               if release.get("rubric") is not None else None),
        "facilitator_model": release["facilitator_model"],
        "reps_per_scenario": release["reps_per_scenario"],
    }


def _suite(release: dict[str, Any], latest_public: str | None) -> dict[str, Any]:
    return {"key": release["suite_key"], "version": release["version"], "title": release["title"],
            "language": release["language"], "visibility": release["visibility"],
            "is_latest_public": release["version"] == latest_public}


def _public_history(store: Store, key: str) -> list[dict[str, Any]]:
    return sorted((r for r in ReleasesRepo(store).releases(key) if r["visibility"] == "public"),
                  key=lambda r: releases.version_key(r["version"]), reverse=True)


def board(store: Store, key: str, version: str | None = None, *, actor: Actor, limit: int | None = None,
          cursor: str | None = None, search: str | None = None, full_usage: bool = False) -> dict[str, Any]:
    """A suite version's public board (the latest public version by default), whoever asks: every
    entry, or with `limit` a page of them from `cursor` on (`page.next_cursor`: the next page's, None
    at the end), optionally only those whose handle or label contains `search`. With `full_usage`,
    each entry carries its whole usage block (by role) where the board shows its total (`board_usage`):
    for the card's and the board page's cost tables."""
    return _board(store, key, version, actor=actor, limit=limit, cursor=cursor, search=search, text=False,
                  full_usage=full_usage)


def board_json(store: Store, key: str, version: str | None = None, *, actor: Actor, limit: int | None = None,
               cursor: str | None = None, search: str | None = None) -> str:
    """`board_text(board(...))`, the same bytes, without decoding any entry's stored figures: what the
    CLI's --json and the API serve (a whole board of 100,000 entries in seconds)."""
    return board_text(_board(store, key, version, actor=actor, limit=limit, cursor=cursor, search=search, text=True))


def _board(store: Store, key: str, version: str | None, *, actor: Actor, limit: int | None, cursor: str | None,
           search: str | None, text: bool, full_usage: bool = False) -> dict[str, Any]:
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"a page holds 1 to {MAX_PAGE} entries", "limit", value=limit)
    release = releases.find_release(store, key, version, public=True, actor=actor)
    repo = BoardRepo(store)
    history = _public_history(store, key)
    ensure(store, release)
    after = _uncursor(cursor) if cursor else None
    paged = limit is not None or after is not None or bool(search)
    value: dict[str, Any] = {
        "suite": _suite(release, history[0]["version"] if history else None),
        "versions": [{"version": r["version"], "released_at": r["created_at"].isoformat(),
                      "current": r["version"] == release["version"]} for r in history],
        "provenance": provenance(store, release),
        "ranking": TRAIT_RANKING if release.get("rubric") is not None else RANKING,
    }
    if text and not paged:  # the whole board's text: every row as the driver gives it, written as it is read
        value["entries"] = _whole_lines(*repo.board_rows(release["id"], digest_version=DIGEST_VERSION))
        return value
    rows = repo.entries(release["id"], digest_version=DIGEST_VERSION, after=after,
                        limit=None if limit is None else limit + 1, search=search, figures=not text)
    more = limit is not None and len(rows) > limit
    shown = rows[:limit] if limit is not None else rows
    ranked = list(zip(shown, _ranks(repo, shown))) if paged else _whole(shown)
    value["entries"] = [_entry_line(r, rank) if text else entry_view(r, json.loads(r["figures"]), rank,
                                                                     full_usage=full_usage)
                        for r, rank in ranked]
    if paged:
        value["page"] = {"limit": limit, "search": search or None,
                         "next_cursor": _cursor(shown[-1]["order_key"]) if more and shown else None}
    return value


def entry(store: Store, submission_id: str, *, actor: Actor) -> dict[str, Any]:
    """One published entry, by its submission id: a listed one (a unique prefix finds it too) as its board shows it (with
    its rank), or an unlisted one (a bring-your-own submission published by id: never listed,
    never ranked). `{"suite", "provenance", "listed", "entry"}`.

    Only the full id finds it: a prefix would let anyone enumerate unlisted entries. Its figures are
    the stored ones and its rank one count over the stored intervals: the board is never computed."""
    repo, submissions = BoardRepo(store), SubmissionsRepo(store)
    submission = submissions.submission(submission_id)
    if submission is None:  # a unique prefix finds a listed entry (what the board shows), never an unlisted one
        try:
            full = RunsRepo(store).resolve_batch_id(submission_id)
        except BadInput:  # ambiguous or short: said as not found, naming no other id
            full = None
        if full is not None and repo.entry(full, digest_version=DIGEST_VERSION) is not None:
            submission_id, submission = full, submissions.submission(full)
    release = ReleasesRepo(store).release_by_id(submission["release_id"]) if submission is not None else None
    if release is not None:
        ensure(store, release)
    listed = repo.entry(submission_id, digest_version=DIGEST_VERSION)
    found = listed if listed is not None else repo.entry(submission_id, digest_version=DIGEST_VERSION, unlisted=True)
    if found is None or release is None or not may_see(actor, release):
        raise NotFound("no published entry has that submission id", "submission", value=submission_id)
    history = _public_history(store, release["suite_key"])
    return {
        "suite": _suite(release, history[0]["version"] if history else None),
        "provenance": provenance(store, release),
        "listed": listed is not None,
        "entry": entry_view(found, json.loads(found["figures"]), _ranks(repo, [found])[0] if listed is not None else None,
                            full_usage=True),
    }


_ENTRIES = "@@assay-board-entries@@"


def board_text(value: dict[str, Any]) -> str:
    """The board JSON as printed and written: one canonical text for both backends — indented, each
    entry compact on a line of its own (an entry already rendered, `board_json`'s, is written as it
    is). The text is written once: the indented head and tail around the entries, joined with them in
    one pass (no placeholder replaced in a text of 100 MB, no copy of the entries' text)."""
    entries = value.get("entries")
    if not isinstance(entries, list):
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    head = json.dumps({**value, "entries": _ENTRIES}, indent=2, ensure_ascii=False)
    # anchored on the key: a string value holding the placeholder is escaped (\"), so never matches
    marker = f'"entries": {json.dumps(_ENTRIES)}'
    at = head.index(marker)
    before, after = head[:at] + '"entries": [', "]" + head[at + len(marker):] + "\n"
    if not entries:
        return before + after
    lines = [e if isinstance(e, str) else _encode(e) for e in entries]
    lines[0] = f"{before}\n    {lines[0]}"
    lines[-1] = f"{lines[-1]}\n  {after}"
    return ",\n    ".join(lines)
