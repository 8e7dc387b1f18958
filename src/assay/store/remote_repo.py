"""Reads and appends of remote play: leases (durable-batch claims held by a remote agent), the
steps of a leased run (`remote_steps`) and the lines a model facilitator spoke in it (`remote_lines`).

A step is decided from what `state` read (the run's steps, its lease, whether it is recorded) and
appended by `append_step` in one short write transaction, under a lock on its run (PostgreSQL: an
advisory transaction lock; SQLite: BEGIN IMMEDIATE), which first checks that nothing moved since
that read (the same number of steps, the same live lease, still unrecorded) and otherwise appends
nothing and raises `Moved`: so two requests for one run — a retry racing its original, two worker
processes — are decided in the database, one after the other: the step is taken once, and the
other, reading again, sees it taken. What else the step does (recording the run it ended) is done
by the caller's `then`, inside the same transaction.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

from assay.store.board_schema import submissions
from assay.store.claims import REMOTE_HOST
from assay.store.remote_schema import remote_lines, remote_steps
from assay.store.repo import Store
from assay.store.schema import (
    batch_agents,
    batch_completions,
    batches,
    claim_holders,
    planned_runs,
    run_claims,
    runs,
    scenario_versions,
    utcnow,
)

#: The `batch_agents.load_spec` of a submission played by a remote agent.
REMOTE_SPEC = "remote"

T = TypeVar("T")


def _lock_key(run_id: str) -> int:
    digest = hashlib.sha256(f"assay:remote:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _Taken(Exception):
    """The run was claimed at that attempt by someone else first: the lease is rolled back."""


class Moved(Exception):
    """The run moved on since its state was read (a step taken, its lease ended or changed, the run
    recorded): nothing was appended; read its state again and decide anew."""


def lock_run(conn: sa.Connection, run_id: str) -> None:
    """Hold the run's lock until `conn`'s transaction ends (PostgreSQL; SQLite's BEGIN IMMEDIATE
    already holds every writer apart)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK, {"key": _lock_key(run_id)})


def lock_batch(conn: sa.Connection, batch_id: str) -> None:
    """Hold the batch's lock until `conn`'s transaction ends (PostgreSQL): the transactions that
    record a batch's remote runs take it in turn, so each counts the others' runs once committed."""
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK, {"key": _lock_key(f"batch:{batch_id}")})


_LOCK = sa.select(sa.func.pg_advisory_xact_lock(sa.bindparam("key", type_=sa.BigInteger)))


@functools.cache
def _statements() -> dict[str, Any]:
    """The statements every step sends, built once (a step is asked hundreds of times a second)."""
    rid: sa.BindParameter[str] = sa.bindparam("run_id")
    c, h, rs = run_claims, claim_holders, remote_steps
    latest = run_claims.alias("latest")
    # the run's latest claim, if it is a live remote agent's: its holder, and when it was leased
    live = (sa.select(c.c.holder, c.c.claimed_at).join(h, h.c.id == c.c.holder)
            .where(c.c.run_id == rid, h.c.host == REMOTE_HOST, h.c.ended_at.is_(None),
                   c.c.attempt == sa.select(sa.func.max(latest.c.attempt)).where(latest.c.run_id == rid)
                   .scalar_subquery()))
    return {
        "steps": sa.select(rs).where(rs.c.run_id == rid).order_by(rs.c.step),
        # what a step is decided from, without the replies (a live run needs none of them)
        "light": sa.select(*(col for col in rs.c if col.name != "reply")).where(rs.c.run_id == rid)
                 .order_by(rs.c.step),
        # in one statement: how many steps, whether recorded, the live lease's holder and its time
        "head": sa.select(sa.select(sa.func.count()).select_from(rs).where(rs.c.run_id == rid)
                          .scalar_subquery().label("n"),
                          sa.exists().where(runs.c.run_id == rid).label("recorded"),
                          live.with_only_columns(c.c.holder).scalar_subquery().label("holder"),
                          live.with_only_columns(c.c.claimed_at).scalar_subquery().label("leased_at")),
        "lease": (sa.select(c.c.holder, c.c.claimed_at, h.c.host, h.c.ended_at).join(h, h.c.id == c.c.holder)
                  .where(c.c.run_id == rid, c.c.attempt == sa.select(sa.func.max(latest.c.attempt))
                         .where(latest.c.run_id == rid).scalar_subquery())),
        "recorded": sa.select(runs.c.run_id).where(runs.c.run_id == rid),
        "insert": sa.insert(rs),
        "end": (sa.update(h).where(h.c.id == sa.bindparam("holder"), h.c.ended_at.is_(None))
                .values(ended_at=sa.bindparam("ended_at"))),
    }


