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
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring as _quote  # json.dumps' own string writer (ensure_ascii=False)
from typing import Any, NotRequired, TypedDict, cast

import sqlalchemy as sa

from assay.errors import BadInput, Invalid, NotFound
from assay.jsontypes import JsonObject, JsonValue
from assay.service import releases, usage
from assay.service.actors import PUBLIC, Actor, is_listed, may_see, require_staff
from assay.service.judgements import JudgeProvenance, judge_provenance, trait_figures
from assay.stats import board as figures_of
from assay.stats.digest import DIGEST_VERSION
from assay.store.board_repo import BoardRepo, EntryRow, FiguresRow, RunFacts
from assay.store.releases_repo import ReleaseRow, ReleasesRepo
from assay.store.submissions_repo import SubmissionInfo, SubmissionsRepo
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


# -- what the board serves: each a TypedDict, because it is serialised as it is (keys fixed, in order) --


class SuiteView(TypedDict):
    key: str
    version: str
    title: str
    language: str
    visibility: str
    is_latest_public: bool


class VersionView(TypedDict):
    version: str
    released_at: str
    current: bool


class ScenarioPin(TypedDict):
    case_id: str
    version: int
    hash_prefix: str


class ProvenanceView(TypedDict):
    suite_key: str
    version: str
    language: str
    release_hash_prefix: str
    scenarios: list[ScenarioPin]
    judge: JudgeProvenance | None
    rubric_hash_prefix: str | None
    facilitator_model: str | None
    reps_per_scenario: int


class PageView(TypedDict):
    limit: int | None
    search: str | None
    next_cursor: str | None


class _Head(TypedDict):
    suite: SuiteView
    versions: list[VersionView]
    provenance: ProvenanceView
    ranking: str


class BoardView(_Head):
    """A board: its suite, versions, provenance and ranking rule, then its entries (`entry_view`'s:
    JSON objects, as an entry's members after `rank` are its stored figures', which vary by release)."""

    entries: list[JsonObject]
    page: NotRequired[PageView]


class BoardText(_Head):
    """`BoardView` with each entry already written (`_line`): what `board_json` writes."""

    entries: list[str]
    page: NotRequired[PageView]


class EntryPage(TypedDict):
    """One published entry (`entry`): its board's suite and provenance, whether listed, the entry."""

    suite: SuiteView
    provenance: ProvenanceView
    listed: bool
    entry: JsonObject


class Difference(TypedDict):
    """A field where a recomputed entry differs from the stored one (`field` "*": no stored row)."""

    submission_id: str
    field: str
    stored: JsonValue
    recomputed: JsonValue


class RecomputeReport(TypedDict):
    entries: int
    differences: list[Difference]


class SubmissionFacts(SubmissionInfo):
    """A submission as its owner sees it (`submission_facts`): what it is, then its figures now as
    `stats.board.submission_facts` gives them (rates unrounded, None where nothing counts), keys in
    that order. A TypedDict: the owner's view, completion, cards and compare read it by key."""

    n_planned: int
    n_recorded: int
    n_scored: int
    n_gated: int
    n_runs: int
    n_passed: int
    n_false_successes: int
    n_cases: int
    n_consistent_cases: int
    win_total: int
    win_met: int
    pass_rate: float | None
    consistency: float | None
    false_success_rate: float | None
    objective_met_rate: float | None
    status: str  # "complete" or "incomplete"
    leaderboard_class: str


def rates_of(facts: SubmissionFacts) -> dict[str, float | None]:
    """A submission's rates, unrounded, in `RATES` order."""
    out: dict[str, float | None] = {"pass_rate": facts["pass_rate"], "consistency": facts["consistency"],
                                    "false_success_rate": facts["false_success_rate"],
                                    "objective_met_rate": facts["objective_met_rate"]}
    assert tuple(out) == RATES
    return out


def entry_numbers(facts: SubmissionFacts) -> dict[str, int | float | None]:
    """The aggregates an entry shows (rates rounded); None where nothing counts yet."""
    return {"n_runs": facts["n_runs"], **{k: round_rate(v) for k, v in rates_of(facts).items()}}


