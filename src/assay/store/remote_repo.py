"""Reads and appends of remote play: leases (durable-batch claims held by a remote agent), the
steps of a leased run (`remote_steps`) and the lines a model facilitator spoke in it (`remote_lines`).

A step is decided from what the caller last saw of the run (what `state` read, or what the
process kept from its own last step of it) and appended by `append_step` in one short write
transaction of one statement, which carries the check that nothing moved since (the same steps, the
same live lease, still unrecorded) and otherwise appends nothing and raises `Moved`: so two
requests for one run — a retry racing its original, two worker processes — are decided in the
database by the step's key: the step is taken once, and the other, reading again, sees it taken.
What else the step does (recording the run it ended) is done by the caller's `then`, inside the
same transaction, under a lock on its run (PostgreSQL: an advisory transaction lock; SQLite:
BEGIN IMMEDIATE).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa

from assay.jsontypes import JsonObject
from assay.store.board_schema import submissions
from assay.store.claims import LEASE_SECONDS, REMOTE_HOST
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


@dataclass(frozen=True, slots=True)
class RemoteRun:
    """A planned run with what remote play needs of it (`RemoteRepo.run`): its slot, its batch's
    account, agent spec and limits, its scenario's title and document, and the status it was
    recorded with (None while it is not)."""

    batch_id: str
    slot: int
    run_id: str
    case_id: str
    scenario_hash: str
    trial: int
    seed: int
    load_spec: str
    turn_limit: int
    time_limit: float
    account: str
    title: str
    document: JsonObject  # the scenario's stored document: free-form by design
    recorded_status: str | None


@dataclass(frozen=True, slots=True)
class Lease:
    """A run's live lease: the remote holder and when it was leased."""

    holder: str
    leased_at: datetime


@dataclass(frozen=True, slots=True)
class OpenLease:
    """A leased, unrecorded remote run (`RemoteRepo.open_leases`), with its limit and time spent."""

    run_id: str
    batch_id: str
    time_limit: float
    holder: str
    leased_at: datetime
    last_step_at: datetime | None
    spent: float


@dataclass(frozen=True, slots=True)
class StepHead:
    """One stored step of a remote run, without its reply (what a step is decided from)."""

    step: int
    kind: str
    reason: str | None
    digest: str
    elapsed: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredStep(StepHead):
    """One stored step with its reply (`{"message": …}` as the agent sent it, or None): to replay."""

    reply: JsonObject | None


@dataclass(frozen=True, slots=True)
class NewStep:
    """A step to append (`RemoteRepo.append_step`): its number, kind, reply, reason, digest and the
    seconds the agent took."""

    step: int
    kind: str
    reply: JsonObject | None
    reason: str | None
    digest: str
    elapsed: float

    def values(self, run_id: str, created_at: datetime) -> dict[str, object]:
        """Its row in `remote_steps`."""
        return {"run_id": run_id, "step": self.step, "kind": self.kind, "reply": self.reply, "reason": self.reason,
                "digest": self.digest, "elapsed": self.elapsed, "created_at": created_at}


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


@dataclass(frozen=True, slots=True)
class _Statements:
    steps: sa.Select[Any]
    light: sa.Select[Any]
    head: sa.Select[Any]
    lease: sa.Select[Any]
    recorded: sa.Select[Any]
    end: sa.Update