def _latest_claim(run_id: sa.ColumnElement[Any]) -> sa.ScalarSelect[Any]:
    inner = run_claims.alias("latest")
    return sa.select(sa.func.max(inner.c.attempt)).where(inner.c.run_id == run_id).scalar_subquery()


class RemoteRepo:
    """Remote play's half of the store, over the same engine."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        self._writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})

    # -- what a run is ------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any] | None:
        """A planned run with what remote play needs of it: its batch and account, the batch's
        agent spec and limits, its scenario's title and document, and whether it is recorded."""
        pr, ba, s, sv = planned_runs, batch_agents, submissions, scenario_versions
        query = (
            sa.select(pr, ba.c.load_spec, ba.c.turn_limit, ba.c.time_limit, s.c.account,
                      sv.c.title, sv.c.document, runs.c.status.label("recorded_status"))
            .select_from(pr.join(batches, batches.c.id == pr.c.batch_id)
                         .join(s, s.c.id == pr.c.batch_id)
                         .join(ba, ba.c.batch_id == pr.c.batch_id)
                         .join(sv, sv.c.content_hash == pr.c.scenario_hash)
                         .outerjoin(runs, runs.c.run_id == pr.c.run_id))
            .where(pr.c.run_id == run_id)
        )
        with self.store.read_connection() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row is not None else None

    def open_submissions(self, account: str) -> list[str]:
        """The account's remote submissions not yet complete, oldest first."""
        s, ba, bc = submissions, batch_agents, batch_completions
        query = (
            sa.select(s.c.id)
            .join(ba, sa.and_(ba.c.batch_id == s.c.id, ba.c.load_spec == REMOTE_SPEC))
            .outerjoin(bc, bc.c.batch_id == s.c.id)
            .where(s.c.account == account, bc.c.batch_id.is_(None))
            .order_by(s.c.created_at, s.c.id)
        )
        with self.store.read_connection() as conn:
            return [str(i) for i in conn.execute(query).scalars()]

    # -- leases ---------------------------------------------------------------------------------

    def take_lease(self, run_id: str, attempt: int) -> str | None:
        """Lease the run to a remote agent: its holder (no process, no heartbeat, gone once it is
        ended) and its claim at `attempt`, in ONE transaction, so a lease exists whole or not at
        all — a fault between the two leaves the run claimable, never held by a lease nobody was
        told of. Returns the holder id, or None when another agent claimed the run at that attempt first."""
        from assay.store.claims import ClaimRepo

        statement = ClaimRepo(self.store).claim_statement()

        def body(conn: sa.Connection) -> str | None:
            holder_id, now = uuid.uuid4().hex, utcnow()
            conn.execute(sa.insert(claim_holders).values(
                id=holder_id, host=REMOTE_HOST, pid=0, started_at=now, heartbeat_at=now))
            won = conn.execute(statement, [{"run_id": run_id, "attempt": attempt, "holder": holder_id,
                                            "claimed_at": now}]).first()
            if won is None:
                raise _Taken()
            return holder_id

        try:
            return self.store.transaction(body)
        except _Taken:
            return None  # rolled back: no holder left behind either

    def end_holder(self, holder_id: str) -> None:
        self.store.transaction(lambda conn: self.end_holder_in(conn, holder_id))

    @staticmethod
    def end_holder_in(conn: sa.Connection, holder_id: str) -> None:
        """End the lease of `holder_id` inside the caller's transaction `conn`."""
        conn.execute(_statements()["end"], {"holder": holder_id, "ended_at": utcnow()})

    @staticmethod
    def _lease(conn: sa.Connection, run_id: str) -> dict[str, Any] | None:
        """The run's latest claim, if a remote agent holds it now: holder and when it was leased."""
        row = conn.execute(_statements()["lease"], {"run_id": run_id}).first()
        if row is None or row.host != REMOTE_HOST or row.ended_at is not None:
            return None
        return {"holder": row.holder, "leased_at": row.claimed_at}

    def lease(self, run_id: str) -> dict[str, Any] | None:
        with self.store.read_connection() as conn:
            return self._lease(conn, run_id)

    def open_leases(self, account: str | None = None) -> list[dict[str, Any]]:
        """Runs a remote agent holds and that are not recorded yet (of one account, or all), each
        with its time limit, when it was leased, its last step's time and the time spent so far."""
        pr, ba, c, h, rs = planned_runs, batch_agents, run_claims, claim_holders, remote_steps
        last = sa.select(sa.func.max(rs.c.created_at)).where(rs.c.run_id == pr.c.run_id).scalar_subquery()
        spent = sa.select(sa.func.coalesce(sa.func.sum(rs.c.elapsed), 0.0)).where(
            rs.c.run_id == pr.c.run_id).scalar_subquery()
        # driven from the live remote holders (0021: a partial index of the holders not ended, and
        # claims by holder), so the query reads what is in play, never every planned run
        query = (
            sa.select(pr.c.run_id, pr.c.batch_id, ba.c.time_limit, c.c.holder, c.c.claimed_at.label("leased_at"),
                      last.label("last_step_at"), spent.label("spent"))
            .select_from(
                h.join(c, c.c.holder == h.c.id)
                .join(pr, pr.c.run_id == c.c.run_id)
                .join(ba, sa.and_(ba.c.batch_id == pr.c.batch_id, ba.c.load_spec == REMOTE_SPEC))
                .join(submissions, submissions.c.id == pr.c.batch_id)
                .outerjoin(runs, runs.c.run_id == pr.c.run_id))
            .where(h.c.host == REMOTE_HOST, h.c.ended_at.is_(None), c.c.attempt == _latest_claim(c.c.run_id),
                   runs.c.run_id.is_(None))
            .order_by(pr.c.batch_id, pr.c.slot)
        )
        if account is not None:
            query = query.where(submissions.c.account == account)
        with self.store.read_connection() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        for r in rows:
            r["spent"] = float(r["spent"] or 0.0)
        return rows

    # -- facilitator lines ----------------------------------------------------------------------

    def lines(self, run_id: str) -> list[str]:
        """The facilitator lines kept for the run, in the order they were spoken."""
        with self.store.read_connection() as conn:
            rows = conn.execute(sa.select(remote_lines.c.content).where(remote_lines.c.run_id == run_id)
                                .order_by(remote_lines.c.seq)).scalars().all()
        return [str(r) for r in rows]

    def keep_line(self, run_id: str, seq: int, facilitator: str, content: str) -> str:
        """Keep `content` as the run's line `seq` unless one is kept already; return the kept line
        (the first one stored is the line, whoever stored it: a racing insert meets the key)."""
        try:
            self.store.transaction(lambda conn: conn.execute(sa.insert(remote_lines).values(
                run_id=run_id, seq=seq, facilitator=facilitator, content=content, created_at=utcnow())))
            return content
        except sa.exc.IntegrityError:
            with self.store.read_connection() as conn:
                kept = conn.execute(sa.select(remote_lines.c.content).where(remote_lines.c.run_id == run_id,
                                                                            remote_lines.c.seq == seq)).scalar()
            if kept is None:
                raise
            return str(kept)

    # -- steps ----------------------------------------------------------------------------------

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        with self.store.read_connection() as conn:
            return self._steps(conn, run_id)

    @staticmethod
    def _steps(conn: sa.Connection, run_id: str) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in conn.execute(_statements()["steps"], {"run_id": run_id})]

    def state(self, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None, bool]:
        """What a step is decided from: the run's steps (in order, as stored, without their
        replies: `steps` reads those, to replay), its lease (None when no remote agent holds it)
        and whether it is recorded. A read, no lock: `append_step` checks that none of it moved
        before it appends."""
        st, params = _statements(), {"run_id": run_id}
        with self.store.read_connection() as conn:
            steps = [dict(r._mapping) for r in conn.execute(st["light"], params)]
            head = conn.execute(st["head"], params).one()
        lease = None if head.holder is None else {"holder": head.holder, "leased_at": head.leased_at}
        return steps, lease, bool(head.recorded)

    def append_step(self, run_id: str, seen: int, holder: str | None, row: dict[str, Any],
                    then: Callable[[sa.Connection], T] | None = None) -> T | None:
        """Append step `row` (without `run_id`, `created_at`) to the run in one write transaction,
        if the run is as `state` saw it: `seen` steps, its lease held by `holder` (None: no check of
        the lease), not recorded; else append nothing and raise `Moved`. `then(conn)` runs in the
        same transaction after the step is appended (recording the run the step ended) and its
        value is returned. On a transient fault the whole transaction runs again, `then` with it.
        On SQLite, steps that arrive together are committed together (`Store.batched`)."""
        st = _statements()

        def body(conn: sa.Connection) -> T | None:
            lock_run(conn, run_id)
            head = conn.execute(st["head"], {"run_id": run_id}).one()
            if head.n != seen or head.recorded or (holder is not None and head.holder != holder):
                raise Moved()
            conn.execute(st["insert"], [{**row, "run_id": run_id, "created_at": utcnow()}])
            return then(conn) if then is not None else None

        return self.store.batched(body)  # SQLite: committed with the steps that arrive with it

    def record(self, run_id: str, then: Callable[[sa.Connection], T]) -> T | None:
        """`then(conn)` (recording the run) in one write transaction under the run's lock, unless
        the run is recorded already (then None)."""
        def body(conn: sa.Connection) -> T | None:
            lock_run(conn, run_id)
            if conn.execute(_statements()["recorded"], {"run_id": run_id}).first() is not None:
                return None
            return then(conn)

        return self.store.transaction(body)
