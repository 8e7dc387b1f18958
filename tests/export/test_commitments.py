"""Seed commitments and digest version 2 (issue 23, item 2): the commitment's bytes are defined
once and pinned; it opens for the run's seed and salt and for nothing else; every planned run gets
a salt with its plan; migration 0016 salts the runs stored before it and stamps version 2 on every
finalised submission whose rows still add up to its version-1 stamp, as the live code would."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.service import exports
from assay.service.actors import OPERATOR
from assay.service.verify import verify
from assay.stats import commitment, digest
from assay.store import Store
from assay.store import db as store_db
from assay.store.digest_schema import digest_stamps, seed_salts, submission_digests
from assay.store.export_repo import ExportRepo
from assay.store.schema import planned_runs

from tests.board._support import account, mini_suite, submit

SALT = "0123456789abcdef" * 4
seeds = st.integers(min_value=-(2**63), max_value=2**63 - 1)
salts = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def test_the_bytes_are_the_documented_ones() -> None:
    assert commitment.message(42, SALT) == b"assay-seed-commitment/1:42:" + SALT.encode()
    assert commitment.seed_commitment(42, SALT) == hashlib.sha256(
        b"assay-seed-commitment/1:42:" + SALT.encode()).hexdigest()
    # pinned: a change to the encoding is a new commitment version, never a silent one
    assert commitment.seed_commitment(-7, SALT) == "58adefa3398747eb8d4eb1d65a09ae360584a8824827d9a1686d5963ebf5406b"


@settings(max_examples=200, deadline=None)
@given(seed=seeds, salt=salts, other_seed=seeds, other_salt=salts)
def test_a_commitment_opens_for_its_seed_and_salt_and_nothing_else(seed: int, salt: str, other_seed: int,
                                                                   other_salt: str) -> None:
    made = commitment.seed_commitment(seed, salt)
    assert len(made) == 64 and commitment.opens(made, seed, salt)
    if other_seed != seed:
        assert not commitment.opens(made, other_seed, salt)
    if other_salt != salt:
        assert not commitment.opens(made, seed, other_salt)
    if (other_seed, other_salt) != (seed, salt):
        assert not commitment.opens(made, other_seed, other_salt)


@pytest.mark.parametrize("seed, salt", [(True, SALT), ("42", SALT), (4.0, SALT), (42, SALT.upper()), (42, SALT[:-1]),
                                        (42, SALT + "0"), (42, "g" * 64), (42, None)])
def test_a_malformed_seed_or_salt_commits_to_nothing_and_opens_nothing(seed: Any, salt: Any) -> None:
    with pytest.raises(ValueError):
        commitment.seed_commitment(seed, salt)
    assert not commitment.opens(commitment.seed_commitment(42, SALT), seed, salt)
    assert not commitment.opens("not a commitment", 42, SALT)


def test_salts_are_fresh() -> None:
    drawn = {commitment.new_salt() for _ in range(64)}
    assert len(drawn) == 64 and all(len(s) == 64 and int(s, 16) >= 0 for s in drawn)


def test_version_2_is_pinned_and_leaves_the_secrets_out() -> None:
    release = {"suite_key": "mini", "version": "1.0", "release_hash": "a" * 64}
    planned = [{"batch_id": "b" * 32, "slot": 0, "run_id": "r" * 32, "case_id": "c", "scenario_hash": "d" * 64,
                "trial": 1, "seed": 2**60 + 1}]
    rows = {"planned_runs": digest.with_commitments(planned, {"r" * 32: SALT}),
            "batches": [{"id": "b" * 32, "kind": "submission", "suite_key": "mini", "suite_version": "1.0",
                         "agent_spec": "python:/home/someone/agent.py:Agent", "agent_label": "x",
                         "config_signature": "e" * 64, "harness_version": "assay-harness/1", "trials": 1,
                         "base_seed": 12345, "created_at": "2026-01-01T00:00:00+00:00"}]}
    v2 = digest.submission_digest(release, "era-1", rows, version=2)
    # pinned: version 2's bytes are frozen; a change to them is a new digest version
    assert v2 == "6591ff18822ff4a9abee17a77aff18a1391bfed2da00ed8e39f65dcd5cace58d"
    document = digest.document_bytes(release, "era-1", rows, version=2)
    for secret in (b"1152921504606846977", b"12345", b"/home/someone", SALT.encode()):
        assert secret not in document
    assert commitment.seed_commitment(2**60 + 1, SALT).encode() in document
    # a secret column changed leaves version 2 as it was; version 1 sees it
    other = {**rows, "batches": [{**rows["batches"][0], "base_seed": 1}]}
    assert digest.submission_digest(release, "era-1", other, version=2) == v2
    v1_rows = {**rows, "planned_runs": planned}
    assert (digest.submission_digest(release, "era-1", v1_rows, version=1)
            != digest.submission_digest(release, "era-1", {**v1_rows, **{"batches": other["batches"]}}, version=1))
    # the seed reaches version 2 through its commitment: another seed, another digest
    moved = {**rows, "planned_runs": digest.with_commitments([{**planned[0], "seed": 7}], {"r" * 32: SALT})}
    assert digest.submission_digest(release, "era-1", moved, version=2) != v2


def _stamps(store: Store) -> tuple[dict[str, str], dict[str, str]]:
    with store.engine.connect() as conn:
        v1 = {r.submission_id: r.digest for r in conn.execute(sa.select(submission_digests))}
        v2 = {r.submission_id: r.digest for r in conn.execute(
            sa.select(digest_stamps).where(digest_stamps.c.digest_version == 2))}
    return v1, v2


def _live_v2(store: Store, submission_id: str) -> str:
    with store.engine.connect() as conn:
        rows = ExportRepo.digest_rows(conn, submission_id, digest.PARTS)
        rows["planned_runs"] = digest.with_commitments(rows["planned_runs"], ExportRepo.salts(conn, [submission_id]))
        release = ExportRepo.release_of(conn, submission_id)
        era = conn.execute(sa.text("SELECT measurement_era FROM submission_finalisations WHERE submission_id = :s"),
                           {"s": submission_id}).scalar_one()
    return digest.submission_digest(release, era, rows, version=2)


def _edit_behind_the_triggers(store: Store, submission_id: str) -> None:
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(sa.text("DROP TRIGGER runs_append_only_update"))
        else:
            conn.execute(sa.text("ALTER TABLE runs DISABLE TRIGGER runs_append_only"))
        conn.execute(sa.text("UPDATE runs SET reason = 'edited' WHERE run_id = (SELECT MIN(run_id) FROM planned_runs "
                             "WHERE batch_id = :s)"), {"s": submission_id})


@pytest.fixture
def bootstrapped(db_url: str, templates: Any) -> Any:
    """A store with the built-in suites released (a copy of the session's template)."""
    from assay.store import open_store

    templates.copy_into(db_url, "bootstrapped")
    opened = open_store(db_url)
    try:
        yield opened
    finally:
        opened.close()


def test_migration_0016_salts_old_runs_and_restamps_what_still_adds_up(bootstrapped: Store, tmp_path: Any) -> None:
    from assay.service import releases, scoring
    from assay.service.runs import run_suite

    store = bootstrapped
    mini = mini_suite(tmp_path / "mini", reps=1)
    releases.release_path(store, str(mini), actor=OPERATOR)
    for name in ("alice", "bob", "carol"):
        account(store, name, name.title())
    ids = [submit(store, "mini", agent=a, account=n, publish=True)
           for a, n in (("reference:diligent", "alice"), ("reference:hasty", "bob"), ("reference:idle", "carol"))]
    run_suite(str(mini), agent_spec="reference:idle", trials=1, store=store)
    # a judged submission: judge passes, floats and JSON documents go through the frozen copy too
    judged = submit(store, "academy", agent="reference:steadfast", account="alice", publish=True)
    scoring.score(store, judged, actor=OPERATOR)
    v1_before, _ = _stamps(store)
    assert set(v1_before) == {*ids, judged}
    with store.engine.connect().execution_options(assay_write=True) as conn, conn.begin():
        command.downgrade(store_db._alembic_config(conn), "0014")
    assert "seed_salts" not in sa.inspect(store.engine).get_table_names()
    _edit_behind_the_triggers(store, ids[2])  # carol's rows no longer add up to her version-1 stamp
    assert store_db.migrate(store.engine) is True

    with store.engine.connect() as conn:
        runs = set(conn.execute(sa.select(planned_runs.c.run_id)).scalars())
        salted = set(conn.execute(sa.select(seed_salts.c.run_id)).scalars())
    assert salted == runs and len(runs) == 4 * 2 + 20  # four mini batches of two runs, twenty academy runs
    v1, v2 = _stamps(store)
    assert v1 == v1_before  # version-1 stamps stay as they were
    assert set(v2) == {ids[0], ids[1], judged}  # carol's is not vouched for anew
    for sid in v2:
        assert v2[sid] == _live_v2(store, sid)  # the frozen copy hashes as the live code does
    # what the board shows, and what an export of the upgraded store verifies
    from assay.service.board import board
    from assay.service.actors import PUBLIC

    shown = {e["submission_id"]: e["digest"] for e in board(store, "mini", actor=PUBLIC)["entries"]}
    assert shown[ids[0]] == v2[ids[0]] and shown[ids[1]] == v2[ids[1]]
    exports.export(store, tmp_path / "pub", public=True, actor=OPERATOR)
    report = verify(tmp_path / "pub")
    assert report.ok and report.digests == 3, report.summary()