@functools.cache
def _statements() -> _Statements:
    """The statements every step sends, built once (a step is asked hundreds of times a second)."""
    rid: sa.BindParameter[str] = sa.bindparam("run_id")
    c, h, rs = run_claims, claim_holders, remote_steps
    latest = run_claims.alias("latest")
    # the run's latest claim, if it is a live remote agent's: its holder, and when it was leased
    live = (sa.select(c.c.holder, c.c.claimed_at).join(h, h.c.id == c.c.holder)
            .where(c.c.run_id == rid, h.c.host == REMOTE_HOST, h.c.ended_at.is_(None),
                   c.c.attempt == sa.select(sa.func.max(latest.c.attempt)).where(latest.c.run_id == rid)
                   .scalar_subquery()))
    return _Statements(
        steps=sa.select(*_STEP_COLUMNS, rs.c.reply).where(rs.c.run_id == rid).order_by(rs.c.step),
        # what a step is decided from, without the replies (a live run needs none of them)
        light=sa.select(*_STEP_COLUMNS).where(rs.c.run_id == rid).order_by(rs.c.step),
        # in one statement: how many steps, whether recorded, the live lease's holder and its time
        head=sa.select(sa.select(sa.func.count()).select_from(rs).where(rs.c.run_id == rid)
                       .scalar_subquery().label("n"),
                       sa.exists().where(runs.c.run_id == rid).label("recorded"),
                       live.with_only_columns(c.c.holder).scalar_subquery().label("holder"),
                       live.with_only_columns(c.c.claimed_at).scalar_subquery().label("leased_at")),
        lease=(sa.select(c.c.holder, c.c.claimed_at, h.c.host, h.c.ended_at).join(h, h.c.id == c.c.holder)
               .where(c.c.run_id == rid, c.c.attempt == sa.select(sa.func.max(latest.c.attempt))
                      .where(latest.c.run_id == rid).scalar_subquery())),
        recorded=sa.select(runs.c.run_id).where(runs.c.run_id == rid),
        end=(sa.update(h).where(h.c.id == sa.bindparam("holder"), h.c.ended_at.is_(None))
             .values(ended_at=sa.bindparam("ended_at"))),
    )


#: A step's columns in `StepHead`'s order (its reply read only where a run is replayed).
_STEP_COLUMNS = (remote_steps.c.step, remote_steps.c.kind, remote_steps.c.reason, remote_steps.c.digest,
                 remote_steps.c.elapsed, remote_steps.c.created_at)


def _latest_claim(run_id: sa.ColumnElement[Any]) -> sa.ScalarSelect[Any]:
    inner = run_claims.alias("latest")
    return sa.select(sa.func.max(inner.c.attempt)).where(inner.c.run_id == run_id).scalar_subquery()


@functools.cache
def _append_statement(dialect: str, first: bool) -> sa.Insert:
    """The one statement that appends a step (issue 26: no read before it, no lock): the row, if
    the run is unrecorded, its latest claim is the live lease of `holder`, its step `seen` is the
    one seen (by `seen_digest`; `first`: no step before) and the step is not taken yet. Taken
    meanwhile by an uncommitted transaction, PostgreSQL waits for it, and then appends nothing
    (`ON CONFLICT DO NOTHING`); SQLite's writers are one at a time. No row returned: the run moved."""
    rs, c, h = remote_steps, run_claims, claim_holders
    params = {name: sa.bindparam(name, type_=rs.c[name].type) for name in _APPEND_COLUMNS}
    rid, step = params["run_id"], params["step"]
    latest = run_claims.alias("latest")
    live = sa.exists().where(c.c.run_id == rid, c.c.holder == sa.bindparam("holder", type_=c.c.holder.type),
                             h.c.id == c.c.holder, h.c.host == REMOTE_HOST, h.c.ended_at.is_(None),
                             c.c.attempt == sa.select(sa.func.max(latest.c.attempt))
                             .where(latest.c.run_id == rid).scalar_subquery())
    conditions = [~sa.exists().where(runs.c.run_id == rid), live,
                  ~sa.exists().where(rs.c.run_id == rid, rs.c.step == step)]
    if not first:
        conditions.append(sa.exists().where(
            rs.c.run_id == rid, rs.c.step == sa.bindparam("seen", type_=rs.c.step.type),
            rs.c.digest == sa.bindparam("seen_digest", type_=rs.c.digest.type)))
    rows = sa.select(*params.values()).where(*conditions)
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(rs).from_select(list(_APPEND_COLUMNS), rows).on_conflict_do_nothing().returning(rs.c.step)
    return sa.insert(rs).from_select(list(_APPEND_COLUMNS), rows).returning(rs.c.step)


