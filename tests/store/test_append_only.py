"""The database itself refuses to edit results (docs/architecture.md, invariant 2), on both backends."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import Store
from assay.store.runs_repo import RunsRepo

from ._factories import CHECKS, scored, record, seeded_batch

# table -> (column to tamper with, tampered value)
TAMPER: dict[str, tuple[str, Any]] = {
    "scenario_versions": ("title", "quietly renamed"),
    "batches": ("agent_label", "someone else"),
    "planned_runs": ("seed", 1),
    "runs": ("status", "completed"),
    "check_outcomes": ("passed", True),
    "run_verdicts": ("passed", True),
    "run_usage": ("prompt_tokens", 0),
}


@pytest.fixture
def filled(store: Store) -> Store:
    """One row in every append-only table; the run *failed*, which is what a cheat would edit."""
    _, planned = seeded_batch(store, n=1)
    usage = [{"role": "agent", "model": "m", "prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 20,
              "calls": 2, "latency_ms": 900, "self_reported": False}]
    RunsRepo(store).add_runs([scored(record(planned[0], status="timeout", reason="took too long", usage=usage), CHECKS)])
    return store


def _rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1, 2"))]


@pytest.mark.parametrize("table", list(TAMPER))
def test_update_is_refused_and_the_row_is_unchanged(filled: Store, table: str) -> None:
    before = _rows(filled, table)
    assert before, "fixture must give the table a row to tamper with"
    column, value = TAMPER[table]
    with pytest.raises(sa.exc.IntegrityError, match=f"assay: {table} is append-only"):
        with filled.engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :v"), {"v": value})
    assert _rows(filled, table) == before


@pytest.mark.parametrize("table", list(TAMPER))
def test_delete_is_refused_and_the_row_is_still_there(filled: Store, table: str) -> None:
    before = _rows(filled, table)
    with pytest.raises(sa.exc.IntegrityError, match=f"assay: {table} is append-only"):
        with filled.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM {table}"))
    assert _rows(filled, table) == before


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("table", list(TAMPER))
def test_truncate_is_refused_on_postgresql(filled: Store, table: str) -> None:
    """SQLite has no TRUNCATE (its DELETE FROM is refused above); PostgreSQL's skips row triggers."""
    assert filled.dialect == "postgresql"
    before = _rows(filled, table)
    with pytest.raises(sa.exc.IntegrityError, match=f"assay: {table} is append-only"):
        with filled.engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {table} CASCADE"))
    assert _rows(filled, table) == before


def test_failed_run_cannot_be_rewritten_as_completed(filled: Store) -> None:
    run_id = _rows(filled, "runs")[0][0]
    with pytest.raises(sa.exc.IntegrityError):
        with filled.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE runs SET status = 'completed', reason = NULL WHERE run_id = :r"),
                {"r": run_id},
            )
    stored = RunsRepo(filled).run(run_id)
    assert stored is not None
    assert (stored.status, stored.reason) == ("timeout", "took too long")
