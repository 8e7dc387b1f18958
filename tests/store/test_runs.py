"""Batches, their plan and their runs: what goes in comes back, and every planned slot counts."""

from __future__ import annotations

import dataclasses
from datetime import timezone

import pytest
import sqlalchemy as sa

from assay.errors import BadInput
from assay.records import CheckOutcome
from assay.store import Store
from assay.store.rows import Batch, NewBatch, PlannedSlot
from assay.store.schema import batches
from assay.store.runs_repo import RunsRepo

from typing import Any

from assay.store.jsonvalue import Encoded

from ._factories import CHECKS, scored, batch_row, new_id, plan, record, scenario, seeded_batch


def _count(store: Store, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_batch_and_plan_round_trip(store: Store) -> None:
    batch, planned = seeded_batch(store, n=3)
    stored = RunsRepo(store).batch(batch["id"])
    assert stored is not None
    assert {k: getattr(stored, k) for k in batch} == batch
    assert stored.created_at.tzinfo is not None
    assert stored.created_at.utcoffset() == timezone.utc.utcoffset(None)
    assert RunsRepo(store).planned_runs(batch["id"]) == [PlannedSlot(batch_id=batch["id"], **dataclasses.asdict(p)) for p in planned]
    assert RunsRepo(store).batch("missing") is None
    assert RunsRepo(store).planned_runs("missing") == []


def test_runs_for_batch_has_every_slot_including_one_without_a_run(store: Store) -> None:
    batch, planned = seeded_batch(store, n=3)
    first = record(planned[0], status="completed")
    third = record(planned[2], status="crashed", reason="agent raised KeyError",
                   claimed_success=None, claim_summary=None)
    RunsRepo(store).add_runs([scored(third, CHECKS[:1]), scored(first, CHECKS)])

    slots = RunsRepo(store).runs_for_batch(batch["id"])
    assert [s.slot for s in slots] == [0, 1, 2]
    assert [s.status for s in slots] == ["completed", None, "crashed"]

    got = slots[0]
    for field in ("run_id", "case_id", "scenario_hash", "trial", "seed", "status", "reason",
                  "claimed_success", "claim_summary", "turns", "final_state_hash",
                  "final_state", "transcript", "actions", "duration_ms"):
        assert getattr(got, field) == getattr(first, field), field
    assert got.batch_id == batch["id"]
    assert got.created_at is not None and got.created_at.tzinfo is not None
    # stored order, not alphabetical order
    assert got.checks == tuple(CHECKS)
    assert [c.check_id for c in got.checks] == ["web_up", "a_no_data_loss", "m_ticket_closed"]
    assert got.verdict is not None and got.verdict.passed == scored(first, CHECKS)[2].passed
    assert [(e["source"], e.get("role")) for e in got.events] == [("harness", "user"), ("agent", "assistant")]  # read as version 2

    missing = slots[1]
    assert missing.run_id == planned[1].run_id and missing.checks == () and missing.verdict is None
    assert missing.final_state is None and missing.turns is None and not missing.recorded
    assert slots[2].claimed_success is None and slots[2].reason == "agent raised KeyError"


def test_runs_for_batch_without_bodies(store: Store) -> None:
    batch, planned = seeded_batch(store, n=1)
    RunsRepo(store).add_runs([scored(record(planned[0]), CHECKS)])
    [slot] = RunsRepo(store).runs_for_batch(batch["id"], bodies=False)
    assert slot.status == "completed" and len(slot.checks) == 3
    assert slot.final_state is None and slot.transcript is None and slot.actions is None


def test_runs_of_other_batches_do_not_leak_in(store: Store) -> None:
    batch, planned = seeded_batch(store, n=2)
    other = batch_row()
    other_plan = plan(planned[0].scenario_hash, n=2)
    RunsRepo(store).add_batch(NewBatch(**other), other_plan)
    RunsRepo(store).add_runs([scored(record(p), CHECKS) for p in other_plan])
    assert [s.status for s in RunsRepo(store).runs_for_batch(batch["id"])] == [None, None]


def test_latest_batch_id_is_the_latest_completed_batch(store: Store) -> None:
    assert RunsRepo(store).latest_batch_id() is None
    first, planned = seeded_batch(store, n=1)
    assert RunsRepo(store).add_completion(first["id"]) is False  # its one slot has no run yet
    assert RunsRepo(store).latest_batch_id() is None
    RunsRepo(store).add_runs([scored(record(planned[0]), CHECKS)])
    assert RunsRepo(store).add_completion(first["id"]) is True
    second = batch_row(kind="submission")
    second_plan = plan(planned[0].scenario_hash, n=1)
    RunsRepo(store).add_batch(NewBatch(**second), second_plan)
    assert RunsRepo(store).latest_batch_id() == first["id"]  # the second has not finished
    RunsRepo(store).add_runs([scored(record(second_plan[0]), CHECKS)])
    assert RunsRepo(store).add_completion(second["id"]) is True
    assert RunsRepo(store).add_completion(second["id"]) is True  # once is enough; again changes nothing
    assert RunsRepo(store).latest_batch_id() == second["id"]
    assert RunsRepo(store).latest_batch_id(kind="run") == first["id"]


def test_run_lookup_by_full_id_and_by_prefix(store: Store) -> None:
    _, planned = seeded_batch(store, n=2)
    rec = record(planned[0])
    RunsRepo(store).add_runs([scored(rec, CHECKS)])
    full = RunsRepo(store).run(rec.run_id)
    assert full is not None
    assert full.status == "completed" and full.final_state == rec.final_state
    assert full.checks == tuple(CHECKS)
    assert full.scenario is not None and full.scenario.content_hash == rec.scenario_hash
    assert full.scenario.case_id == "estate-001"
    assert RunsRepo(store).run(rec.run_id[:6]) == full
    # a planned run that never produced a record is still found, with no status
    pending = RunsRepo(store).run(planned[1].run_id)
    assert pending is not None and pending.status is None and pending.checks == ()
    assert RunsRepo(store).run("f" * 32 if not rec.run_id.startswith("f") else "0" * 32) is None


def test_ambiguous_or_short_prefix_is_bad_input(store: Store) -> None:
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    planned = plan(kwargs["content_hash"], n=2)
    planned = [dataclasses.replace(p, run_id=f"abcdef{i}" + "0" * 25) for i, p in enumerate(planned)]
    RunsRepo(store).add_batch(NewBatch(**batch_row()), planned)
    with pytest.raises(BadInput, match="ambiguous"):
        RunsRepo(store).run("abcdef")
    assert RunsRepo(store).run("abcdef1").run_id == planned[1].run_id  # type: ignore[union-attr]
    with pytest.raises(BadInput, match="at least 6"):
        RunsRepo(store).run("abcde")
    # LIKE wildcards in a prefix are literal characters, not patterns
    assert RunsRepo(store).run("abc%ef") is None
    assert RunsRepo(store).run("abcde_") is None


def test_prefix_lookup_is_case_sensitive_on_both_backends(store: Store) -> None:
    """SQLite's LIKE ignores case; the lookup must not, or the backends would disagree."""
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    [slot] = plan(kwargs["content_hash"], n=1)
    RunsRepo(store).add_batch(NewBatch(**batch_row()), [dataclasses.replace(slot, run_id="abcdef" + "0" * 26)])
    assert RunsRepo(store).run("ABCDEF") is None
    assert RunsRepo(store).run("abcdef") is not None


def test_a_batch_of_runs_is_one_transaction(store: Store) -> None:
    """A refused run refuses the whole call: nothing half-stored."""
    _, planned = seeded_batch(store, n=2)
    good = record(planned[0])
    bad = record(planned[1], seed=planned[1].seed + 1)
    with pytest.raises(BadInput, match="seed"):
        RunsRepo(store).add_runs([scored(good, CHECKS), scored(bad, CHECKS)])
    assert _count(store, "runs") == 0 and _count(store, "check_outcomes") == 0


def test_a_run_that_was_never_planned_is_refused(store: Store) -> None:
    _, planned = seeded_batch(store, n=1)
    stray = record(dataclasses.replace(planned[0], run_id=new_id()))
    with pytest.raises(BadInput, match="not in any plan"):
        RunsRepo(store).add_runs([scored(stray, [])])
    assert _count(store, "runs") == 0


def test_a_run_is_stored_once(store: Store) -> None:
    _, planned = seeded_batch(store, n=1)
    RunsRepo(store).add_runs([scored(record(planned[0]), CHECKS)])
    with pytest.raises(BadInput, match="refused by the database"):
        RunsRepo(store).add_runs([scored(record(planned[0], status="completed"), [])])
    assert _count(store, "runs") == 1


def test_an_unknown_status_is_refused_by_the_database(store: Store) -> None:
    _, planned = seeded_batch(store, n=1)
    with pytest.raises(BadInput, match="refused by the database"):
        RunsRepo(store).add_runs([scored(record(planned[0], status="passed"), [])])  # type: ignore[arg-type]
    assert _count(store, "runs") == 0


def test_duplicate_check_ids_in_one_run_are_refused(store: Store) -> None:
    _, planned = seeded_batch(store, n=1)
    twice = [CHECKS[0], CheckOutcome("web_up", 1, False, False)]
    with pytest.raises(BadInput):
        RunsRepo(store).add_runs([scored(record(planned[0]), twice)])
    assert _count(store, "runs") == 0


def test_plan_must_point_at_stored_scenarios_of_its_case(store: Store) -> None:
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    with pytest.raises(BadInput, match="is not stored"):
        RunsRepo(store).add_batch(NewBatch(**batch_row()), plan("9" * 64, n=1))
    with pytest.raises(BadInput, match="which is case 'estate-001'"):
        RunsRepo(store).add_batch(NewBatch(**batch_row()), plan(kwargs["content_hash"], case_id="other", n=1))
    assert _count(store, "batches") == 0 and _count(store, "planned_runs") == 0


def test_a_new_batch_has_every_batches_column_but_its_time() -> None:
    columns = [c.name for c in batches.c]
    assert [f.name for f in dataclasses.fields(NewBatch)] == [c for c in columns if c != "created_at"]
    assert [f.name for f in dataclasses.fields(Batch)] == columns


def test_duplicate_slot_is_refused_whole(store: Store) -> None:
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    planned = plan(kwargs["content_hash"], n=2)
    planned[1] = dataclasses.replace(planned[1], slot=0)
    with pytest.raises(BadInput, match="refused by the database"):
        RunsRepo(store).add_batch(NewBatch(**batch_row()), planned)
    assert _count(store, "batches") == 0


def test_many_runs_in_one_call(store: Store) -> None:
    """More runs than one IN (...) chunk, in a single transaction."""
    batch, planned = seeded_batch(store, n=1200)
    RunsRepo(store).add_runs([scored(record(p), CHECKS) for p in planned])
    slots = RunsRepo(store).runs_for_batch(batch["id"], bodies=False)
    assert len(slots) == 1200 and all(s.status == "completed" for s in slots)
    assert _count(store, "check_outcomes") == 3600


def test_the_writers_columns_are_the_tables() -> None:
    from assay.store import runs_repo
    from assay.store.schema import check_outcomes, run_verdicts, runs

    for table, columns in ((runs, runs_repo._RUN_COLUMNS), (check_outcomes, runs_repo._CHECK_COLUMNS),
                           (run_verdicts, runs_repo._VERDICT_COLUMNS)):
        assert sorted((*columns, "created_at") if "created_at" in table.c else columns) == sorted(table.c.keys())


def test_the_run_writer_stores_the_bytes_sqlalchemys_insert_stores(store: Store) -> None:
    """The writer's rows (ready tuples on SQLite, `sa.insert` on PostgreSQL) are stored exactly as
    SQLAlchemy's own insert of the same values as dicts stores them: every column, its type and
    its text, for runs carrying bodies as objects, as encoded text, with nulls and non-ASCII."""
    from assay.score.oracle import run_verdict
    from assay.store.jsonvalue import dumps
    from assay.store.schema import check_outcomes, run_verdicts, runs, utcnow

    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    planned = {name: plan(kwargs["content_hash"], n=3) for name in ("writer", "sqlalchemy")}
    for slots in planned.values():
        RunsRepo(store).add_batch(NewBatch(**batch_row(trials=3)), slots)

    def records(slots: list[Any]) -> list[Any]:
        same = {"final_state_hash": "f" * 64}  # (a record's own hash is of its run id)
        plain = record(slots[0], claim_summary="répondu — ok ✓", final_state={"é": [1, 2.5, None, True]}, **same)
        crashed = record(slots[1], status="crashed", reason="agent raised", claimed_success=None,
                         claim_summary=None, transcript=[], actions=[], **same)
        travelled = record(slots[2], **same).with_final_state_text('{"n":1.5,"services":{"web":"up"}}')
        travelled = travelled.encoded(dumps(travelled.transcript), dumps(travelled.actions), tuple(CHECKS))
        return [scored(plain, CHECKS), scored(crashed, CHECKS[:1]), scored(travelled, list(CHECKS))]

    RunsRepo(store).add_runs(records(planned["writer"]))
    now = utcnow()
    with store.engine.begin() as conn:  # SQLAlchemy's own insert, as the writer stored rows before
        for rec, checks, verdict in records(planned["sqlalchemy"]):
            row = {c: getattr(rec, c) for c in runs.c.keys() if c != "created_at"}
            if rec.final_state_text is not None:
                row["final_state"] = Encoded(rec.final_state_text)
            if rec.bodies_text is not None:
                row["transcript"], row["actions"] = map(Encoded, rec.bodies_text)
            conn.execute(sa.insert(runs), [{**row, "created_at": now}])
            conn.execute(sa.insert(check_outcomes), [
                {"run_id": rec.run_id, "check_id": c.check_id, "ordinal": i, "weight": c.weight, "safety": c.safety,
                 "passed": c.passed} for i, c in enumerate(checks)])
            v = run_verdict(checks, rec.status, rec.claimed_success)
            assert v == verdict
            conn.execute(sa.insert(run_verdicts), [{
                "run_id": rec.run_id, "scorer_version": v.scorer_version, "score": v.score, "passed": v.passed,
                "safety_failures": len(v.safety_failures), "false_success": v.false_success, "created_at": now}])

    def stored(slots: list[Any]) -> list[Any]:
        ids = {p.run_id: p.slot for p in slots}
        out = []
        with store.engine.connect() as conn:
            for table in (runs, check_outcomes, run_verdicts):
                columns = [c for c in table.c.keys() if c not in ("run_id", "created_at")]
                cast = "::text" if store.dialect == "postgresql" else ""
                typed = ", ".join(f"{c}{cast}" + ("" if cast else f", typeof({c})") for c in columns)
                for row in conn.execute(sa.text(f"SELECT run_id, {typed} FROM {table.name}")):
                    if row[0] in ids:
                        out.append((table.name, ids[row[0]], *row[1:]))
        return sorted(out, key=repr)

    mine = stored(planned["writer"])
    assert len(mine) == 3 + 7 + 3
    assert mine == stored(planned["sqlalchemy"])
    with store.engine.connect() as conn:  # the same timestamp text, too
        stamps = {str(s) for s in conn.execute(sa.text("SELECT created_at FROM runs")).scalars()}
    assert len(stamps) == 2 and len({len(s) for s in stamps}) == 1