class CaseRow(TypedDict):
    """One case of a submission over the runs that count (`stats.board.CaseCounts.as_dict()`'s keys, in
    its order): a TypedDict because it is handed on as it is (`verify` recounts the same dicts)."""

    case_id: str
    n_runs: int
    n_passed: int
    n_false_successes: int
    win_total: int
    win_met: int
    consistent: bool


def case_row(case: figures_of.CaseCounts) -> CaseRow:
    """`case.as_dict()`, typed."""
    return {"case_id": case.case_id, "n_runs": case.n_runs, "n_passed": case.n_passed,
            "n_false_successes": case.n_false_successes, "win_total": case.win_total, "win_met": case.win_met,
            "consistent": case.consistent}


#: For each rate: a case's (numerator, denominator) from its `case_counts` row.
_CASE_PARTS: dict[str, Callable[[CaseRow], tuple[float, int | None]]] = {
    "pass_rate": lambda c: (c["n_passed"], c["n_runs"]),
    "false_success_rate": lambda c: (c["n_false_successes"], c["n_runs"]),
    "objective_met_rate": lambda c: (c["win_met"], c["win_total"]),
    "consistency": lambda c: (float(c["consistent"]), None),  # 0 or 1 per case with counted runs
}


def case_rates(cases: Sequence[CaseRow], metric: str) -> dict[str, float]:
    """Each case's mean of `metric` over its counted runs, in case order (failures count as 0).

    Cases with nothing counted for the metric (no counted run; no win condition, for
    `objective_met_rate`) have no mean and are left out: no number from too little.
    """
    parts = _CASE_PARTS[metric]
    out: dict[str, float] = {}
    for case in cases:
        if case["n_runs"] <= 0:
            continue
        numerator, denominator = parts(case)
        if denominator is None:
            out[case["case_id"]] = float(numerator)
        elif denominator > 0:
            out[case["case_id"]] = numerator / denominator
    return out


# -- one submission's facts, computed from its runs ------------------------------------------------


def _planned(rows: Iterable[RunFacts]) -> list[figures_of.PlannedRunFacts]:
    return [r.planned() for r in rows]


def submission_facts(store: Store, submission_id: str, conn: sa.Connection | None = None) -> SubmissionFacts | None:
    """A submission as its owner sees it: what it is (`SubmissionsRepo.submission_info`) and its figures
    now, computed from its runs (`stats.board.submission_facts`: rates unrounded, provisional until
    complete), or None."""
    repo = BoardRepo(store)
    info = SubmissionsRepo(store).submission_info(submission_id, conn)
    if info is None:
        return None
    return cast(SubmissionFacts, {**info, **figures_of.submission_facts(_planned(repo.run_rows(submission_id, conn)))})


def case_counts(store: Store, submission_ids: Sequence[str]) -> dict[str, list[CaseRow]]:
    """Per submission, one row per planned case, in case order: the counts its per-case means are
    made of, over the runs that count (`stats.board.case_counts`)."""
    repo = BoardRepo(store)
    return {sid: [case_row(c) for c in figures_of.case_counts(_planned(repo.run_rows(sid)))] for sid in submission_ids}


# -- stored figures -------------------------------------------------------------------------------


def _trait_figures(store: Store, release: ReleaseRow, submission_id: str) -> JsonObject | None:
    """`trait_figures` for an entry of a release that pins a rubric (the board shows trait
    figures there only), else None."""
    return trait_figures(store, submission_id) if release.get("rubric") is not None else None


def shown_fields(figures: JsonObject) -> list[str]:
    """The figure fields an entry shows on its board, in order."""
    return ["leaderboard_class", "status", "n_runs", "n_cases",
            *(key for rate in RATES for key in (rate, f"{rate}_ci")), "facilitator_models",
            *figures_of.trait_fields(figures), *(k for k in ("usage", "cost_per_run_usd") if k in figures)]


#: What a board entry shows of its usage block: the total's tokens, calls and cost (and why there is
#: no cost). The block by role, with models and latency, is the entry's (`entry`, the card, the page's
#: cost table): a board of 100,000 entries would otherwise carry 60 MB of it.
BOARD_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "self_reported", "cost_usd",
               "cost_reason")


def board_usage(usage: JsonObject) -> JsonObject:
    """An entry's usage block as its board shows it: `{"total": {BOARD_USAGE}}`, a part of the block."""
    total = usage["total"]
    assert isinstance(total, dict)
    return {"total": {k: total[k] for k in BOARD_USAGE}}


