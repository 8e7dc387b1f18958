"""The core repository: scenario versions, batches and their plans, runs, completions.

    runs = RunsRepo(store)
    runs.add_batch(batch, planned, agent)   # the plan first: it is the denominator
    runs.add_runs(items)                    # each run, its check outcomes and its verdict
    runs.runs_for_batch(batch_id)           # every planned slot, with its run if recorded

Reads hand back the typed read models of `store.rows` (`Batch`, `PlannedSlot`, `StoredRun`,
`ScenarioVersion`, `BatchSummary`). The run writer's path (`add_runs`, `insert_runs`) does one
executemany per table and nothing per run beyond building its rows.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import asdict, fields
from datetime import datetime
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict, Invalid
from assay.jsontypes import JsonObject
from assay.records import CheckOutcome, PlannedRun, RunRecord, RunVerdict
from assay.stats.commitment import new_salt
from assay.store.board_schema import release_scenarios
from assay.store.digest_schema import seed_salts
from assay.store.handle import Store
from assay.store.jsonvalue import Encoded
from assay.store.repo import Repository, _chunks, _first_unstorable, _json_fault, _refused, owned_by, resolve_prefix
from assay.store.rows import (AgentRow, Batch, BatchAgent, BatchSummary, NewBatch, NewScenario, PlannedSlot,
                              ScenarioVersion, StoredRun, agent_of, batch_of, check_of, run_of, scenario_of, slot_of,
                              verdict_of)
from assay.store.usage_schema import run_usage
from assay.store.schema import (
    batch_agents,
    batch_completions,
    batches,
    check_outcomes,
    planned_runs,
    run_verdicts,
    runs,
    scenario_versions,
    utcnow,
)

#: One row's bound parameters for an INSERT (column name: value), as SQLAlchemy takes them.
_Params = dict[str, Any]

#: The columns of the run writer's rows, in the order `insert_runs` builds its tuples (each table's
#: `created_at` is added by `_insert_rows`); a test holds them equal to the tables' columns.
_RUN_COLUMNS = ("run_id", "status", "reason", "claimed_success", "claim_summary", "turns", "final_state_hash",
                "final_state", "transcript", "actions", "duration_ms", "schema_version")
_CHECK_COLUMNS = ("run_id", "check_id", "ordinal", "weight", "safety", "passed")
_VERDICT_COLUMNS = ("run_id", "scorer_version", "score", "passed", "safety_failures", "false_success")
_PLAN_FIELDS = ("case_id", "scenario_hash", "trial", "seed")
_PLAN_SQL = f"SELECT run_id, {', '.join(_PLAN_FIELDS)} FROM planned_runs WHERE run_id IN "
#: The heavy JSON columns, left out by `runs_for_batch(..., bodies=False)`.
BODY_FIELDS = frozenset({"final_state", "transcript", "actions"})
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

#: A planned run's fields, as its `planned_runs` row holds them.
_PLANNED_FIELDS = tuple(f.name for f in fields(PlannedRun))


#: (dialect, table, columns) -> the INSERT's head and each column's bind processor (None: as is)
_WRITES: weakref.WeakKeyDictionary[sa.Dialect, dict[tuple[str, tuple[str, ...]], tuple[str, list[Any]]]] = (
    weakref.WeakKeyDictionary())


def _insert_rows(conn: sa.Connection, table: sa.Table, columns: tuple[str, ...], rows: list[tuple[Any, ...]],
                 now: datetime | None = None) -> None:
    """INSERT `rows` (tuples of `columns`' values, plus `created_at=now` when given) into `table`.

    On SQLite, as multi-row INSERTs of ready values through the connection's own transaction: each
    value goes through the column type's own bind processor (SQLAlchemy's, taken once per dialect),
    so the stored bytes are the ones `conn.execute(sa.insert(table), dicts)` stores, without its
    per-row and per-parameter bookkeeping (most of the run writer's CPU). One statement per up to
    `insertmanyvalues_max_parameters` values: the driver runs each in one step, without letting go
    of the interpreter lock per row. PostgreSQL: `sa.insert` with the rows as dicts."""
    if now is not None:
        columns = (*columns, "created_at")
    if conn.dialect.name != "sqlite":
        conn.execute(sa.insert(table), [dict(zip(columns, (*row, now) if now is not None else row)) for row in rows])
        return
    dialect = conn.dialect
    known = _WRITES.setdefault(dialect, {})
    plan = known.get((table.name, columns))
    if plan is None:
        quote = dialect.identifier_preparer.quote
        head = f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) VALUES "
        plan = known[(table.name, columns)] = (head, [table.c[c].type._cached_bind_processor(dialect) for c in columns])
    head, processors = plan
    tail: tuple[Any, ...] = ()
    if now is not None:
        stamp = processors[-1]
        tail = (stamp(now) if stamp is not None else now,)
        processors = processors[:-1]
    todo = [(i, p) for i, p in enumerate(processors) if p is not None]
    width = len(columns)
    one = "(" + ", ".join("?" * width) + ")"
    per = max(1, dialect.insertmanyvalues_max_parameters // width)
    for start in range(0, len(rows), per):
        chunk = rows[start:start + per]
        values: list[Any] = []
        for row in chunk:
            if todo:
                cells = list(row)
                for i, process in todo:
                    cells[i] = process(cells[i])
                values += cells
            else:
                values += row
            values += tail
        conn.exec_driver_sql(head + ", ".join([one] * len(chunk)), tuple(values))


class RunsRepo(Repository):
    """Scenario versions, batches, plans, runs and completions: the core of the store."""

    # -- scenarios ----------------------------------------------------------------------------

    def add_scenario_version(
        self,
        *,
        case_id: str,
        content_hash: str,
        checks_hash: str,
        frozen_on: str | None,
        kit: str,
        title: str,
        language: str,
        document: JsonObject,
        world_fingerprint: str,
    ) -> int:
        """Record a scenario document; return its version number within `case_id`.

        Idempotent: a content hash already stored returns its version. A new hash becomes the
        next version. A frozen case keeps its checks forever (docs/architecture.md, "frozen") from its first
        release on: a new version whose checks differ from a released frozen one is refused,
        because its numbers would silently join a trend line they do not belong to. Versions
        only ever run ad hoc (drafts) bind nothing.
        """
        return self.add_scenario_versions([NewScenario(
            case_id=case_id, content_hash=content_hash, checks_hash=checks_hash, frozen_on=frozen_on, kit=kit,
            title=title, language=language, document=document, world_fingerprint=world_fingerprint,
        )])[0]

    def add_scenario_versions(self, items: list[NewScenario]) -> list[int]:
        """Record several scenario documents in ONE transaction (each as `add_scenario_version`
        would): a refusal of any of them stores none, so a suite is recorded whole or not at all."""
        for item in items:
            frozen_on = item.frozen_on
            if frozen_on is not None and not _DATE.match(frozen_on):
                raise Invalid(f"frozen_on must be YYYY-MM-DD, not {frozen_on!r}", "frozen_on", value=item.case_id)
        try:
            return self.store.transaction(lambda conn: [self._add_scenario_version(conn, item) for item in items])
        except (ValueError, TypeError, sa.exc.StatementError) as exc:
            if _json_fault(exc):
                for item in items:
                    fault = _first_unstorable({"document": item.document})
                    if fault:
                        raise Invalid(fault, "document", value=item.case_id) from None
            raise

    def _add_scenario_version(self, conn: sa.Connection, item: NewScenario) -> int:
        case_id, content_hash, checks_hash = item.case_id, item.content_hash, item.checks_hash
        Store.lock(conn, "case", case_id)
        sv = scenario_versions
        existing = conn.execute(
            sa.select(sv.c.case_id, sv.c.version).where(sv.c.content_hash == content_hash)
        ).first()
        if existing is not None:
            if existing.case_id != case_id:
                raise Conflict(
                    f"content hash {content_hash} is already stored as case "
                    f"'{existing.case_id}'",
                    "case", value=case_id,
                )
            return int(existing.version)
        # The frozen rule binds from a case's first release: a draft run ad hoc (`assay run FILE`)
        # is recorded, so it can be replayed, but its checks may still change until it is released.
        released = sa.select(release_scenarios.c.scenario_hash).where(release_scenarios.c.case_id == case_id)
        frozen = conn.execute(
            sa.select(sv.c.frozen_on, sv.c.checks_hash)
            .where(sv.c.case_id == case_id, sv.c.frozen_on.is_not(None), sv.c.content_hash.in_(released))
            .order_by(sv.c.version)
        ).all()
        for row in frozen:
            if row.checks_hash != checks_hash:
                raise Conflict(
                    f"the case is frozen (since {row.frozen_on}) and its checks "
                    "changed; a changed check needs a new case id",
                    "case", value=case_id,
                )
        latest = conn.execute(
            sa.select(sa.func.max(sv.c.version)).where(sv.c.case_id == case_id)
        ).scalar_one()
        version = int(latest or 0) + 1
        conn.execute(
            sa.insert(sv).values(
                case_id=case_id,
                version=version,
                content_hash=content_hash,
                checks_hash=checks_hash,
                frozen_on=item.frozen_on,
                kit=item.kit,
                title=item.title,
                language=item.language,
                document=item.document,
                world_fingerprint=item.world_fingerprint,
                created_at=utcnow(),
            )
        )
        return version

    def scenario_by_hash(self, content_hash: str) -> ScenarioVersion | None:
        row = self._first(sa.select(scenario_versions).where(scenario_versions.c.content_hash == content_hash))
        return scenario_of(row) if row is not None else None

    def scenario_versions(self, case_id: str) -> list[ScenarioVersion]:
        """Every stored version of one case, oldest first."""
        sv = scenario_versions
        rows = self._all(sa.select(sv).where(sv.c.case_id == case_id).order_by(sv.c.version))
        return [scenario_of(r) for r in rows]

    def latest_scenarios(self) -> list[ScenarioVersion]:
        """The newest version of every case, ordered by case id."""
        sv = scenario_versions
        newest = (
            sa.select(sv.c.case_id, sa.func.max(sv.c.version).label("version"))
            .group_by(sv.c.case_id)
            .subquery()
        )
        query = (
            sa.select(sv)
            .join(newest, sa.and_(sv.c.case_id == newest.c.case_id, sv.c.version == newest.c.version))
            .order_by(sv.c.case_id)
        )
        return [scenario_of(r) for r in self._all(query)]

    # -- batches and the plan -----------------------------------------------------------------

    def add_batch(self, batch: NewBatch, planned: list[PlannedRun], agent: AgentRow | None = None) -> None:
        """Record a batch and its whole plan at once: the plan is the denominator.

        `agent`, when given, is how to load the agent again, so the batch can be resumed. Each
        planned slot must point at a stored scenario version of the same case id.
        """
        try:
            self.store.transaction(lambda conn: self.insert_plan(conn, batch, planned, agent))
        except sa.exc.IntegrityError as exc:
            raise _refused(exc, f"batch {batch.id}") from None

    def insert_plan(self, conn: sa.Connection, batch: NewBatch, planned: list[PlannedRun],
                    agent: AgentRow | None, now: datetime | None = None) -> None:
        """The one plan insert (a run batch's and a submission's): batch, agent, planned slots."""
        now = now or utcnow()
        self._check_plan(conn, planned)
        conn.execute(sa.insert(batches), [{**asdict(batch), "created_at": now}])
        if agent is not None:
            conn.execute(sa.insert(batch_agents), [{**asdict(agent), "batch_id": batch.id, "created_at": now}])
        if planned:
            conn.execute(sa.insert(planned_runs), [  # `asdict` without its deep copy of every field (ints, strs)
                {"batch_id": batch.id, **{f: getattr(p, f) for f in _PLANNED_FIELDS}} for p in planned])
            # each run's salt, drawn now, so its seed commitment exists with the plan (issue 23)
            conn.execute(sa.insert(seed_salts), [{"run_id": p.run_id, "salt": new_salt(), "created_at": now}
                                                 for p in planned])

    def batch_agent(self, batch_id: str) -> BatchAgent | None:
        """How the batch's agent is loaded again (None for batches stored before 0004)."""
        row = self._first(sa.select(batch_agents).where(batch_agents.c.batch_id == batch_id))
        return agent_of(row) if row is not None else None

    def add_completion(self, batch_id: str) -> bool:
        """Mark the batch complete if every planned slot has its run; True when it is (now or before)."""
        def body(conn: sa.Connection) -> bool:
            if conn.execute(sa.select(batch_completions.c.batch_id)
                            .where(batch_completions.c.batch_id == batch_id)).first() is not None:
                return True
            if self._unrecorded(conn, batch_id):
                return False
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(batch_completions).values(batch_id=batch_id, created_at=utcnow()))
            except sa.exc.IntegrityError:
                pass  # another process completed it between our check and our insert (PostgreSQL): complete
            return True

        return self.store.transaction(body)

    @staticmethod
    def unrecorded_in(conn: sa.Connection, batch_id: str) -> int:
        """How many of the batch's planned slots have no run recorded, inside the caller's transaction."""
        return RunsRepo._unrecorded(conn, batch_id)

    @staticmethod
    def _unrecorded(conn: sa.Connection, batch_id: str) -> int:
        return int(conn.execute(
            sa.select(sa.func.count()).select_from(planned_runs.outerjoin(runs, runs.c.run_id == planned_runs.c.run_id))
            .where(planned_runs.c.batch_id == batch_id, runs.c.run_id.is_(None))
        ).scalar_one())

    def unrecorded(self, batch_id: str) -> int:
        """How many of the batch's planned slots have no run recorded yet."""
        return self.store.transaction(lambda conn: self._unrecorded(conn, batch_id), write=False)

    def completable(self, since: datetime | None = None) -> list[str]:
        """Batches whose every planned slot is recorded but that were never completed (the process
        that recorded the last run stopped before completing it), oldest first. With `since`, only
        batches with a run recorded at or after it (0021: by `runs.created_at`, no scan of the
        batches): what a sweep that ran before `since` may have missed."""
        pr, b, bc = planned_runs, batches, batch_completions
        missing = (sa.select(pr.c.run_id).select_from(pr.outerjoin(runs, runs.c.run_id == pr.c.run_id))
                   .where(pr.c.batch_id == b.c.id, runs.c.run_id.is_(None)))
        query = (sa.select(b.c.id).outerjoin(bc, bc.c.batch_id == b.c.id)
                 .where(bc.c.batch_id.is_(None), ~sa.exists(missing))
                 .order_by(b.c.created_at, b.c.id))
        if since is not None:
            recent = (sa.select(pr.c.batch_id).select_from(runs.join(pr, pr.c.run_id == runs.c.run_id))
                      .where(runs.c.created_at >= since))
            query = query.where(b.c.id.in_(recent))
        return self.store.transaction(lambda conn: [str(i) for i in conn.execute(query).scalars()], write=False)

    def recorded(self, run_ids: Sequence[str]) -> set[str]:
        """Which of `run_ids` already have their run stored."""
        return self.store.transaction(lambda conn: self.recorded_in(conn, run_ids), write=False)

    @staticmethod
    def recorded_in(conn: sa.Connection, run_ids: Sequence[str]) -> set[str]:
        """`recorded`, inside the caller's transaction `conn`."""
        found: set[str] = set()
        for chunk in _chunks(list(run_ids)):
            found.update(conn.execute(sa.select(runs.c.run_id).where(runs.c.run_id.in_(chunk))).scalars())
        return found

    def _check_plan(self, conn: sa.Connection, planned: list[PlannedRun]) -> None:
        sv = scenario_versions
        hashes = sorted({p.scenario_hash for p in planned})
        known: dict[str, str] = {}
        for chunk in _chunks(hashes):
            for row in conn.execute(
                sa.select(sv.c.content_hash, sv.c.case_id).where(sv.c.content_hash.in_(chunk))
            ):
                known[row.content_hash] = row.case_id
        for p in planned:
            stored = known.get(p.scenario_hash)
            if stored is None:
                raise Conflict(f"scenario {p.scenario_hash} is not stored", "plan", value=p.case_id)
            if stored != p.case_id:
                raise Conflict(
                    f"slot {p.slot} plans scenario {p.scenario_hash}, which is case '{stored}'",
                    "plan", value=p.case_id,
                )

    def batch(self, batch_id: str) -> Batch | None:
        row = self._first(sa.select(batches).where(batches.c.id == batch_id))
        return batch_of(row) if row is not None else None

    def latest_batch_id(self, kind: str | None = None) -> str | None:
        """The most recently created batch that finished, optionally of one kind ('run',
        'submission'): a batch interrupted or still running is not "the latest results"."""
        query = (sa.select(batches.c.id).join(batch_completions, batch_completions.c.batch_id == batches.c.id)
                 .order_by(batches.c.created_at.desc(), batches.c.id.desc()))
        if kind is not None:
            query = query.where(batches.c.kind == kind)
        row = self._first(query.limit(1))
        return None if row is None else str(row[0])

    def batch_listing(self, kind: str | None = None) -> list[BatchSummary]:
        """Every batch, newest first, with `n_planned`, `n_recorded` and `status` (`complete` once
        every slot is recorded and the batch was completed, else `pending`)."""
        pr, b = planned_runs, batches
        counts = (sa.select(pr.c.batch_id, sa.func.count().label("n_planned"), sa.func.count(runs.c.run_id).label("n_recorded"))
                  .select_from(pr.outerjoin(runs, runs.c.run_id == pr.c.run_id)).group_by(pr.c.batch_id).subquery())
        query = (sa.select(b.c.id, b.c.kind, b.c.suite_key, b.c.suite_version, b.c.agent_spec, b.c.agent_label,
                           b.c.trials, b.c.created_at, sa.func.coalesce(counts.c.n_planned, 0).label("n_planned"),
                           sa.func.coalesce(counts.c.n_recorded, 0).label("n_recorded"),
                           batch_completions.c.created_at.label("completed_at"))
                 .outerjoin(counts, counts.c.batch_id == b.c.id)
                 .outerjoin(batch_completions, batch_completions.c.batch_id == b.c.id)
                 .order_by(b.c.created_at.desc(), b.c.id.desc()))
        if kind is not None:
            query = query.where(b.c.kind == kind)
        return [BatchSummary(r.id, r.kind, r.suite_key, r.suite_version, r.agent_spec, r.agent_label, r.trials,
                             r.created_at, int(r.n_planned), int(r.n_recorded),
                             "complete" if r.completed_at is not None else "pending") for r in self._all(query)]

    def planned_runs(self, batch_id: str) -> list[PlannedSlot]:
        rows = self._all(sa.select(planned_runs).where(planned_runs.c.batch_id == batch_id).order_by(planned_runs.c.slot))
        return [slot_of(r) for r in rows]

    # -- runs ---------------------------------------------------------------------------------

    def add_runs(self, items: list[tuple[RunRecord, list[CheckOutcome], RunVerdict]]) -> None:
        """Append many runs, their check outcomes and their verdicts in one transaction.

        Each item is (record, its check outcomes, the scorer's verdict on them: `score.oracle.
        run_verdict`); the store does not apply the pass rule (it may not import the scorer), it
        records the verdict beside what it was given from, so a run is never stored without one.
        Throughput matters (a benchmark stores thousands of runs a second), so rows go in with
        one executemany per table. Each record must match its planned slot's case, scenario,
        trial and seed: a run that disagrees with its plan would carry the wrong pins.
        """
        if items:
            self.store.transaction(lambda conn: self.insert_runs(conn, items))

    def insert_runs(self, conn: sa.Connection, items: list[tuple[RunRecord, list[CheckOutcome], RunVerdict]]) -> None:
        """`add_runs` inside the caller's transaction `conn` (remote play records a run in the
        transaction of the step that ended it). A refusal is raised as `add_runs` raises it
        (`Conflict`, `Invalid`); on PostgreSQL it leaves `conn`'s transaction unusable unless the
        caller wrapped this in a savepoint."""
        if not items:
            return
        run_rows: list[tuple[Any, ...]] = []
        check_rows: list[tuple[Any, ...]] = []
        verdict_rows: list[tuple[Any, ...]] = []
        usage_rows: list[_Params] = []
        now = utcnow()
        for record, checks, verdict in items:
            run_id = record.run_id
            if record.usage:
                usage_rows.extend({**u, "run_id": run_id, "created_at": now} for u in record.usage)
            bodies = record.bodies_text  # encoded where the run ended, as `dumps` encodes
            final_text = record.final_state_text
            run_rows.append((
                run_id, record.status, record.reason, record.claimed_success, record.claim_summary, record.turns,
                record.final_state_hash,
                record.final_state if final_text is None else Encoded(final_text),
                record.transcript if bodies is None else Encoded(bodies[0]),
                record.actions if bodies is None else Encoded(bodies[1]),
                record.duration_ms, record.schema_version,
            ))
            check_rows.extend((run_id, c.check_id, i, c.weight, c.safety, c.passed) for i, c in enumerate(checks))
            verdict_rows.append((run_id, verdict.scorer_version, verdict.score, verdict.passed,
                                 len(verdict.safety_failures), verdict.false_success))
        records = [record for record, _, _ in items]
        try:
            self._check_against_plan(conn, records)
            _insert_rows(conn, runs, _RUN_COLUMNS, run_rows, now)
            if check_rows:
                _insert_rows(conn, check_outcomes, _CHECK_COLUMNS, check_rows)
            _insert_rows(conn, run_verdicts, _VERDICT_COLUMNS, verdict_rows, now)
            if usage_rows:
                conn.execute(sa.insert(run_usage), usage_rows)
        except sa.exc.IntegrityError as exc:
            raise _refused(exc, f"storing {len(items)} run(s)") from None
        except (ValueError, TypeError, sa.exc.StatementError) as exc:
            if not _json_fault(exc):
                raise
            for record in records:
                fault = _first_unstorable(
                    {f: getattr(record, f) for f in ("final_state", "transcript", "actions")}
                )
                if fault:
                    raise Invalid(f"run {record.run_id}: {fault}", "record", value=record.case_id) from None
            raise

    def _check_against_plan(self, conn: sa.Connection, records: list[RunRecord]) -> None:
        pr = planned_runs
        plan: dict[str, tuple[Any, ...]] = {}
        ids = [r.run_id for r in records]
        sqlite = conn.dialect.name == "sqlite"
        for chunk in _chunks(ids):
            if sqlite:  # the same query without SQLAlchemy's per-row work (the run writer's hot path)
                rows: Any = conn.exec_driver_sql(f"{_PLAN_SQL}({', '.join('?' * len(chunk))})", tuple(chunk))
            else:
                rows = conn.execute(sa.select(pr.c.run_id, *(pr.c[f] for f in _PLAN_FIELDS))
                                    .where(pr.c.run_id.in_(chunk)))
            for row in rows:
                plan[row[0]] = tuple(row[1:])
        for record in records:
            slot = plan.get(record.run_id)
            if slot is None:
                raise Conflict(f"run {record.run_id} is not in any plan", "record", value=record.case_id)
            if slot == (record.case_id, record.scenario_hash, record.trial, record.seed):  # _PLAN_FIELDS
                continue
            for field, planned in zip(_PLAN_FIELDS, slot, strict=True):
                if planned != getattr(record, field):
                    raise Conflict(
                        f"run {record.run_id} has {field}={getattr(record, field)!r} but its "
                        f"plan says {planned!r}",
                        "record", value=record.case_id,
                    )

    def _slots(self, *, bodies: bool) -> sa.Select[Any]:
        run_columns = [
            c for c in runs.c if c.name != "run_id" and (bodies or c.name not in BODY_FIELDS)
        ]
        return sa.select(*planned_runs.c, *run_columns).select_from(
            planned_runs.outerjoin(runs, runs.c.run_id == planned_runs.c.run_id)
        )

    def runs_for_batch(self, batch_id: str, *, bodies: bool = True) -> list[StoredRun]:
        """Every planned slot of a batch, in slot order, with its run if it has one.

        A slot whose run never arrived comes back with `status` None, no checks and no `verdict`:
        it is still a planned run and still counts (docs/architecture.md, "Failures count"). A recorded run
        carries its `verdict` row (`run_verdicts`: scorer_version, score, passed, safety_failures
        count, false_success). `bodies=False` leaves out final_state, transcript and actions for
        callers that only tally outcomes.
        """
        co, rv = check_outcomes, run_verdicts

        def body(conn: sa.Connection) -> tuple[list[sa.Row[Any]], list[tuple[str, str, int, bool, bool]],
                                             dict[str, Any]]:
            slots = conn.execute(
                self._slots(bodies=bodies)
                .where(planned_runs.c.batch_id == batch_id)
                .order_by(planned_runs.c.slot)
            ).all()
            checks = conn.execute(  # what a `CheckOutcome` holds, as plain tuples (a batch has thousands)
                sa.select(co.c.run_id, co.c.check_id, co.c.weight, co.c.safety, co.c.passed)
                .join(planned_runs, planned_runs.c.run_id == co.c.run_id)
                .where(planned_runs.c.batch_id == batch_id)
                .order_by(co.c.run_id, co.c.ordinal)
            ).all()
            verdicts = {r.run_id: r for r in conn.execute(  # what `verdict_of` reads (no timestamp to parse)
                sa.select(rv.c.run_id, rv.c.scorer_version, rv.c.score, rv.c.passed, rv.c.safety_failures,
                          rv.c.false_success).join(planned_runs, planned_runs.c.run_id == rv.c.run_id)
                .where(planned_runs.c.batch_id == batch_id))}
            return list(slots), list(checks), verdicts

        slots, checks, verdicts = self._reading(body)
        by_run: dict[str, list[CheckOutcome]] = {}
        for run_id, check_id, weight, safety, passed in checks:
            by_run.setdefault(run_id, []).append(CheckOutcome(check_id, int(weight), bool(safety), bool(passed)))
        return [run_of(row, by_run.get(row.run_id, []), verdict_of(verdicts.get(row.run_id))) for row in slots]

    def resolve_run_id(self, run_id: str, owner: str | None = None) -> str | None:
        """The full run id for `run_id` or a unique prefix of it (`resolve_prefix`); with `owner`,
        a prefix expands only to runs of that account's submissions."""
        return self._reading(lambda conn: resolve_prefix(conn, planned_runs.c.run_id, run_id, "run",
                                                         owned_by(owner, planned_runs.c.batch_id)))

    def resolve_batch_id(self, ident: str, owner: str | None = None) -> str | None:
        """The full batch (or submission) id for `ident` or a unique prefix of it; with `owner`, a
        prefix expands only to that account's submissions."""
        return self._reading(lambda conn: resolve_prefix(conn, batches.c.id, ident, "batch",
                                                         owned_by(owner, batches.c.id)))

    def run(self, run_id: str, owner: str | None = None) -> StoredRun | None:
        """One planned run with its run fields, checks and scenario row; None if unknown.

        Accepts a unique prefix (of `owner`'s runs, when given). A planned run that has no run row
        yet comes back like its slot in `runs_for_batch`: planned fields, run fields None, no checks.
        """
        full = self.resolve_run_id(run_id, owner)
        if full is None:
            return None
        co = check_outcomes

        def body(conn: sa.Connection) -> tuple[Any, ...]:
            slot = conn.execute(
                self._slots(bodies=True).where(planned_runs.c.run_id == full)
            ).one()
            checks = conn.execute(
                sa.select(co).where(co.c.run_id == full).order_by(co.c.ordinal)
            ).all()
            verdict = conn.execute(sa.select(run_verdicts).where(run_verdicts.c.run_id == full)).first()
            scenario = conn.execute(
                sa.select(scenario_versions).where(
                    scenario_versions.c.content_hash == slot.scenario_hash
                )
            ).one()
            return slot, checks, verdict, scenario

        slot, checks, verdict, scenario = self._reading(body)
        return run_of(slot, [check_of(r) for r in checks], verdict_of(verdict), scenario_of(scenario))
