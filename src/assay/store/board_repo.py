"""Reads and appends for the board's numbers: per-run facts, stored figures, board entries, last change.

`BoardRepo` wraps a `Store` and uses its engine; like the Store it only ever INSERTs (the
database refuses anything else), save for the one derived table. Numbers are never computed here:
the store gives per-run facts (`board_run_facts`) and keeps each entry's figures, computed in
Python (`stats.board`), in `entry_figures` — the one derived table, whose rows `put_figures`
replaces and whose `listed` flag `relist` recomputes whenever an event that lists an entry is
appended (here, and by the accounts and submissions repositories, in their transactions).

The board's other concerns are repositories of their own, in the same lock namespace: releases
(`releases_repo`), accounts and handles (`accounts_repo`), submissions with their completion,
publication and notes (`submissions_repo`), platform config and eras (`config_repo`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, TypedDict, cast

import sqlalchemy as sa

from assay.store.board_schema import (
    account_handles,
    board_run_facts,
    current_era,
    entry_figures,
    measurement_eras,
    publication_events,
    submission_finalisations,
    submissions,
    suite_releases,
    unlisted_submissions,
    variance_notes,
)
from assay.store.digest_schema import digest_stamps
from assay.stats.board import PlannedRunFacts
from assay.store.repo import Repository
from assay.store.schema import batches, utcnow


@dataclass(frozen=True, slots=True)
class RunFacts:
    """One planned run of a submission as `board_run_facts` gives it: plain facts (what is scored,
    gated or counted is decided by `stats.board`: `planned()`), the same on both backends."""

    submission_id: str
    release_id: int
    run_id: str
    slot: int
    case_id: str
    rep: int
    seed: int
    status: str | None  # None: never recorded
    has_run: bool
    n_checks: int
    score: int
    safety_failures: int
    passed: bool
    claimed_success: bool | None
    false_success: bool
    swept: bool
    player_messages: int | None  # the sweep's, None until swept
    actions: int | None
    min_player_messages: int | None
    min_actions_per_turn: float | None
    facilitator_model: str | None
    ranked_eligible: bool | None  # None: a legacy run
    win_total: int
    win_met: int
    judged: bool

    @classmethod
    def of(cls, row: Mapping[Any, Any]) -> RunFacts:
        """From a `board_run_facts` row's mapping (SQLite's 0/1 made bools, counts made ints)."""
        return cls(
            submission_id=row["submission_id"], release_id=int(row["release_id"]), run_id=row["run_id"],
            slot=int(row["slot"]), case_id=row["case_id"], rep=int(row["rep"]), seed=int(row["seed"]),
            status=row["status"], has_run=bool(row["has_run"]), n_checks=int(row["n_checks"]),
            score=int(row["score"]), safety_failures=int(row["safety_failures"]), passed=bool(row["passed"]),
            claimed_success=_bool(row["claimed_success"]), false_success=bool(row["false_success"]),
            swept=bool(row["swept"]), player_messages=row["player_messages"], actions=row["actions"],
            min_player_messages=row["min_player_messages"], min_actions_per_turn=row["min_actions_per_turn"],
            facilitator_model=row["facilitator_model"], ranked_eligible=_bool(row["ranked_eligible"]),
            win_total=int(row["win_total"]), win_met=int(row["win_met"]), judged=bool(row["judged"]))

    def planned(self) -> PlannedRunFacts:
        """The run as `stats.board` computes with it."""
        return PlannedRunFacts(
            case_id=self.case_id, slot=self.slot, status=self.status, n_checks=self.n_checks, passed=self.passed,
            false_success=self.false_success, swept=self.swept, player_messages=self.player_messages,
            actions=self.actions, min_player_messages=self.min_player_messages,
            min_actions_per_turn=self.min_actions_per_turn, ranked_eligible=self.ranked_eligible,
            win_total=self.win_total, win_met=self.win_met, judged=self.judged,
            facilitator_model=self.facilitator_model)


class FiguresRow(TypedDict):
    """An `entry_figures` row as `put_figures` inserts it and `stored_figures` reads it back: a
    TypedDict because it is written to the table as it is (its keys are the table's columns)."""

    shown: str  # the members the board shows of the figures, as its text writes them
    submission_id: str
    release_id: int
    method: str
    complete: bool
    ranked: bool
    order_key: str
    rank_low: float | None
    rank_high: float | None
    figures: str  # canonical JSON text


@dataclass(frozen=True, slots=True)
class EntryRow:
    """A board entry as the store keeps it: what it shows besides its figures (label, handle, note,
    era, digest), the stored figures' shown members (`shown`, and with `figures` the whole text) and
    the columns it is ranked and ordered by. Field order is `BoardRepo._entries_query`'s columns."""

    submission_id: str
    release_id: int
    label: str
    play_model: str | None
    model_provenance: str | None
    public_handle: str | None
    variance_note: str | None
    measurement_era: str | None
    measurement_era_is_current: bool | None  # None: not finalised
    shown: str
    ranked: bool
    rank_low: float | None
    rank_high: float | None
    order_key: str
    harness_version: str | None
    config_signature: str | None
    digest: str | None
    figures: str | None = None  # None when read without the whole figures (the board's text)

    @classmethod
    def of(cls, row: Sequence[Any]) -> EntryRow:
        """From a row of `_entries_query`'s columns, in order (the driver's booleans made bools)."""
        (sid, release_id, label, play_model, provenance, handle, note, era, current, shown, ranked, low, high,
         order_key, harness, signature, digest, *figures) = row
        return cls(sid, release_id, label, play_model, provenance, handle, note, era, _bool(current), shown,
                   bool(ranked), low, high, order_key, harness, signature, digest, figures[0] if figures else None)

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> EntryRow:
        """From any mapping with the entry's fields (`verify`'s recounted entries)."""
        return cls.of([row[f] for f in _ENTRY_FIELDS if f != "figures"] + [row["figures"]])


_ENTRY_FIELDS = tuple(f.name for f in fields(EntryRow))


def _bool(value: Any) -> bool | None:
    """SQLite hands booleans back as 0/1 from views; PostgreSQL as bool. One shape for callers."""
    return None if value is None else bool(value)


def latest(table: sa.Table, column: str, key: sa.ColumnElement[Any], value: sa.ColumnElement[Any]
           ) -> sa.ScalarSelect[Any]:
    """The latest row's `column` of an event stream for `key == value` ("the latest row wins")."""
    return (sa.select(table.c[column]).where(key == value).order_by(table.c.id.desc()).limit(1)
            .correlate_except(table).scalar_subquery())


def relist(conn: sa.Connection, where: sa.ColumnElement[bool], params: Mapping[str, list[str]] | None = None) -> None:
    """Recompute `entry_figures.listed` for the rows `where` selects, from the event rows: complete,
    published now, its account holding a handle now, not unlisted. Called by every write that
    appends one of those events (publication, handle), in its transaction."""
    e, s = entry_figures, submissions
    published = (sa.select(publication_events.c.published).where(publication_events.c.submission_id == e.c.submission_id)
                 .order_by(publication_events.c.id.desc()).limit(1).scalar_subquery())
    handle = (sa.select(account_handles.c.handle).select_from(account_handles.join(s, s.c.account == account_handles.c.account))
              .where(s.c.id == e.c.submission_id).order_by(account_handles.c.id.desc()).limit(1).scalar_subquery())
    unlisted = sa.exists().where(unlisted_submissions.c.submission_id == e.c.submission_id)
    listed = sa.and_(e.c.complete, sa.func.coalesce(published, False) == sa.true(), handle.is_not(None),
                     sa.not_(unlisted))
    conn.execute(sa.update(e).where(where).values(listed=sa.case((listed, True), else_=False)), params or {})


class RunFactsRow(TypedDict):
    """A `RunFacts` as a mapping (its fields in order) with what `stats.board` decides of the run. A
    TypedDict: results, scoring, judgements and the owner's view read it by key, and it is served as is."""

    submission_id: str
    release_id: int
    run_id: str
    slot: int
    case_id: str
    rep: int
    seed: int
    status: str | None
    has_run: bool
    n_checks: int
    score: int
    safety_failures: int
    passed: bool
    claimed_success: bool | None
    false_success: bool
    swept: bool
    player_messages: int | None
    actions: int | None
    min_player_messages: int | None
    min_actions_per_turn: float | None
    facilitator_model: str | None
    ranked_eligible: bool | None
    win_total: int
    win_met: int
    judged: bool
    scored: bool
    gated: bool
    included: bool


class BoardRepo(Repository):
    """The board's numbers over the store's engine: per-run facts, stored figures and entries."""

    LOCKS = "board"

    def run_rows(self, submission_id: str, conn: sa.Connection | None = None) -> list[RunFacts]:
        """The `board_run_facts` rows of one submission, in slot order (plain facts: what is scored,
        gated or counted is decided by `stats.board`)."""
        f = board_run_facts
        query = sa.select(f).where(f.c.submission_id == submission_id).order_by(f.c.slot)
        if conn is not None:
            return [RunFacts.of(r._mapping) for r in conn.execute(query)]
        with self.read() as c:
            return [RunFacts.of(r._mapping) for r in c.execute(query)]

    def run_facts(self, submission_id: str, conn: sa.Connection | None = None) -> list[RunFactsRow]:
        """`run_rows` with what `stats.board` decides of each run: `scored`, `gated`, `included`."""
        out = []
        for row in self.run_rows(submission_id, conn):
            facts = row.planned()
            out.append(cast(RunFactsRow, {**asdict(row), "scored": facts.scored, "gated": facts.gated,
                                          "included": facts.included}))
        return out

    def release_run_rows(self, release_id: int, submission_ids: sa.Select[Any] | None = None,
                         ) -> Iterator[tuple[str, list[RunFacts]]]:
        """(submission, its run rows) for every submission of a release with a plan (or those the
        query `submission_ids` selects), in submission order: one query, no bound id per entry."""
        f = board_run_facts
        query = sa.select(f).where(f.c.release_id == release_id).order_by(f.c.submission_id, f.c.slot)
        if submission_ids is not None:
            query = query.where(f.c.submission_id.in_(submission_ids))
        with self.read() as conn:
            current: str | None = None
            held: list[RunFacts] = []
            for row in conn.execution_options(yield_per=5000).execute(query):
                if row.submission_id != current:
                    if current is not None:
                        yield current, held
                    current, held = row.submission_id, []
                held.append(RunFacts.of(row._mapping))
            if current is not None:
                yield current, held

    def last_change(self) -> tuple[str, datetime | None]:
        """What every public board, entry and card was last changed by, in one cheap query: a token
        that changes whenever a stored figure is replaced or an event that lists, labels or dates an
        entry is appended (publication, handle, variance note, era, unlisting, digest stamp, release),
        and the latest time among them (None on an empty store). Keys the web's read cache and ETags."""
        with self.read() as conn:
            row = list(conn.execute(_last_change_query()).one())
        times = [v for v in row if isinstance(v, datetime)]
        return "|".join(v.isoformat() if isinstance(v, datetime) else str(v) for v in row), max(times, default=None)

    # -- stored figures (derived: the one table whose rows are replaced) -------------------------

    def put_figures(self, rows: Sequence[FiguresRow], conn: sa.Connection | None = None) -> None:
        """Replace the stored figures of each row's submission (`entry_figures`: derived, recomputed
        from the rows, never a result)."""
        if not rows:
            return
        if conn is None:
            with self.write() as c:
                self.put_figures(rows, c)
            return
        now = utcnow()
        ids: sa.BindParameter[str] = sa.bindparam("ids", expanding=True)
        for i in range(0, len(rows), 1000):  # a bounded number of bound ids per statement
            chunk = rows[i:i + 1000]
            conn.execute(sa.delete(entry_figures).where(entry_figures.c.submission_id.in_(ids)),
                         {"ids": [r["submission_id"] for r in chunk]})
            conn.execute(sa.insert(entry_figures), [{**r, "listed": False, "created_at": now} for r in chunk])
            relist(conn, entry_figures.c.submission_id.in_(ids), {"ids": [r["submission_id"] for r in chunk]})

    def stored_figures(self, release_id: int | None = None) -> Iterator[FiguresRow]:
        """Every stored figures row (of one release), in submission order."""
        e = entry_figures
        query = (sa.select(e.c.shown, e.c.submission_id, e.c.release_id, e.c.method, e.c.complete, e.c.ranked,
                           e.c.order_key, e.c.rank_low, e.c.rank_high, e.c.figures).order_by(e.c.submission_id))
        if release_id is not None:
            query = query.where(e.c.release_id == release_id)
        with self.read() as conn:
            for r in conn.execution_options(yield_per=5000).execute(query):
                yield FiguresRow(shown=r.shown, submission_id=r.submission_id, release_id=r.release_id, method=r.method,
                                 complete=bool(r.complete), ranked=bool(r.ranked), order_key=r.order_key,
                                 rank_low=r.rank_low, rank_high=r.rank_high, figures=r.figures)

    @staticmethod
    def unfigured(release_id: int, method: str) -> sa.Select[Any]:
        """The finalised submissions of a release whose figures are not stored under `method`."""
        e = entry_figures
        return (sa.select(submissions.c.id)
                .join(submission_finalisations, submission_finalisations.c.submission_id == submissions.c.id)
                .outerjoin(e, e.c.submission_id == submissions.c.id)
                .where(submissions.c.release_id == release_id,
                       sa.or_(e.c.submission_id.is_(None), e.c.method != method)))

    @staticmethod
    def finalised(release_id: int) -> sa.Select[Any]:
        """The finalised submissions of a release (the ones with stored figures)."""
        return (sa.select(submissions.c.id)
                .join(submission_finalisations, submission_finalisations.c.submission_id == submissions.c.id)
                .where(submissions.c.release_id == release_id))

    def has_unfigured(self, release_id: int, method: str) -> bool:
        with self.read() as conn:
            return conn.execute(self.unfigured(release_id, method).limit(1)).first() is not None

    # -- board entries: stored figures of the published, complete, handled entries --------------

    @classmethod
    def _entries_query(cls, release_id: int | None, *, listed: bool, digest_version: int,
                       figures: bool = True, whole: bool = False) -> sa.Select[Any]:
        """The board rows: what an entry shows besides its stored figures, and those figures. An
        entry's handle, note and digest are each the latest row of its stream: read row by row (a
        subquery an entry: a page, an entry) or, `whole`, joined once (each stream's latest rows
        grouped, then hash-joined: the whole board, where 100,000 subqueries took most of the read)."""
        e, s, fz = entry_figures, submissions, submission_finalisations
        era_now = sa.select(current_era.c.name).limit(1).scalar_subquery()
        handle: sa.ColumnElement[Any]
        note: sa.ColumnElement[Any]
        digest: sa.ColumnElement[Any]
        source = (e.join(s, s.c.id == e.c.submission_id).join(batches, batches.c.id == s.c.id)
                  .outerjoin(fz, fz.c.submission_id == s.c.id))
        if whole:
            ah, vn = account_handles.alias("latest_handle"), variance_notes.alias("latest_note")
            handles = (sa.select(account_handles.c.account, sa.func.max(account_handles.c.id).label("id"))
                       .group_by(account_handles.c.account).subquery("handle_ids"))
            notes = (sa.select(variance_notes.c.submission_id, sa.func.max(variance_notes.c.id).label("id"))
                     .group_by(variance_notes.c.submission_id).subquery("note_ids"))
            ds = digest_stamps  # its key is (submission_id, digest_version): one row at most
            source = (source.outerjoin(handles, handles.c.account == s.c.account).outerjoin(ah, ah.c.id == handles.c.id)
                      .outerjoin(notes, notes.c.submission_id == s.c.id).outerjoin(vn, vn.c.id == notes.c.id)
                      .outerjoin(ds, sa.and_(ds.c.submission_id == s.c.id, ds.c.digest_version == digest_version)))
            handle, note, digest = ah.c.handle, vn.c.text, ds.c.digest
        else:
            handle = latest(account_handles, "handle", account_handles.c.account, s.c.account)
            note = latest(variance_notes, "text", variance_notes.c.submission_id, s.c.id)
            digest = (sa.select(digest_stamps.c.digest)
                      .where(digest_stamps.c.submission_id == s.c.id, digest_stamps.c.digest_version == digest_version)
                      .scalar_subquery())
        info = [  # what an entry shows besides its stored figures (no more: a full board reads every row)
            s.c.id.label("submission_id"), e.c.release_id, s.c.label, s.c.play_model,
            sa.case((s.c.baseline, "platform_verified"), (s.c.play_model.is_not(None), "self_reported"),
                    else_=None).label("model_provenance"),
            handle.label("public_handle"), sa.func.nullif(note, "").label("variance_note"), fz.c.measurement_era,
            sa.case((fz.c.submission_id.is_(None), None),
                    (sa.and_(fz.c.measurement_era.is_(None), era_now.is_(None)), True),
                    (fz.c.measurement_era == era_now, True), else_=False).label("measurement_era_is_current"),
        ]
        whole_figures = (e.c.figures,) if figures else ()  # the board's text needs `shown` only
        query = (sa.select(*info, e.c.shown, e.c.ranked, e.c.rank_low, e.c.rank_high, e.c.order_key,
                           batches.c.harness_version, batches.c.config_signature, digest.label("digest"),
                           *whole_figures)  # `EntryRow`'s fields, in order
                 .select_from(source))
        if listed:  # the stored flag, kept by `relist`: an index range, whatever the board's size
            query = query.where(e.c.listed)
        else:  # published, complete and handled, but unlisted: by id only, read from the events
            published = latest(publication_events, "published", publication_events.c.submission_id, s.c.id)
            unlisted = sa.exists().where(unlisted_submissions.c.submission_id == s.c.id)
            query = query.where(e.c.complete, published == sa.true(), handle.is_not(None), unlisted)
        if release_id is not None:
            query = query.where(e.c.release_id == release_id)
        return query

    def entries(self, release_id: int, *, digest_version: int, after: str | None = None, limit: int | None = None,
                search: str | None = None, figures: bool = True) -> list[EntryRow]:
        """A release's listed entries in board order (`order_key`), from `after` on, at most `limit`,
        those whose handle or label contains `search` (case-insensitively); without `figures`, only
        the members a board shows of them (`shown`).

        The whole board (no `after`, `limit` or `search`) is read in one pass of joins, unordered,
        and sorted here; on PostgreSQL without JIT compilation, which took longer than the query it
        compiled (seconds at 100,000 entries, for a plan of joins over plain columns)."""
        e = entry_figures
        whole = after is None and limit is None and not search
        query = self._entries_query(release_id, listed=True, digest_version=digest_version, figures=figures,
                                    whole=whole)
        if not whole:
            query = query.order_by(e.c.order_key)
        if after is not None:
            query = query.where(e.c.order_key > after)
        if search:
            needle = search.lower()
            handle = latest(account_handles, "handle", account_handles.c.account, submissions.c.account)
            query = query.where(sa.or_(sa.func.lower(submissions.c.label).contains(needle, autoescape=True),
                                       sa.func.lower(handle).contains(needle, autoescape=True)))
        if limit is not None:
            query = query.limit(limit)
        with self.read() as conn:
            if whole:
                _no_jit(conn)
            _, rows = _plain_rows(conn, query)
        out = [EntryRow.of(row) for row in rows]
        if whole:
            out.sort(key=operator.attrgetter("order_key"))
        return out

    def board_rows(self, release_id: int, *, digest_version: int) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A release's listed entries for the whole board's text: the columns' names and each row as
        the driver gives it (a tuple: no dict a row at 100,000 rows), in no order; the members a board
        shows of its figures only (`shown`). The same rows as `entries` without `after`, `limit` or
        `search`."""
        query = self._entries_query(release_id, listed=True, digest_version=digest_version, figures=False,
                                    whole=True)
        with self.read() as conn:
            _no_jit(conn)
            return _plain_rows(conn, query)

    def entry(self, submission_id: str, *, digest_version: int, unlisted: bool = False) -> EntryRow | None:
        """A listed board entry by its full id (with `unlisted`, the unlisted one instead), or None."""
        query = self._entries_query(None, listed=not unlisted, digest_version=digest_version).where(
            entry_figures.c.submission_id == submission_id)
        with self.read() as conn:
            row = conn.execute(query).first()
        return EntryRow.of(row) if row is not None else None

    @classmethod
    @functools.cache
    def _ranked_above_query(cls) -> sa.Select[Any]:
        """Built once (a statement is costlier to build than to run): the count `ranked_above` runs."""
        e = entry_figures
        return (sa.select(sa.func.count()).select_from(e)
                .where(e.c.release_id == sa.bindparam("release_id"), e.c.listed, e.c.ranked,
                       e.c.rank_low > sa.bindparam("upper", type_=sa.Float())))

    def ranked_above(self, release_id: int, uppers: Sequence[float]) -> list[int]:
        """For each of `uppers`, how many ranked, listed entries of a release have a lower end above it
        (an index range over `(release_id, ranked, rank_low)`: the entries above it only)."""
        query = self._ranked_above_query()
        with self.read() as conn:
            return [int(conn.execute(query, {"release_id": release_id, "upper": u}).scalar_one()) for u in uppers]


def _plain_rows(conn: sa.Connection, query: sa.Select[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`query`'s column names and every row of it as the driver's tuple: executed by SQLAlchemy (bound
    parameters, as everywhere) and fetched by the driver's own cursor at once (psycopg: a client-side
    cursor, whose C loaders make the values; SQLite: its cursor), without a SQLAlchemy row a row: a
    whole board of 100,000 entries in a fraction of the time rows took. Values are the driver's:
    SQLite gives 0/1 for a boolean, which the callers read as truth values."""
    result = conn.execute(query)
    try:
        return list(result.keys()), list(result.cursor.fetchall())  # psycopg's and sqlite3's rows are tuples
    finally:
        result.close()


def _no_jit(conn: sa.Connection) -> None:
    """No JIT compilation for the rest of this (read) transaction, on PostgreSQL: a whole board's plan
    of joins over plain columns costs enough to be compiled, which took longer than the query ran
    (seconds at 100,000 entries)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL jit = off")


@functools.cache
def _last_change_query() -> sa.Select[Any]:
    """`BoardRepo.last_change`'s one statement, built once (it is asked before every public read).

    Only maxima of indexed columns (ids, and `created_at`, indexed by 0020), so it costs a few
    b-tree steps whatever the board's size, never a scan: stored figures are replaced with a new
    `created_at`, and the event tables are append-only, so each change moves a maximum."""
    def one(column: Any) -> Any:
        return sa.select(column).scalar_subquery()

    ef, us, ds = entry_figures, unlisted_submissions, digest_stamps
    return sa.select(one(sa.func.max(ef.c.created_at)),
                     one(sa.func.max(publication_events.c.id)), one(sa.func.max(publication_events.c.created_at)),
                     one(sa.func.max(account_handles.c.id)), one(sa.func.max(account_handles.c.created_at)),
                     one(sa.func.max(variance_notes.c.id)), one(sa.func.max(measurement_eras.c.id)),
                     one(sa.func.max(suite_releases.c.id)), one(sa.func.max(us.c.created_at)),
                     one(sa.func.max(ds.c.created_at)))