def shown(figures: JsonObject, *, full_usage: bool = False) -> JsonObject:
    """The figures an entry shows (`shown_fields`, in order): on a board its usage is `board_usage`'s,
    with `full_usage` (an entry by its id, the card, the page's cost table) the whole block."""
    out = {k: figures[k] for k in shown_fields(figures)}
    usage = out.get("usage")
    if not full_usage and isinstance(usage, dict):  # a block, or None (no usage recorded)
        out["usage"] = board_usage(usage)
    return out


def stored_row(submission_id: str, release_id: int, figures: JsonObject) -> FiguresRow:
    """An `entry_figures` row: the figures as canonical text (the same bytes on both backends, key
    order kept), the members the board shows of them as its text writes them (`shown`), and the
    columns a board sorts, filters and ranks by."""
    ranked, interval = figures_of.ranking(figures)
    shown_text = json.dumps(shown(figures), ensure_ascii=False)[1:-1]
    return {  # a FiguresRow, its keys in the order they were always written
        "shown": shown_text,
        "submission_id": submission_id, "release_id": release_id, "method": figures_of.METHOD,
        "complete": figures["status"] == "complete", "ranked": ranked,
        "order_key": figures_of.order_key(submission_id, figures),
        "rank_low": interval[0] if interval else None, "rank_high": interval[1] if interval else None,
        "figures": json.dumps(figures, ensure_ascii=False, separators=(",", ":")),
    }


def _computed(store: Store, release: ReleaseRow, submission_id: str, rows: Sequence[RunFacts]) -> FiguresRow:
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


def _compute_release(store: Store, release: ReleaseRow, which: sa.Select[Any] | None = None
                     ) -> Iterable[FiguresRow]:
    repo = BoardRepo(store)
    for sid, rows in repo.release_run_rows(release["id"], which):
        yield _computed(store, release, sid, rows)


#: (store URL, release, method) whose finalised submissions all have figures: checked once a process.
_FIGURED: set[tuple[str, int, str]] = set()


def ensure(store: Store, release: ReleaseRow) -> None:
    """Store the figures of any finalised submission of a release that has none under the current
    method (a store upgraded to 0018, a method changed since): once per process and release."""
    key = (str(store.engine.url), int(release["id"]), figures_of.METHOD)
    if key in _FIGURED:
        return
    repo = BoardRepo(store)
    if repo.has_unfigured(release["id"], figures_of.METHOD):
        missing = repo.unfigured(release["id"], figures_of.METHOD)
        batch: list[FiguresRow] = []
        for row in _compute_release(store, release, missing):
            batch.append(row)
            if len(batch) >= 1000:
                repo.put_figures(batch)
                batch = []
        repo.put_figures(batch)
    _FIGURED.add(key)


def recompute(store: Store, *, actor: Actor) -> RecomputeReport:
    """Rebuild every finalised submission's stored figures from the rows (staff only), and say what
    differed from what was stored: {"entries", "differences": [{submission_id, field, stored,
    recomputed}]} (`field` "*" when a row was missing)."""
    require_staff(actor, "recompute the board's figures", "recompute")
    repo = BoardRepo(store)
    stored = {r["submission_id"]: r for r in repo.stored_figures()}
    differences: list[Difference] = []
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


