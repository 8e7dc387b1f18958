"""The store's connection handle: one database, its engine, and how every transaction is begun.

`Store` holds the engine and nothing else of a concern: a read connection, a write transaction
(BEGIN IMMEDIATE on SQLite, queued on one lock per process), a whole transaction retried on a
transient fault (`store/faults.py`), group commit of the SQLite writes that wait together
(`batched`), and the one advisory-lock helper (`Store.lock`). The reads and appends live in
repositories over it (`store/repo.py`'s `Repository`: `RunsRepo`, `BoardRepo`, `PanelRepo`…),
each built on a handle as `XRepo(store)`, which costs two attribute reads.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import sqlalchemy as sa

from assay.store.faults import Retry, is_fault, seconds_from_env

T = TypeVar("T")

_WRITERS: weakref.WeakKeyDictionary[sa.Engine, threading.RLock] = weakref.WeakKeyDictionary()
_WRITERS_GUARD = threading.Lock()


#: Write transactions `Store.batched` commits together at most (SQLite).
GROUP_MAX = 64
#: `ASSAY_SQLITE_GROUP_COMMIT=0` turns group commit off (each batched write commits alone).
GROUP_COMMIT_ENV = "ASSAY_SQLITE_GROUP_COMMIT"


class _Job:
    """One batched write transaction's body, and what became of it."""

    __slots__ = ("body", "state", "value")

    def __init__(self, body: Callable[[sa.Connection], Any]) -> None:
        self.body = body
        self.state = "queued"  # then "done" (value is its result), "failed" (value is raised), "alone"
        self.value: Any = None


