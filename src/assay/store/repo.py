"""Repositories: one concern's reads and appends over a `Store` handle, as parameterised Core SQL.

Writes only ever INSERT: the database refuses UPDATE and DELETE (see `triggers.py`), so a
correction is a new row, never an edit. Each write method is one transaction, so a refused
operation (a frozen case whose checks changed, a run that was never planned) stores nothing.
Reads hand back typed read models (`store.rows` and each repository's own), the same on SQLite
and PostgreSQL, so the pure scoring and statistics code never sees a database type.

`Repository` is the base every repository shares (the core one, `runs_repo.RunsRepo`, the
board's, the panel's, keys, admins…): its `write`, `read` and `lock` are the handle's own
(`store/handle.py`), so the plumbing exists once. Also here: the one id-prefix rule
(`resolve_prefix`) and the helpers that tell a refused write in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import sqlalchemy as sa

from assay.errors import Conflict, Invalid, NotFound
from assay.store.board_schema import submissions
from assay.store.handle import Store
from assay.store.jsonvalue import dumps

__all__ = ["MIN_PREFIX", "Repository", "Store", "owned_by", "resolve_prefix"]

T = TypeVar("T")

#: Shortest id prefix `resolve_prefix` accepts: long enough to be unambiguous in practice.
MIN_PREFIX = 6

#: Keep IN (...) lists well under SQLite's bound-parameter limit.
_CHUNK = 500

def resolve_prefix(conn: sa.Connection, column: sa.ColumnElement[Any], ident: str, noun: str,
                   within: sa.ColumnElement[bool] | None = None) -> str | None:
    """The one id-prefix rule (runs, batches, submissions): `ident` itself when it is an id, else
    the one id it is a prefix of (at least `MIN_PREFIX` characters), else None; an ambiguous or
    too-short prefix is refused. Matching is decided in Python, case-sensitively: SQLite's LIKE
    ignores ASCII case and PostgreSQL's does not, and both backends must agree.

    `within` limits what a prefix may expand to (the asker's own ids, `owned_by`): a prefix then
    neither finds nor, when ambiguous, names an id outside it, so it never tells anyone of ids
    they may not see. A full id is taken as it is; the caller decides whether its asker may see it."""
    if conn.execute(sa.select(column).where(column == ident)).first() is not None:
        return ident
    if len(ident) < MIN_PREFIX:
        raise NotFound(f"no {noun} has this id, and a {noun} id prefix needs at least {MIN_PREFIX} characters",
                       noun, value=ident)
    query = sa.select(column).where(column.startswith(ident, autoescape=True)).order_by(column)
    if within is not None:
        query = query.where(within)
    matches = [str(m) for m in conn.execute(query).scalars() if str(m).startswith(ident)]
    if len(matches) > 1:
        raise Invalid(f"{noun} id prefix is ambiguous (matches {matches[0]}, {matches[1]}, ...)", noun, value=ident)
    return matches[0] if matches else None


def owned_by(owner: str | None, batch_id: sa.ColumnElement[Any]) -> sa.ColumnElement[bool] | None:
    """The condition "the batch `batch_id` is a submission of account `owner`" for `resolve_prefix`
    (None: anyone's, for the operator; an empty `owner` owns nothing)."""
    if owner is None:
        return None
    return batch_id.in_(sa.select(submissions.c.id).where(submissions.c.account == owner))


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _refused(exc: sa.exc.IntegrityError, what: str) -> Conflict:
    """A constraint the database enforced, told as one line: it is a refused operation."""
    lines = str(exc.orig).strip().splitlines()
    return Conflict(f"{what} refused by the database: {lines[0] if lines else exc}")


def _json_fault(exc: BaseException) -> bool:
    """Whether `exc` is a JSON column value the encoder refused (raw on psycopg, wrapped on SQLite)."""
    if isinstance(exc, sa.exc.DBAPIError):
        return False
    if isinstance(exc, sa.exc.StatementError):
        return isinstance(exc.orig, ValueError | TypeError)
    return isinstance(exc, ValueError | TypeError)


def _first_unstorable(values: dict[str, object]) -> str | None:
    """`"field: reason"` for the first value `dumps` refuses; only run after a refusal."""
    for name, value in values.items():
        try:
            dumps(value)
        except (ValueError, TypeError) as exc:
            return f"{name} is not storable JSON ({exc})"
    return None


class Repository:
    """One concern's reads and appends over a `Store` handle (the runs, the board, keys, admins, the
    panel…): a read connection, a write transaction, and an advisory lock that serialises writers
    of one name on PostgreSQL (SQLite's BEGIN IMMEDIATE already does), each the handle's own.
    `LOCKS` keeps each concern's lock names apart. Building one costs two attribute reads."""

    LOCKS = "store"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        self._writer = store.writer

    def write(self) -> AbstractContextManager[sa.Connection]:
        """One write transaction (BEGIN IMMEDIATE on SQLite, so refusal checks are race-free),
        begun as `Store.write_connection` begins it (a transient fault on the way is retried)."""
        return self.store.write_connection()

    def read(self) -> AbstractContextManager[sa.Connection]:
        return self.store.read_connection()

    @classmethod
    def lock(cls, conn: sa.Connection, namespace: str, name: str) -> None:
        """Hold, until the transaction ends, the lock on `name` in `namespace` (PostgreSQL only)."""
        Store.lock(conn, cls.LOCKS, namespace, name)

    def _reading(self, body: Callable[[sa.Connection], T]) -> T:
        """`body(conn)` as a read transaction, run again from its start on a transient fault."""
        return self.store.transaction(body, write=False)

    def _first(self, query: sa.Executable) -> sa.Row[Any] | None:
        return self._reading(lambda conn: conn.execute(query).first())

    def _all(self, query: sa.Executable) -> list[sa.Row[Any]]:
        return self._reading(lambda conn: list(conn.execute(query).all()))
