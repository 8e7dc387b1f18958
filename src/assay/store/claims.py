"""Claims on planned slots: how several processes share one batch and a dead one's work is found.

A process that plays a batch registers as a *holder* and keeps a heartbeat. Before it plays a
slot it *claims* it: a `run_claims` row `(run_id, attempt)` whose key the database keeps unique,
inserted with ON CONFLICT DO NOTHING, so of two processes racing for a slot exactly one gets it.
A slot is *pending* when no run is recorded for it and its latest claim (if any) belongs to a
holder that is gone:

- it said so (`ended_at`: it stopped cleanly, interrupted or not), or
- its heartbeat is older than `LEASE_SECONDS` (a process on another machine that died), or
- it ran on this machine and its process no longer exists (a SIGKILL seen at once, without
  waiting out the lease).

A remote agent's lease (remote play, `service.remote`) is a claim too, by a holder whose host is
`REMOTE_HOST`: it has no process here and keeps no heartbeat (it answers when it likes, within its
run's time limit), so it is gone only when it says so (`ended_at`, once its run is recorded). A
remote run left idle is not taken back: it ends as a `timeout`, which records it.

Claiming such a slot again takes the next attempt number; the claim rows stay (append-only), so
the history of who tried a slot is kept. A run is recorded at most once whatever happens, because
`runs.run_id` is its primary key: a process that played a slot it had lost (a heartbeat so late it
was taken for dead) finds its record refused and drops it.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.dml import ReturningInsert

from assay.store.faults import is_fault
from assay.store.repo import Store
from assay.store.schema import claim_holders, planned_runs, run_claims, runs, utcnow

#: A holder whose heartbeat is older than this is gone (its claims may be taken again).
LEASE_SECONDS = 30.0
#: How often a holder says it is alive.
HEARTBEAT_SECONDS = 5.0
#: The host of a remote agent's lease holder (no machine's hostname has parentheses or spaces).
REMOTE_HOST = "(remote agent)"


def _process_gone(pid: int) -> bool:
    """True when no process `pid` runs on this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Holder:
    """This process as a claimer of slots, with a heartbeat thread while it is open."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.id = uuid.uuid4().hex
        self._writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})
        now = utcnow()
        store.transaction(lambda conn: conn.execute(sa.insert(claim_holders).values(
            id=self.id, host=socket.gethostname(), pid=os.getpid(), started_at=now, heartbeat_at=now)))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="assay-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                with self._writer.begin() as conn:
                    conn.execute(sa.update(claim_holders).where(claim_holders.c.id == self.id)
                                 .values(heartbeat_at=utcnow()))
            except Exception:  # noqa: BLE001, S112 - a missed beat is retried; a dead store shows elsewhere
                continue

    def end(self) -> None:
        """Stop the heartbeat and say this holder is gone: its unrecorded claims become pending."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        try:
            self.store.transaction(lambda conn: conn.execute(
                sa.update(claim_holders).where(claim_holders.c.id == self.id).values(ended_at=utcnow())))
        except Exception as exc:
            if not is_fault(exc):
                raise
            # the store is down: this holder is seen gone anyway once its process ends (same
            # machine) or its heartbeat is older than LEASE_SECONDS, and a fault already in
            # flight must not be replaced by this one

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