_APPEND_COLUMNS = ("run_id", "step", "kind", "reply", "reason", "digest", "elapsed", "created_at")


@dataclass(frozen=True, slots=True)
class _Reads:
    run: sa.Select[Any]
    open_submissions: sa.Select[Any]
    pending: sa.Select[Any]
    open_leases: sa.Select[Any]
    open_leases_of: sa.Select[Any]


@functools.cache
def _reads() -> _Reads:
    """The reads a lease sends, built once (building them, and their cache keys, was a quarter
    of a lease's CPU: issue 26)."""
    pr, ba, s, sv, bc, c, h, rs = (planned_runs, batch_agents, submissions, scenario_versions, batch_completions,
                                    run_claims, claim_holders, remote_steps)
    account = sa.bindparam("account", type_=s.c.account.type)
    run = (
        sa.select(pr, ba.c.load_spec, ba.c.turn_limit, ba.c.time_limit, s.c.account,
                  sv.c.title, sv.c.document, runs.c.status.label("recorded_status"))
        .select_from(pr.join(batches, batches.c.id == pr.c.batch_id)
                     .join(s, s.c.id == pr.c.batch_id)
                     .join(ba, ba.c.batch_id == pr.c.batch_id)
                     .join(sv, sv.c.content_hash == pr.c.scenario_hash)
                     .outerjoin(runs, runs.c.run_id == pr.c.run_id))
        .where(pr.c.run_id == sa.bindparam("run_id", type_=pr.c.run_id.type))
    )
    open_submissions = (
        sa.select(s.c.id)
        .join(ba, sa.and_(ba.c.batch_id == s.c.id, ba.c.load_spec == REMOTE_SPEC))
        .outerjoin(bc, bc.c.batch_id == s.c.id)
        .where(s.c.account == account, bc.c.batch_id.is_(None))
        .order_by(s.c.created_at, s.c.id)
    )
    held = (sa.select(c.c.run_id).join(h, h.c.id == c.c.holder)
            .where(c.c.run_id == pr.c.run_id, c.c.attempt == _latest_claim(pr.c.run_id), h.c.ended_at.is_(None),
                   sa.or_(h.c.host == REMOTE_HOST, h.c.heartbeat_at >= sa.bindparam("stale", type_=h.c.heartbeat_at.type))))
    pending = (
        sa.select(sa.func.count())
        .select_from(s.join(ba, sa.and_(ba.c.batch_id == s.c.id, ba.c.load_spec == REMOTE_SPEC))
                     .outerjoin(bc, bc.c.batch_id == s.c.id)
                     .join(pr, pr.c.batch_id == s.c.id)
                     .outerjoin(runs, runs.c.run_id == pr.c.run_id))
        .where(s.c.account == account, bc.c.batch_id.is_(None), runs.c.run_id.is_(None), ~sa.exists(held))
    )
    last = sa.select(sa.func.max(rs.c.created_at)).where(rs.c.run_id == pr.c.run_id).scalar_subquery()
    spent = sa.select(sa.func.coalesce(sa.func.sum(rs.c.elapsed), 0.0)).where(rs.c.run_id == pr.c.run_id).scalar_subquery()
    # driven from the live remote holders (0021: a partial index of the holders not ended, and
    # claims by holder), so the query reads what is in play, never every planned run
    open_leases = (
        sa.select(pr.c.run_id, pr.c.batch_id, ba.c.time_limit, c.c.holder, c.c.claimed_at.label("leased_at"),
                  last.label("last_step_at"), spent.label("spent"))
        .select_from(
            h.join(c, c.c.holder == h.c.id)
            .join(pr, pr.c.run_id == c.c.run_id)
            .join(ba, sa.and_(ba.c.batch_id == pr.c.batch_id, ba.c.load_spec == REMOTE_SPEC))
            .join(s, s.c.id == pr.c.batch_id)
            .outerjoin(runs, runs.c.run_id == pr.c.run_id))
        .where(h.c.host == REMOTE_HOST, h.c.ended_at.is_(None), c.c.attempt == _latest_claim(c.c.run_id),
               runs.c.run_id.is_(None))
        .order_by(pr.c.batch_id, pr.c.slot)
    )
    return _Reads(run, open_submissions, pending, open_leases, open_leases.where(s.c.account == account))