def _differences(row: FiguresRow, held: FiguresRow | None) -> list[Difference]:
    sid = row["submission_id"]
    if held is None:
        return [{"submission_id": sid, "field": "*", "stored": None, "recomputed": "figures"}]
    mine, theirs = json.loads(row["figures"]), json.loads(held["figures"])
    out: list[Difference] = [{"submission_id": sid, "field": k, "stored": theirs.get(k), "recomputed": mine.get(k)}
                             for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
    columns: tuple[tuple[str, JsonValue, JsonValue], ...] = (
        ("method", row["method"], held["method"]), ("complete", row["complete"], held["complete"]),
        ("ranked", row["ranked"], held["ranked"]), ("order_key", row["order_key"], held["order_key"]),
        ("rank_low", row["rank_low"], held["rank_low"]), ("rank_high", row["rank_high"], held["rank_high"]))
    for column, recomputed, stored in columns:
        if recomputed != stored:
            out.append({"submission_id": sid, "field": column, "stored": stored, "recomputed": recomputed})
    return out


# -- entries ----------------------------------------------------------------------------------------


def _about(info: EntryRow) -> JsonObject:
    """What an entry shows of its submission (not a figure): label, handle, note, era, digest, agent."""
    current = info.measurement_era_is_current
    return {
        "submission_id": info.submission_id,
        "agent_label": info.label,
        "label_self_declared": True,
        "config_signature": info.config_signature,
        "public_handle": info.public_handle,
        "play_model": info.play_model,
        "model_provenance": info.model_provenance,
        "measurement_era": info.measurement_era,
        "measurement_era_is_current": None if current is None else bool(current),  # the driver's 0/1 too
        "variance_note": info.variance_note,
        "harness_version": info.harness_version,
        "digest": info.digest,
    }


def entry_view(info: EntryRow, figures: JsonObject, rank: int | None, *, full_usage: bool = False) -> JsonObject:
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
_line_values = operator.attrgetter(*_LINE_COLUMNS)  # of an `EntryRow`, whose fields they are


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


def _entry_line(row: EntryRow, rank: int | None) -> str:
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


def _whole(rows: Sequence[EntryRow]) -> list[tuple[EntryRow, int | None]]:
    """Whole-board rows in board order, each with its statistical rank among the ranked ones
    (`stats.board.statistical_rank` over the stored intervals)."""
    lows = sorted(r.rank_low for r in rows if r.ranked and r.rank_low is not None)  # a ranked row has both ends
    rank = figures_of.statistical_rank
    return [(r, rank(r.rank_high, lows) if r.ranked and r.rank_high is not None else None)
            for r in sorted(rows, key=operator.attrgetter("order_key"))]


def _figures(row: EntryRow) -> JsonObject:
    """An entry row's stored figures, decoded (a row read with them)."""
    assert row.figures is not None
    figures: JsonObject = json.loads(row.figures)
    return figures


def ranked_entries(rows: Sequence[Mapping[str, Any]]) -> list[JsonObject]:
    """Whole-board entries in board order, each with its statistical rank among the ranked ones, from
    rows with `EntryRow`'s fields (`verify`'s, recounted from exported rows: mappings it builds)."""
    return [entry_view(r, _figures(r), rank) for r, rank in _whole([EntryRow.from_mapping(m) for m in rows])]


def _ranks(repo: BoardRepo, rows: Sequence[EntryRow]) -> list[int | None]:
    """The statistical ranks of some listed entries' rows (a page), counted over the stored intervals
    of the whole board (1 + the ranked entries whose lower bound lies above each one's upper bound)."""
    ranked = [r for r in rows if r.ranked and r.rank_high is not None]
    if not ranked:
        return [None] * len(rows)
    above = iter(repo.ranked_above(ranked[0].release_id, [r.rank_high for r in ranked if r.rank_high is not None]))
    return [1 + next(above) if r.ranked and r.rank_high is not None else None for r in rows]


def listed_entry(store: Store, submission_id: str) -> EntryRow | None:
    """The stored board row of a listed entry (published, listed, complete, handled), or None."""
    return BoardRepo(store).entry(submission_id, digest_version=DIGEST_VERSION)


def rank_of(store: Store, row: EntryRow | None) -> int | None:
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


def provenance(store: Store, release: ReleaseRow) -> ProvenanceView:
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


def _suite(release: ReleaseRow, latest_public: str | None) -> SuiteView:
    return {"key": release["suite_key"], "version": release["version"], "title": release["title"],
            "language": release["language"], "visibility": release["visibility"],
            "is_latest_public": release["version"] == latest_public}


def _public_history(store: Store, key: str) -> list[ReleaseRow]:
    return sorted((r for r in ReleasesRepo(store).releases(key) if is_listed(PUBLIC, r)),
                  key=lambda r: releases.version_key(r["version"]), reverse=True)


def board(store: Store, key: str, version: str | None = None, *, actor: Actor, limit: int | None = None,
          cursor: str | None = None, search: str | None = None, full_usage: bool = False) -> BoardView:
    """A suite version's public board (the latest public version by default), whoever asks: every
    entry, or with `limit` a page of them from `cursor` on (`page.next_cursor`: the next page's, None
    at the end), optionally only those whose handle or label contains `search`. With `full_usage`,
    each entry carries its whole usage block (by role) where the board shows its total (`board_usage`):
    for the card's and the board page's cost tables."""
    release_id, head, after, paged = _head(store, key, version, actor=actor, limit=limit, cursor=cursor, search=search)
    repo = BoardRepo(store)
    ranked, page = _ranked(repo, release_id, after=after, limit=limit, search=search, paged=paged, figures=True)
    value: BoardView = {**head, "entries": [entry_view(r, _figures(r), rank, full_usage=full_usage)
                                            for r, rank in ranked]}
    if page is not None:
        value["page"] = page
    return value


def board_json(store: Store, key: str, version: str | None = None, *, actor: Actor, limit: int | None = None,
               cursor: str | None = None, search: str | None = None) -> str:
    """`board_text(board(...))`, the same bytes, without decoding any entry's stored figures: what the
    CLI's --json and the API serve (a whole board of 100,000 entries in seconds)."""
    release_id, head, after, paged = _head(store, key, version, actor=actor, limit=limit, cursor=cursor, search=search)
    repo = BoardRepo(store)
    if not paged:  # the whole board's text: every row as the driver gives it, written as it is read
        whole: BoardText = {**head, "entries": _whole_lines(*repo.board_rows(release_id, digest_version=DIGEST_VERSION))}
        return board_text(whole)
    ranked, page = _ranked(repo, release_id, after=after, limit=limit, search=search, paged=paged, figures=False)
    value: BoardText = {**head, "entries": [_entry_line(r, rank) for r, rank in ranked]}
    if page is not None:
        value["page"] = page
    return board_text(value)


def _head(store: Store, key: str, version: str | None, *, actor: Actor, limit: int | None, cursor: str | None,
          search: str | None) -> tuple[int, _Head, str | None, bool]:
    """A board's release (its id), what the board says before its entries, where its page starts (`after`) and
    whether it is a page (`limit`, `cursor` or `search`)."""
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"a page holds 1 to {MAX_PAGE} entries", "limit", value=limit)  # type: ignore[arg-type]
    release = releases.find_release(store, key, version, public=True, actor=actor)
    history = _public_history(store, key)
    ensure(store, release)
    after = _uncursor(cursor) if cursor else None
    paged = limit is not None or after is not None or bool(search)
    head: _Head = {
        "suite": _suite(release, history[0]["version"] if history else None),
        "versions": [{"version": r["version"], "released_at": r["created_at"].isoformat(),
                      "current": r["version"] == release["version"]} for r in history],
        "provenance": provenance(store, release),
        "ranking": TRAIT_RANKING if release.get("rubric") is not None else RANKING,
    }
    return release["id"], head, after, paged