class ClaimRepo:
    """Reads and writes of claims, over the store's engine."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        self._writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})

    def _gone(self, conn: sa.Connection, holder_ids: set[str]) -> set[str]:
        if not holder_ids:
            return set()
        here = socket.gethostname()
        stale = utcnow() - timedelta(seconds=LEASE_SECONDS)
        gone: set[str] = set()
        for row in conn.execute(sa.select(claim_holders).where(claim_holders.c.id.in_(sorted(holder_ids)))):
            if row.host == REMOTE_HOST:
                if row.ended_at is not None:
                    gone.add(row.id)
                continue
            if (row.ended_at is not None or row.heartbeat_at < stale
                    or (row.host == here and _process_gone(row.pid))):
                gone.add(row.id)
        return gone

    def _candidates(self, conn: sa.Connection, batch_id: str, after_slot: int, limit: int) -> list[sa.Row[Any]]:
        """Unrecorded slots after `after_slot`, in slot order, with their latest claim."""
        pr, c = planned_runs, run_claims
        latest = sa.select(sa.func.max(c.c.attempt)).where(c.c.run_id == pr.c.run_id).scalar_subquery()
        holder = (sa.select(c.c.holder).where(c.c.run_id == pr.c.run_id)
                  .order_by(c.c.attempt.desc()).limit(1).scalar_subquery())
        query = (
            sa.select(pr.c.run_id, pr.c.slot, latest.label("attempt"), holder.label("holder"))
            .select_from(pr.outerjoin(runs, runs.c.run_id == pr.c.run_id))
            .where(pr.c.batch_id == batch_id, runs.c.run_id.is_(None), pr.c.slot > after_slot)
            .order_by(pr.c.slot).limit(limit)
        )
        return list(conn.execute(query))

    def claim(self, batch_id: str, holder_id: str, n: int, after_slot: int = -1) -> tuple[list[str], int]:
        """Claim up to `n` pending slots after `after_slot`: (the run ids won, the last slot looked
        at, or -1 past the end). Slots others hold, or won by another process in the same instant,
        are passed over."""
        won: list[str] = []
        cursor = after_slot
        while len(won) < n:
            free, cursor = self.free(batch_id, n - len(won), cursor)
            if free:
                won += self._insert(holder_id, free)
            if cursor == -1:
                return won, -1
        return won, cursor

    def free(self, batch_id: str, n: int, after_slot: int = -1) -> tuple[list[tuple[str, int]], int]:
        """Up to `n` pending slots after `after_slot`, as (run id, the attempt a claim of it takes),
        and the last slot looked at (-1 past the end), claiming none of them."""
        def body(conn: sa.Connection) -> tuple[list[sa.Row[Any]], set[str]]:
            rows = self._candidates(conn, batch_id, after_slot, n + max(n // 4, 16))  # a little slack for slots others hold
            return rows, self._gone(conn, {r.holder for r in rows if r.holder is not None})

        rows, gone = self.store.transaction(body, write=False)
        if not rows:
            return [], -1
        free = [r for r in rows if r.holder is None or r.holder in gone][:n]
        cursor = free[-1].slot if len(free) == n else rows[-1].slot
        return [(r.run_id, (r.attempt or 0) + 1) for r in free], cursor

    def claim_statement(self) -> ReturningInsert[tuple[str]]:
        """INSERT … ON CONFLICT DO NOTHING RETURNING run_id: a claim row each, none for a slot
        another process claimed at that attempt first."""
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as postgresql_insert

            pg = postgresql_insert(run_claims)
            return pg.on_conflict_do_nothing(index_elements=["run_id", "attempt"]).returning(run_claims.c.run_id)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        lite = sqlite_insert(run_claims)
        return lite.on_conflict_do_nothing(index_elements=["run_id", "attempt"]).returning(run_claims.c.run_id)

    def _insert(self, holder_id: str, attempts: Sequence[tuple[str, int]]) -> list[str]:
        now = utcnow()
        query = self.claim_statement()
        rows = [{"run_id": r, "attempt": a, "holder": holder_id, "claimed_at": now} for r, a in attempts]
        got = self.store.transaction(lambda conn: conn.execute(query, rows).scalars().all())
        return [str(g) for g in got]

    def n_pending(self, batch_id: str) -> int:
        """Unrecorded slots nobody alive holds (what a resume would play now)."""
        def body(conn: sa.Connection) -> int:
            n, cursor = 0, -1
            while True:
                rows = self._candidates(conn, batch_id, cursor, 1000)
                if not rows:
                    return n
                gone = self._gone(conn, {r.holder for r in rows if r.holder is not None})
                n += sum(1 for r in rows if r.holder is None or r.holder in gone)
                cursor = rows[-1].slot

        return self.store.transaction(body, write=False)