class _Group:
    """The batched writes of one SQLite engine waiting for a commit, and whether one of their
    threads is committing a group now (the leader)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queue: list[_Job] = []
        self.leading = False


_GROUPS: weakref.WeakKeyDictionary[sa.Engine, _Group] = weakref.WeakKeyDictionary()


def _group(engine: sa.Engine) -> _Group | None:
    if engine.dialect.name != "sqlite" or os.environ.get(GROUP_COMMIT_ENV, "1") == "0":
        return None
    with _WRITERS_GUARD:
        group = _GROUPS.get(engine)
        if group is None:
            group = _GROUPS[engine] = _Group()
        return group


def _writer_lock(engine: sa.Engine) -> threading.RLock | None:
    """The one lock every write transaction of this process on a SQLite `engine` holds (None on
    PostgreSQL). SQLite lets one writer in at a time and makes the others poll for the lock,
    sleeping up to 100 ms between tries: threads of one process queue here instead and go in the
    moment it is free, in turn. Re-entrant, so a nested write behaves as it would without it."""
    if engine.dialect.name != "sqlite":
        return None
    with _WRITERS_GUARD:
        lock = _WRITERS.get(engine)
        if lock is None:
            lock = _WRITERS[engine] = threading.RLock()
        return lock



def _lock_key(names: tuple[str, ...]) -> int:
    digest = hashlib.sha256(("assay:" + ":".join(names)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Store:
    """The handle on one database: its engine and its transactions, no reads or appends of its own
    (those are the repositories', `RunsRepo(store)`, `BoardRepo(store)`…).

    Use as a context manager, or call `close()`, to release pooled connections.
    """

    #: Execution option that makes SQLite begin with BEGIN IMMEDIATE (see `db.create_store_engine`).
    WRITE_OPTION = "assay_write"

    def __init__(self, engine: sa.Engine, display_url: str | None = None, retry: Retry | None = None) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{self.WRITE_OPTION: True})
        self.url = display_url or engine.url.render_as_string(hide_password=True)
        #: how transient faults are waited out (`store/faults.py`); tests inject clock and sleep
        self.retry = retry if retry is not None else Retry(seconds_from_env())

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def engine(self) -> sa.Engine:
        """The underlying engine, for views and tests that need raw SQL."""
        return self._engine

    @property
    def writer(self) -> sa.Engine:
        """The engine whose transactions begin as writes (BEGIN IMMEDIATE on SQLite)."""
        return self._writer

    @property
    def dialect(self) -> str:
        return str(self._engine.dialect.name)

    def close(self) -> None:
        self._engine.dispose()

    def with_retry(self, retry: Retry) -> Store:
        """The same store (its engine, its pool) with faults waited out as `retry` says."""
        return Store(self._engine, self.url, retry)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    # -- transactions: the one place a transient fault is retried (`store/faults.py`) ----------

    def transaction(self, body: Callable[[sa.Connection], T], *, write: bool = True) -> T:
        """`body(conn)` in one transaction, committed when it returns. A transient fault (a
        restart, a killed connection, a locked SQLite) rolls it back and runs `body` again from
        the start on a fresh connection, within `self.retry`'s bound: `body` must be a whole
        transaction that decides everything from what it reads (no effect outside the database)."""
        engine = self._writer if write else self._engine
        lock = _writer_lock(self._engine) if write else None

        def attempt() -> T:
            if lock is None:
                with engine.begin() as conn:
                    return body(conn)
            with lock, engine.begin() as conn:
                return body(conn)

        return self.retry.call(attempt)

    def batched(self, body: Callable[[sa.Connection], T]) -> T:
        """`transaction(body)`, committed together with other threads' batched transactions that
        wait at the same moment (SQLite's group commit: one commit, and one wait for the disk,
        for all of them). Each body runs in a savepoint of the group's transaction, so a body that
        raises (a refusal) undoes only its own writes and is raised in its own thread; its result
        is handed back only once the group committed. A fault of the group (past the store's
        retries) or an interrupt sends each body back to its own thread to run alone, as
        `transaction` would. PostgreSQL (whose commits run side by side) and
        `ASSAY_SQLITE_GROUP_COMMIT=0`: `transaction` itself."""
        group = _group(self._engine)
        if group is None:
            return self.transaction(body)
        job = _Job(body)
        with group.cond:
            group.queue.append(job)
            while job.state == "queued" and group.leading:
                group.cond.wait()
            if job.state == "queued":  # nobody commits now: this thread commits the waiting group
                group.leading = True
                others = [j for j in group.queue if j is not job]
                jobs, group.queue = [job, *others[:GROUP_MAX - 1]], others[GROUP_MAX - 1:]
            else:
                jobs = []
        if jobs:
            try:
                self._commit_group(jobs)
            finally:
                with group.cond:
                    for other in jobs:
                        if other.state == "queued":
                            other.state = "alone"  # interrupted: each runs its own
                    group.leading = False
                    group.cond.notify_all()
        if job.state == "done":
            return job.value
        if job.state == "failed":
            raise job.value
        return self.transaction(body)  # alone

    def _commit_group(self, jobs: list[_Job]) -> None:
        if len(jobs) == 1:
            job = jobs[0]
            try:
                job.value, job.state = self.transaction(job.body), "done"
            except Exception as exc:  # noqa: BLE001 - raised in its own thread
                job.value, job.state = exc, "failed"
            return

        def whole(conn: sa.Connection) -> list[tuple[bool, Any]]:
            out: list[tuple[bool, Any]] = []
            for job in jobs:
                try:
                    with conn.begin_nested():
                        out.append((True, job.body(conn)))
                except Exception as exc:  # noqa: BLE001 - a refusal is its body's own
                    if is_fault(exc):
                        raise  # the group's: rolled back and run again, whole
                    out.append((False, exc))
            return out

        try:
            results = self.transaction(whole)
        except Exception:  # noqa: BLE001 - past the retries: each body alone, in its own thread
            for job in jobs:
                job.state = "alone"
            return
        for job, (ok, value) in zip(jobs, results, strict=True):
            job.value, job.state = value, ("done" if ok else "failed")

    def _begun(self, write: bool) -> tuple[sa.Connection, sa.Transaction]:
        conn = (self._writer if write else self._engine).connect()  # pinged first (pool_pre_ping)
        try:
            return conn, conn.begin()  # SQLite: BEGIN IMMEDIATE for a write, which may find it locked
        except BaseException:
            conn.close()
            raise

    @contextmanager
    def write_connection(self) -> Iterator[sa.Connection]:
        """A write transaction as a block: getting the connection and beginning are retried like
        `transaction`; a fault inside the block is not (a block cannot be run again): use
        `transaction` where a whole transaction should survive a restart."""
        lock = _writer_lock(self._engine)
        if lock is None:
            conn, txn = self.retry.call(lambda: self._begun(True))
            with conn, txn:
                yield conn
            return
        with lock:
            conn, txn = self.retry.call(lambda: self._begun(True))
            with conn, txn:
                yield conn

    @contextmanager
    def read_connection(self) -> Iterator[sa.Connection]:
        """A connection to read with; getting it is retried like `transaction`."""
        conn = self.retry.call(self._engine.connect)
        with conn:
            yield conn


    @staticmethod
    def lock(conn: sa.Connection, *names: str) -> None:
        """Hold, until `conn`'s transaction ends, the advisory lock named by `names` (PostgreSQL
        only: SQLite's BEGIN IMMEDIATE already serialises writers). The one lock helper: every
        repository's `lock` is this one, its names prefixed with the repository's `LOCKS`."""
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_lock_key(names))))
