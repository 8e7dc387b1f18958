"""Claims on planned slots: holders split a batch, a gone holder's slots are pending again, a slot
is won by exactly one claimer, and the durable tables keep their history (append-only)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import sqlalchemy as sa

from assay.store import Store
from assay.store import claims as claims_module
from assay.store.claims import ClaimRepo, Holder
from assay.store.schema import DURABLE_APPEND_ONLY_TABLES, claim_holders, run_claims, utcnow
from assay.service.execution import _append
from assay.store.runs_repo import RunsRepo

from ._factories import CHECKS, scored, record, seeded_batch


def test_two_holders_split_a_batch_and_never_share_a_slot(store: Store) -> None:
    batch, planned = seeded_batch(store, n=40)
    repo = ClaimRepo(store)
    with Holder(store) as a, Holder(store) as b:
        def take(holder: Holder) -> list[str]:
            won, cursor = [], -1
            while True:
                got, cursor = repo.claim(batch["id"], holder.id, 3, cursor)
                won += got
                if cursor == -1:
                    return won

        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(take, [a, b])
        assert not set(first) & set(second)
        assert sorted(first + second) == sorted(p.run_id for p in planned)
        assert repo.n_pending(batch["id"]) == 0  # both alive: nothing is free
    # both ended: every unrecorded slot is pending again, and claims keep their history
    assert repo.n_pending(batch["id"]) == 40
    with Holder(store) as c:
        won, _ = repo.claim(batch["id"], c.id, 5)
        assert len(won) == 5
        with store.engine.connect() as conn:
            attempts = conn.execute(sa.select(run_claims.c.attempt).where(run_claims.c.holder == c.id)).scalars()
            assert set(attempts) == {2}


def test_recorded_slots_are_never_claimed(store: Store) -> None:
    batch, planned = seeded_batch(store, n=4)
    RunsRepo(store).add_runs([scored(record(p), CHECKS) for p in planned[:3]])
    with Holder(store) as h:
        won, cursor = ClaimRepo(store).claim(batch["id"], h.id, 10)
    assert won == [planned[3].run_id] and cursor == -1


def test_a_silent_or_dead_holder_loses_its_slots(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    batch, planned = seeded_batch(store, n=2)
    repo = ClaimRepo(store)
    silent = Holder(store)
    silent._stop.set()  # its heartbeat stops, as a frozen process's would; it never says it ended
    assert repo.claim(batch["id"], silent.id, 1)[0] == [planned[0].run_id]
    # a process on this machine that no longer exists is gone at once
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})
    with writer.begin() as conn:
        conn.execute(sa.update(claim_holders).where(claim_holders.c.id == silent.id).values(pid=dead.pid))
    assert repo.n_pending(batch["id"]) == 2
    # elsewhere, only the lease says so: alive until its heartbeat is older than LEASE_SECONDS
    with writer.begin() as conn:
        conn.execute(sa.update(claim_holders).where(claim_holders.c.id == silent.id).values(host="elsewhere"))
    assert repo.n_pending(batch["id"]) == 1
    monkeypatch.setattr(claims_module, "LEASE_SECONDS", -1.0)
    assert repo.n_pending(batch["id"]) == 2


def test_a_run_recorded_twice_is_kept_once(store: Store) -> None:
    """A process that played a slot it had lost finds it recorded: its record is dropped, the
    others in the same flush are stored."""
    batch, planned = seeded_batch(store, n=3)
    RunsRepo(store).add_runs([scored(record(planned[0]), CHECKS)])
    _append(store, [scored(record(planned[0], status="timeout"), CHECKS), scored(record(planned[1]), CHECKS)])
    rows = {r.run_id: r.status for r in RunsRepo(store).runs_for_batch(batch["id"], bodies=False)}
    assert rows == {planned[0].run_id: "completed", planned[1].run_id: "completed", planned[2].run_id: None}


def test_claims_and_completions_are_append_only_and_a_heartbeat_is_an_update(store: Store) -> None:
    batch, planned = seeded_batch(store, n=1)
    RunsRepo(store).add_runs([scored(record(planned[0]), CHECKS)])
    assert RunsRepo(store).add_completion(batch["id"])
    with Holder(store) as h:
        writer = store.engine.execution_options(**{Store.WRITE_OPTION: True})
        with writer.begin() as conn:
            conn.execute(sa.insert(run_claims).values(run_id=planned[0].run_id, attempt=1, holder=h.id,
                                                      claimed_at=utcnow()))
            conn.execute(sa.update(claim_holders).where(claim_holders.c.id == h.id)
                         .values(heartbeat_at=utcnow() + timedelta(seconds=1)))
    for table in ("run_claims", "batch_completions"):
        assert table in DURABLE_APPEND_ONLY_TABLES
        with pytest.raises(sa.exc.IntegrityError, match="append-only"), store.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM {table}"))


def test_the_first_facilitator_line_kept_for_a_remote_run_is_the_line(store: Store) -> None:
    """Two replays of one remote run may word the same line at once: whichever is stored first is
    the line both say, on both backends (the second insert meets the key and reads the first)."""
    from assay.store.remote_repo import RemoteRepo

    _, planned = seeded_batch(store, n=1)
    repo, run_id = RemoteRepo(store), planned[0].run_id
    with ThreadPoolExecutor(4) as pool:
        said = list(pool.map(lambda n: repo.keep_line(run_id, 0, "openai:gm", f"line {n}"), range(8)))
    assert len(set(said)) == 1 and repo.lines(run_id) == said[:1]
    assert repo.keep_line(run_id, 1, "openai:gm", "next") == "next"
    assert repo.lines(run_id) == [said[0], "next"]