_CLAIMS: dict[str, Any] = {}


def _claim_statement(store: Store) -> Any:
    """`ClaimRepo.claim_statement`, built once per dialect."""
    found = _CLAIMS.get(store.dialect)
    if found is None:
        from assay.store.claims import ClaimRepo

        found = _CLAIMS[store.dialect] = ClaimRepo(store).claim_statement()
    return found


class RemoteRepo:
    """Remote play's half of the store, over the same engine."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        self._writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})

    # -- what a run is ------------------------------------------------------------------------

    def run(self, run_id: str) -> RemoteRun | None:
        """A planned run with what remote play needs of it: its batch and account, the batch's
        agent spec and limits, its scenario's title and document, and whether it is recorded."""
        with self.store.read_connection() as conn:
            row = conn.execute(_reads().run, {"run_id": run_id}).first()
        return RemoteRun(**row._mapping) if row is not None else None

    def open_submissions(self, account: str) -> list[str]:
        """The account's remote submissions not yet complete, oldest first."""
        with self.store.read_connection() as conn:
            return [str(i) for i in conn.execute(_reads().open_submissions, {"account": account}).scalars()]

    def pending(self, account: str) -> int:
        """How many runs of the account's open remote submissions wait for an agent: unrecorded, and
        not held by a live lease (their latest claim, if any, is a holder that ended; a holder of
        this machine's batch players counts as live until it ends or its heartbeat is stale). One
        count, where asking `ClaimRepo.n_pending` of each submission read every slot (issue 26)."""
        stale = utcnow() - timedelta(seconds=LEASE_SECONDS)
        with self.store.read_connection() as conn:
            return int(conn.execute(_reads().pending, {"account": account, "stale": stale}).scalar_one())

    # -- leases ---------------------------------------------------------------------------------

    def take_lease(self, run_id: str, attempt: int) -> Lease | None:
        """Lease the run to a remote agent: its holder (no process, no heartbeat, gone once it is
        ended) and its claim at `attempt`, in ONE transaction, so a lease exists whole or not at
        all — a fault between the two leaves the run claimable, never held by a lease nobody was
        told of. Returns the lease (its holder and time), or None when another agent claimed the run at
        that attempt first."""
        statement = _claim_statement(self.store)

        def body(conn: sa.Connection) -> Lease:
            holder_id, now = uuid.uuid4().hex, utcnow()
            conn.execute(sa.insert(claim_holders).values(
                id=holder_id, host=REMOTE_HOST, pid=0, started_at=now, heartbeat_at=now))
            won = conn.execute(statement, [{"run_id": run_id, "attempt": attempt, "holder": holder_id,
                                            "claimed_at": now}]).first()
            if won is None:
                raise _Taken()
            return Lease(holder_id, now)

        try:
            return self.store.transaction(body)
        except _Taken:
            return None  # rolled back: no holder left behind either

    def end_holder(self, holder_id: str) -> None:
        self.store.transaction(lambda conn: self.end_holder_in(conn, holder_id))

    @staticmethod
    def end_holder_in(conn: sa.Connection, holder_id: str) -> None:
        """End the lease of `holder_id` inside the caller's transaction `conn`."""
        conn.execute(_statements().end, {"holder": holder_id, "ended_at": utcnow()})

    @staticmethod
    def _lease(conn: sa.Connection, run_id: str) -> Lease | None:
        """The run's latest claim, if a remote agent holds it now: holder and when it was leased."""
        row = conn.execute(_statements().lease, {"run_id": run_id}).first()
        if row is None or row.host != REMOTE_HOST or row.ended_at is not None:
            return None
        return Lease(row.holder, row.claimed_at)

    def lease(self, run_id: str) -> Lease | None:
        with self.store.read_connection() as conn:
            return self._lease(conn, run_id)

    def open_leases(self, account: str | None = None) -> list[OpenLease]:
        """Runs a remote agent holds and that are not recorded yet (of one account, or all), each
        with its time limit, when it was leased, its last step's time and the time spent so far."""
        reads = _reads()
        query, params = (reads.open_leases, {}) if account is None else (reads.open_leases_of, {"account": account})
        with self.store.read_connection() as conn:
            return [OpenLease(r.run_id, r.batch_id, r.time_limit, r.holder, r.leased_at, r.last_step_at,
                              float(r.spent or 0.0)) for r in conn.execute(query, params)]

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

    def steps(self, run_id: str) -> list[StoredStep]:
        with self.store.read_connection() as conn:
            return self._steps(conn, run_id)

    @staticmethod
    def _steps(conn: sa.Connection, run_id: str) -> list[StoredStep]:
        return [StoredStep(*r) for r in conn.execute(_statements().steps, {"run_id": run_id})]

    def state(self, run_id: str) -> tuple[list[StepHead], Lease | None, bool]:
        """What a step is decided from: the run's steps (in order, as stored, without their
        replies: `steps` reads those, to replay), its lease (None when no remote agent holds it)
        and whether it is recorded. A read, no lock: `append_step` checks that none of it moved
        before it appends."""
        st, params = _statements(), {"run_id": run_id}
        with self.store.read_connection() as conn:
            steps = [StepHead(*r) for r in conn.execute(st.light, params)]
            head = conn.execute(st.head, params).one()
        lease = None if head.holder is None else Lease(head.holder, head.leased_at)
        return steps, lease, bool(head.recorded)

    def append_step(self, run_id: str, seen: int, seen_digest: str | None, holder: str, row: NewStep,
                    created_at: datetime, then: Callable[[sa.Connection], T] | None = None) -> T | None:
        """Append step `row` (stamped `created_at`) to the run in one write transaction, if the run
        is as the caller last saw it: `seen` steps, the last with `seen_digest`, its lease held by
        `holder`, not recorded; else append nothing and raise `Moved`. Without reading first: the
        insert itself carries the conditions (`_append_statement`), and the step's key (run, step)
        decides a race — two requests appending the same step, in two threads or two processes,
        append it once (PostgreSQL: the later waits for the earlier's commit and appends nothing).
        `then(conn)` runs in the same transaction after the step is appended (recording the run
        the step ended, under the run's lock) and its value is returned. On a transient fault the
        whole transaction runs again, `then` with it. On SQLite, steps that arrive together are
        committed together (`Store.batched`)."""
        values = {**row.values(run_id, created_at), "holder": holder, "seen": seen, "seen_digest": seen_digest or ""}

        def body(conn: sa.Connection) -> T | None:
            if then is not None:
                lock_run(conn, run_id)
            if conn.execute(_append_statement(conn.dialect.name, seen == 0), values).first() is None:
                raise Moved()
            return then(conn) if then is not None else None

        return self.store.batched(body)  # SQLite: committed with the steps that arrive with it

    def record(self, run_id: str, then: Callable[[sa.Connection], T]) -> T | None:
        """`then(conn)` (recording the run) in one write transaction under the run's lock, unless
        the run is recorded already (then None)."""
        def body(conn: sa.Connection) -> T | None:
            lock_run(conn, run_id)
            if conn.execute(_statements().recorded, {"run_id": run_id}).first() is not None:
                return None
            return then(conn)

        return self.store.transaction(body)
