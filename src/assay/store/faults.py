"""Store faults: which database errors pass, how long they are waited out, and how one reads.

A database restart, a connection the server killed (`pg_terminate_backend`, a fast shutdown) or a
SQLite file another process holds locked are *transient*: the store's transaction helper
(`Store.transaction`, and the connection every read and write starts from) tries again with
backoff, re-running a whole transaction from its start — never the rest of a half-applied one,
which the database rolled back — for up to `Retry.seconds` after the first failure (default
`DEFAULT_SECONDS`; `ASSAY_STORE_RETRY` or a command's `--store-retry`). Pooled connections are
pinged before use (`pool_pre_ping`), so a connection the restart killed is replaced, not used.

Anything else (a full disk, a read-only file) is not waited on. Either way what reaches the user
is a `StoreUnavailable`: one line saying what failed, and, when a batch was being played, its id
and `assay resume ID` (the front ends: `cli.errors.store_line`, the web app's 503).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import sqlalchemy as sa

from assay.errors import BadInput

T = TypeVar("T")

#: How long transient store errors are retried by default, in seconds.
DEFAULT_SECONDS = 30.0
#: The environment variable (and what `--store-retry` sets) that changes it.
ENV_RETRY = "ASSAY_STORE_RETRY"
#: The first pause between tries, doubled each time up to `MAX_PAUSE`.
FIRST_PAUSE = 0.05
MAX_PAUSE = 2.0

#: What SQLite says when another connection holds the lock past the busy timeout.
_SQLITE_BUSY = ("database is locked", "database is busy", "database table is locked")


class StoreUnavailable(Exception):
    """The store failed: `cause` is one line (never SQL or parameters); `batch_id` (with `noun`,
    batch or submission) the batch being played when it did, if any; `waited` the seconds the
    failure was retried for (0 when it was not transient)."""

    def __init__(self, cause: str, *, waited: float = 0.0, batch_id: str | None = None,
                 noun: str = "batch") -> None:
        super().__init__(cause)
        self.cause, self.waited, self.batch_id, self.noun = cause, waited, batch_id, noun

    def about(self, batch_id: str, noun: str) -> StoreUnavailable:
        """The same fault, told as having stopped `batch_id` (a batch or a submission)."""
        return StoreUnavailable(self.cause, waited=self.waited, batch_id=batch_id, noun=noun)

    def line(self) -> str:
        """The one line a person reads."""
        text = f"the store failed: {self.cause}"
        if self.waited:
            text += f" (retried for {self.waited:.0f} s; --store-retry or {ENV_RETRY} sets how long)"
        if self.batch_id is not None:
            text += (f"; the runs of {self.noun} {self.batch_id} that ended are stored, the rest is pending — "
                     f"`assay resume {self.batch_id}` finishes it")
        return text

    def __str__(self) -> str:
        return self.line()


def _orig(exc: BaseException) -> BaseException:
    return getattr(exc, "orig", None) or exc


def is_fault(exc: BaseException) -> bool:
    """Whether `exc` is the store failing (unreachable, killed, locked, full, read-only), as
    opposed to a refusal (a constraint, a permission) or a bug."""
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        return True
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg ships with assay
        return isinstance(exc, sqlite3.OperationalError)
    return isinstance(exc, sqlite3.OperationalError | psycopg.OperationalError | psycopg.InterfaceError)


def is_transient(exc: BaseException) -> bool:
    """A fault that passes by itself: the server restarting or unreachable, a connection it
    killed, a SQLite lock held by someone else. A full disk or a read-only file does not."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if not is_fault(exc) or isinstance(exc, StoreUnavailable):
        return False
    inner = _orig(exc)
    if isinstance(inner, sqlite3.Error):
        return isinstance(inner, sqlite3.OperationalError) and any(w in str(inner).lower() for w in _SQLITE_BUSY)
    return True  # PostgreSQL: every OperationalError / InterfaceError is the server or the connection


def describe(exc: BaseException) -> str:
    """The first line of what the driver said, without SQL, parameters or a password."""
    if isinstance(exc, StoreUnavailable):
        return exc.cause
    inner = _orig(exc)
    lines = [s.strip() for s in str(inner).strip().splitlines() if s.strip()]
    text = lines[0] if lines else type(inner).__name__
    return text[:300]


def seconds_from_env() -> float:
    """The retry bound `ASSAY_STORE_RETRY` asks for (a number of seconds ≥ 0), else the default."""
    raw = os.environ.get(ENV_RETRY, "").strip()
    if not raw:
        return DEFAULT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise BadInput(f"{ENV_RETRY} must be a number of seconds of at least 0, not '{raw}'")
    return value


@dataclass
class Retry:
    """How transient store errors are waited out: tried again after a pause that doubles from
    `FIRST_PAUSE` to `MAX_PAUSE`, until `seconds` have passed since the first failure. `clock` and
    `sleep` are injectable, so a test neither waits nor races."""

    seconds: float = DEFAULT_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    #: told of each retried failure (tests count them; a server could log them)
    on_retry: Callable[[BaseException], None] | None = field(default=None, repr=False)

    def call(self, attempt: Callable[[], T]) -> T:
        """`attempt()`, again while it fails transiently and the bound allows; past the bound a
        `StoreUnavailable` (chained to the last failure)."""
        started: float | None = None
        pause = FIRST_PAUSE
        while True:
            try:
                return attempt()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                now = self.clock()
                started = now if started is None else started
                left = started + self.seconds - now
                if left <= 0:
                    raise StoreUnavailable(describe(exc), waited=max(self.seconds, now - started)) from exc
                if self.on_retry is not None:
                    self.on_retry(exc)
                self.sleep(min(pause, left))
                pause = min(pause * 2, MAX_PAUSE)