def _ranked(repo: BoardRepo, release_id: int, *, after: str | None, limit: int | None, search: str | None,
            paged: bool, figures: bool) -> tuple[list[tuple[EntryRow, int | None]], PageView | None]:
    """A board's entry rows in board order, each with its rank, and (`paged`) what its page is."""
    rows = repo.entries(release_id, digest_version=DIGEST_VERSION, after=after,
                        limit=None if limit is None else limit + 1, search=search, figures=figures)
    more = limit is not None and len(rows) > limit
    shown = rows[:limit] if limit is not None else rows
    if not paged:
        return _whole(shown), None
    page: PageView = {"limit": limit, "search": search or None,
                      "next_cursor": _cursor(shown[-1].order_key) if more and shown else None}
    return list(zip(shown, _ranks(repo, shown))), page


def entry(store: Store, submission_id: str, *, actor: Actor) -> EntryPage:
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
        "entry": entry_view(found, _figures(found), _ranks(repo, [found])[0] if listed is not None else None,
                            full_usage=True),
    }


_ENTRIES = "@@assay-board-entries@@"


def board_text(value: BoardView | BoardText | EntryPage) -> str:
    """The board JSON as printed and written: one canonical text for both backends — indented, each
    entry compact on a line of its own (an entry already rendered, `board_json`'s, is written as it
    is). The text is written once: the indented head and tail around the entries, joined with them in
    one pass (no placeholder replaced in a text of 100 MB, no copy of the entries' text)."""
    entries: list[JsonObject] | list[str] | None = value.get("entries")  # type: ignore[assignment]
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
