"""Tamper-evident entries (issue 12, item 6): each submission is stamped with a digest when it is
finalised, once; the board entry and the owner view show it; it is the SHA-256 of the canonical JSON
of everything recorded for the submission, and a change to any of it changes the digest."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import canonical_bytes
from assay.service import board, completion, scoring, submissions
from assay.service.actors import OPERATOR, PUBLIC
from assay.stats import digest
from assay.store import Store
from assay.store.digest_schema import digest_stamps, submission_digests
from assay.store.export_repo import ExportRepo
from assay.store.schema import metadata

from ._support import submit, tables_of
from tests.board._support import account

HEX64 = r"[0-9a-f]{64}"


def _stamps(store: Store, version: int = 1) -> dict[str, str]:
    with store.engine.connect() as conn:
        if version == 1:
            return {r.submission_id: r.digest for r in conn.execute(sa.select(submission_digests))}
        return {r.submission_id: r.digest for r in conn.execute(
            sa.select(digest_stamps).where(digest_stamps.c.digest_version == version))}


def _recomputed(store: Store, submission_id: str, version: int = 1) -> str:
    """The digest from the rows the database holds now, by the pure function."""
    with store.engine.connect() as conn:
        rows = ExportRepo.digest_rows(conn, submission_id, digest.PARTS)
        if version >= 2:
            rows["planned_runs"] = digest.with_commitments(rows["planned_runs"], ExportRepo.salts(conn, [submission_id]))
        release = ExportRepo.release_of(conn, submission_id)
        era = conn.execute(sa.text("SELECT measurement_era FROM submission_finalisations WHERE submission_id = :s"),
                           {"s": submission_id}).scalar_one()
    return digest.submission_digest(release, era, rows, version=version)


def test_a_submission_is_stamped_once_when_finalised_and_its_entry_shows_the_digest(store: Store) -> None:
    account(store, "alice", "Alice")
    sid = submit(store, "forge", "reference:diligent", "alice", "diligent")
    stamps = _stamps(store)
    assert list(stamps) == [sid]
    assert len(stamps[sid]) == 64 and int(stamps[sid], 16) >= 0
    assert stamps[sid] == _recomputed(store, sid)
    v2 = _stamps(store, 2)
    assert list(v2) == [sid] and v2[sid] == _recomputed(store, sid, 2) != stamps[sid]

    # the board and the owner view show version 2: what a public export lets anyone recompute
    entry = board.board(store, "forge", actor=PUBLIC)["entries"][0]
    assert (entry["submission_id"], entry["digest"]) == (sid, v2[sid])
    assert submissions.results(store, sid, actor=OPERATOR)["digest"] == v2[sid]

    # completing again (a resume, a background worker) sweeps nothing new and never restamps
    for _ in range(2):
        completion.complete_submission(store, sid)
    assert _stamps(store) == stamps and _stamps(store, 2) == v2
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(submission_digests)).scalar_one() == 1
        assert conn.execute(sa.select(sa.func.count()).select_from(digest_stamps)).scalar_one() == 1


def test_a_trait_submission_is_stamped_only_once_judged_and_its_passes_are_in_the_digest(store: Store) -> None:
    account(store, "alice", "Alice")
    sid = submit(store, "academy", "reference:steadfast", "alice", "steadfast")
    assert _stamps(store) == {}  # played and oracle-scored, not judged: not finalised, no digest
    assert submissions.results(store, sid, actor=OPERATOR)["digest"] is None
    scoring.score(store, sid, actor=OPERATOR)
    stamps = _stamps(store)
    assert list(stamps) == [sid] and stamps[sid] == _recomputed(store, sid)
    with store.engine.connect() as conn:
        rows = ExportRepo.digest_rows(conn, sid, digest.PARTS)
    assert len(rows["judge_passes"]) == 20 and len(rows["judge_configs"]) == 1 and len(rows["runs"]) == 20
    entry = next(e for e in board.board(store, "academy", actor=PUBLIC)["entries"] if e["submission_id"] == sid)
    assert entry["digest"] == _stamps(store, 2)[sid] == _recomputed(store, sid, 2)
    scoring.score(store, sid, actor=OPERATOR)  # nothing left to judge: nothing restamped
    assert _stamps(store) == stamps


def test_the_database_refuses_to_change_a_digest(store: Store) -> None:
    account(store, "alice", "Alice")
    submit(store, "forge", "reference:idle", "alice", "idle")
    for table in ("submission_digests", "digest_stamps", "seed_salts"):
        for statement in (f"UPDATE {table} SET created_at = created_at", f"DELETE FROM {table}"):
            with pytest.raises(sa.exc.IntegrityError, match=f"assay: {table} is append-only"):
                with store.engine.begin() as conn:
                    conn.execute(sa.text(statement))
    assert len(_stamps(store)) == len(_stamps(store, 2)) == 1


def test_the_digest_covers_every_row_recorded_for_the_submission(sqlite_store: Store) -> None:
    """Each part's rows are all there, and changing any one value of any one of them (or the
    release, or the era) changes the digest."""
    account(sqlite_store, "alice", "Alice")
    sid = submit(sqlite_store, "forge", "reference:hasty", "alice", "hasty")
    tables = tables_of(sqlite_store)
    mine = digest.group_by_submission(tables)[sid]
    release = next(r for r in tables["suite_releases"] if r["id"] == tables["submissions"][0]["release_id"])
    era = tables["submission_finalisations"][0]["measurement_era"]
    stamped = _stamps(sqlite_store)[sid]
    assert digest.submission_digest(release, era, mine, version=1) == stamped
    assert {t: len(r) for t, r in mine.items()} == {
        "submissions": 1, "batches": 1, "batch_agents": 1, "planned_runs": 15, "submission_runs": 15, "runs": 15,
        "check_outcomes": sum(1 for r in tables["check_outcomes"]), "run_sweeps": 15, "win_condition_outcomes": 15}
    for table, rows in mine.items():
        for column in rows[0]:
            changed = {**mine, table: [{**rows[0], column: _other(rows[0][column])}, *rows[1:]]}
            assert digest.submission_digest(release, era, changed, version=1) != stamped, (table, column)
        dropped = {**mine, table: rows[1:]}
        assert digest.submission_digest(release, era, dropped, version=1) != stamped, table
    assert digest.submission_digest({**release, "release_hash": "0" * 64}, era, mine, version=1) != stamped
    assert digest.submission_digest(release, "another-era", mine, version=1) != stamped
    # the order rows are given in does not matter: each part is sorted by its primary key
    shuffled = {t: list(reversed(r)) for t, r in mine.items()}
    assert digest.submission_digest(release, era, shuffled, version=1) == stamped


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return "x"
    return {"changed": value}


def test_every_part_is_its_table_whole_keyed_by_its_primary_key() -> None:
    """A column added to a table later must be a decision (a new digest version), not a surprise."""
    for part in digest.PARTS:
        table = metadata.tables[part.table]
        assert part.columns == tuple(c.name for c in table.columns), part.table
        assert part.key == tuple(c.name for c in table.primary_key.columns), part.table
        assert part.column in part.columns


_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                     max_leaves=8)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=60, deadline=None)
@given(value=_json)
def test_plain_values_read_back_as_themselves_and_their_bytes_are_canonical(value: Any) -> None:
    once = digest.plain(value)
    assert digest.plain(once) == once
    encoded = canonical_bytes(once)
    assert canonical_bytes(digest.plain(json.loads(encoded))) == encoded


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(st.fixed_dictionaries({
    "run_id": st.text(alphabet="0123456789abcdef", min_size=1, max_size=4), "status": st.sampled_from(["completed", "timeout"]),
    "reason": st.one_of(st.none(), st.text(max_size=6)), "claimed_success": st.one_of(st.none(), st.booleans()),
    "claim_summary": st.none(), "turns": st.integers(0, 9), "final_state_hash": st.just("f" * 64),
    "final_state": _json, "transcript": st.lists(_json, max_size=3), "actions": st.lists(_json, max_size=2),
    "duration_ms": st.integers(0, 10**6), "created_at": st.just("2026-01-01T00:00:00+00:00"),
    "schema_version": st.just(2)}), max_size=4, unique_by=lambda r: r["run_id"]),
    era=st.one_of(st.none(), st.text(max_size=5)))
@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_document_assembled_row_by_row_is_the_canonical_json_of_the_whole(runs: list[dict[str, Any]],
                                                                             era: str | None) -> None:
    release = {"suite_key": "forge", "version": "1.0", "release_hash": "a" * 64, "title": "not pinned"}
    assembled = digest.document_bytes(release, era, {"runs": runs}, version=1)
    assert canonical_bytes(digest.plain(json.loads(assembled))) == assembled
    whole = json.loads(assembled)
    assert whole["release"] == {"suite_key": "forge", "version": "1.0", "release_hash": "a" * 64}
    assert [r["run_id"] for r in whole["rows"]["runs"]] == sorted(r["run_id"] for r in runs)
    assert set(whole["rows"]) == {p.table for p in digest.PARTS}


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("table", ["submission_digests", "digest_stamps", "seed_salts"])
def test_the_digests_are_under_row_level_security_like_every_table(store: Store, table: str) -> None:
    with store.engine.connect() as conn:
        secured = conn.execute(sa.text(
            "SELECT c.relrowsecurity AND c.relforcerowsecurity FROM pg_class c "
            "WHERE c.relname = :t AND c.relkind = 'r'"), {"t": table}).scalar_one()
        policies = set(conn.execute(sa.text(
            "SELECT policyname FROM pg_policies WHERE tablename = :t"), {"t": table}).scalars())
    assert secured is True
    assert policies == {"assay_service_read", "assay_service_append", "assay_owner_all"}
