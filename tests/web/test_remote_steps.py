"""Remote play that scales (issue 26): one short write transaction per step, and completion once
per submission, outside every step's transaction.

A step (the agent's answer and the server's) is one write transaction: the step appended and, for
the step that ends a run, the run recorded with its checks and verdict and its lease ended, all
at once. Completion (sweep, era, digest, figures) runs once per submission, after the commit of
the step that recorded its last run; if the process dies in between, the sweeper completes it,
and no run is recorded twice. A process keeps each run's stepper live between steps; a step that
reaches another process (no live stepper) replays the run and gets the same run.

On SQLite and PostgreSQL (`web_store`), through the service the agent routes call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from assay.agents.loader import load_agent
from assay.run.engine import Limits
from assay.service import completion, remote, submissions
from assay.service.actors import account_actor, agent_of
from assay.store import Store
from assay.store.remote_repo import RemoteRepo
from assay.store.repo import Store as StoreClass
from assay.store.runs_repo import RunsRepo
from assay.store.schema import batch_completions, planned_runs, runs, utcnow
from assay.web.workers import Workers

from ._remote import accounts_and_keys, in_process, same_as_stored

ALICE = agent_of("alice")


def _submission(store: Store) -> str:
    accounts_and_keys(store)
    return submissions.compose(store, "forge", factory=remote.remote_factory(), account="alice", label="remote",
                               limits=Limits(turn_limit=40, time_limit=600.0), actor=account_actor("alice"))


@contextmanager
def _write_transactions(store: Store) -> Iterator[list[int]]:
    """Counts the write transactions begun on the store (one list item per transaction)."""
    begun: list[int] = []

    def on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get(StoreClass.WRITE_OPTION):
            begun.append(1)

    sa.event.listen(store.engine, "begin", on_begin)
    try:
        yield begun
    finally:
        sa.event.remove(store.engine, "begin", on_begin)


def _play(store: Store, lease: dict[str, Any], *, each_step: Any = None) -> dict[str, Any]:
    """Play a leased run with `reference:diligent` through `remote.step`; `each_step(answer)` is
    told each answer. Returns the last answer."""
    agent, history, index = load_agent("reference:diligent")(), list(lease["messages"]), lease["step"]
    while True:
        message = agent(history, lease["tools"])
        answer = remote.step(store, lease["run_id"], message, actor=ALICE, index=index)
        if each_step is not None:
            each_step(answer)
        history = [*history, message, *answer["messages"]]
        if answer["done"]:
            return answer
        index += 1


def _completed(store: Store, batch_id: str) -> bool:
    with store.engine.connect() as conn:
        return conn.execute(sa.select(batch_completions.c.batch_id)
                            .where(batch_completions.c.batch_id == batch_id)).first() is not None


def _runs_recorded(store: Store, batch_id: str) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(runs.c.run_id).join(planned_runs, planned_runs.c.run_id == runs.c.run_id)
                                 .where(planned_runs.c.batch_id == batch_id)).scalars())


def test_each_step_is_one_write_transaction_and_the_step_that_ends_a_run_records_it(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    submission_id = _submission(web_store)
    completions: list[str] = []
    monkeypatch.setattr(completion, "complete", lambda store, batch_id: completions.append(batch_id) or True)
    lease = remote.next_run(web_store, actor=ALICE)
    assert lease is not None
    writes_per_step: list[int] = []

    def counted(answer: dict[str, Any]) -> None:
        writes_per_step.append(len(begun))
        begun.clear()

    with _write_transactions(web_store) as begun:
        last = _play(web_store, lease, each_step=counted)
    assert len(writes_per_step) >= 3 and writes_per_step == [1] * len(writes_per_step)
    # that one transaction recorded the run and ended its lease; nothing completed (14 runs to go)
    assert last["done"] and last["status"] == "completed"
    assert RunsRepo(web_store).recorded([lease["run_id"]]) == {lease["run_id"]}
    assert RemoteRepo(web_store).lease(lease["run_id"]) is None
    assert completions == [] and not _completed(web_store, submission_id)
    same_as_stored(web_store, lease["run_id"], in_process(web_store, lease["run_id"], "reference:diligent"))


def test_the_submission_completes_once_after_its_last_run_and_every_run_is_recorded_once(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    submission_id = _submission(web_store)
    real_complete = completion.complete
    completions: list[str] = []

    def counting(store: Store, batch_id: str) -> bool:
        completions.append(batch_id)
        return real_complete(store, batch_id)

    monkeypatch.setattr(completion, "complete", counting)
    played = 0
    while (lease := remote.next_run(web_store, actor=ALICE)) is not None:
        assert completions == []  # not before the last run is recorded
        _play(web_store, lease)
        played += 1
    assert played == 15 and completions == [submission_id]
    assert _completed(web_store, submission_id)
    recorded = _runs_recorded(web_store, submission_id)
    assert len(recorded) == len(set(recorded)) == 15
    assert completion.complete_recorded(web_store) == []  # nothing left for the sweeper


class _Died(BaseException):
    """The server process dies here (nothing after this line runs)."""


def test_a_crash_between_the_last_steps_commit_and_completion_is_completed_by_the_sweep(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    submission_id = _submission(web_store)
    leases = []
    while (lease := remote.next_run(web_store, actor=ALICE)) is not None:
        leases.append(lease)
        if len(leases) == 15:
            break
        _play(web_store, lease)
    last = leases[-1]

    def died(store: Store, batch_id: str) -> bool:
        raise _Died()

    monkeypatch.setattr(completion, "complete", died)
    history: list[dict[str, Any]] = []
    with pytest.raises(_Died):  # the step that records the last run dies before completing
        _play(web_store, last, each_step=history.append)
    monkeypatch.undo()
    # its step is committed: the run is recorded (once), the submission is not complete
    assert RunsRepo(web_store).recorded([last["run_id"]]) == {last["run_id"]}
    assert not _completed(web_store, submission_id)
    assert submission_id in RunsRepo(web_store).completable()
    # a sweep after the first looks only at batches with a run recorded since (0021, indexed)
    assert submission_id in RunsRepo(web_store).completable(utcnow() - timedelta(minutes=1))
    assert submission_id not in RunsRepo(web_store).completable(utcnow() + timedelta(minutes=1))
    # the agent, told nothing, sends its last step again: answered again, applied and recorded once
    steps = RemoteRepo(web_store).steps(last["run_id"])
    final = steps[-1]
    assert final.reply is not None
    again = remote.step(web_store, last["run_id"], final.reply["message"], actor=ALICE, index=final.step)
    assert again["done"] and again["status"] == "completed" and again["step"] == final.step
    assert len(RemoteRepo(web_store).steps(last["run_id"])) == len(steps)
    # the sweeper completes it, and every run is recorded once
    assert completion.complete_recorded(web_store) == [submission_id]
    assert _completed(web_store, submission_id)
    recorded = _runs_recorded(web_store, submission_id)
    assert len(recorded) == len(set(recorded)) == 15


def test_the_pending_count_is_the_claims_own_in_one_query(web_store: Store) -> None:
    """`RemoteRepo.pending` (one count) agrees with `ClaimRepo.n_pending` of each open remote
    submission through leases, a finished run, a released run and a second submission."""
    from assay.store.claims import ClaimRepo

    first = _submission(web_store)
    second = submissions.compose(web_store, "forge", factory=remote.remote_factory(), account="alice", label="two",
                                 limits=Limits(turn_limit=40, time_limit=600.0), actor=account_actor("alice"))
    repo, claims = RemoteRepo(web_store), ClaimRepo(web_store)

    def agrees() -> int:
        found = repo.pending("alice")
        assert found == claims.n_pending(first) + claims.n_pending(second)
        return found

    assert agrees() == 30
    leased = remote.next_run(web_store, actor=ALICE)
    assert leased is not None and leased["pending"] == 29 and agrees() == 29
    _play(web_store, leased)
    assert agrees() == 29
    held = remote.next_run(web_store, actor=ALICE)
    assert held is not None and agrees() == 28
    remote.release(web_store, held["run_id"], actor=ALICE)
    assert agrees() == 29 and repo.pending("bob") == 0


def test_the_sweeper_completes_what_a_window_would_miss_once_it_failed(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep after the first looks at the batches with a run recorded lately; a batch whose
    completion failed is tried again at every sweep, however long ago its runs were recorded."""
    submission_id = _submission(web_store)
    real_complete = completion.complete
    monkeypatch.setattr(completion, "complete", lambda store, batch_id: (_ for _ in ()).throw(RuntimeError("down")))
    while (lease := remote.next_run(web_store, actor=ALICE)) is not None:
        _play(web_store, lease)  # the last run's completion fails: deferred to the sweeper
    workers = Workers(web_store, threads=0, sweep_seconds=None)
    workers.sweep()  # the first sweep looks at every batch; the completion fails again
    assert not _completed(web_store, submission_id)
    monkeypatch.setattr(completion, "complete", real_complete)
    workers._swept_from = utcnow() + timedelta(hours=1)  # its runs are now outside any window
    assert submission_id not in RunsRepo(web_store).completable(workers._swept_from - timedelta(minutes=10))
    workers.sweep()
    assert _completed(web_store, submission_id)


def test_steps_alternating_between_two_workers_play_the_same_run(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """`assay serve --workers 2`: each process keeps its own live steppers, and a run's steps land
    on either. A process whose kept stepper is behind (the other took the steps since) must not
    use it: it replays, and the run is the in-process run all the same."""
    from collections import OrderedDict

    _submission(web_store)
    caches: list[Any] = [OrderedDict(), OrderedDict()]
    turn = [0]

    def other_worker(_answer: Any) -> None:
        turn[0] += 1
        monkeypatch.setattr(remote, "_LIVE", caches[turn[0] % 2])

    monkeypatch.setattr(remote, "_LIVE", caches[0])
    lease = remote.next_run(web_store, actor=ALICE)
    assert lease is not None
    answer = _play(web_store, lease, each_step=other_worker)
    assert answer["done"] and turn[0] >= 4
    same_as_stored(web_store, lease["run_id"], in_process(web_store, lease["run_id"], "reference:diligent"))


def test_a_step_that_finds_no_live_run_replays_it_and_plays_the_same_run(web_store: Store) -> None:
    """Every step goes to a process that has not seen the run (another worker, a restart): each
    replays the run from its stored steps, and the run is the in-process run all the same."""
    _submission(web_store)
    for _ in range(2):
        lease = remote.next_run(web_store, actor=ALICE)
        assert lease is not None

        def forget(_answer: dict[str, Any]) -> None:
            remote._LIVE.clear()

        remote._LIVE.clear()
        _play(web_store, lease, each_step=forget)
        same_as_stored(web_store, lease["run_id"], in_process(web_store, lease["run_id"], "reference:diligent"))


def test_a_step_after_the_process_own_last_step_is_one_statement(web_store: Store) -> None:
    """A process decides a run's next step from what it kept of its own last step of it (the
    stepper, the steps, the lease, the last step's time), without reading the run: the step is
    one statement, the insert that checks the run did not move (issue 26). Only the step that
    ends the run sends more (it records the run)."""
    _submission(web_store)
    lease = remote.next_run(web_store, actor=ALICE)
    assert lease is not None
    sent: list[str] = []

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not statement.startswith(("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT")):
            sent.append(statement)

    per_step: list[list[str]] = []

    def counted(_answer: dict[str, Any]) -> None:
        per_step.append(list(sent))
        sent.clear()

    sa.event.listen(web_store.engine, "before_cursor_execute", on_execute)
    try:
        last = _play(web_store, lease, each_step=counted)
    finally:
        sa.event.remove(web_store.engine, "before_cursor_execute", on_execute)
    assert last["done"] and len(per_step) >= 3
    assert all(len(step) == 1 and step[0].startswith("INSERT INTO remote_steps") for step in per_step[:-1])
    assert len(per_step[-1]) > 1  # the last step recorded the run
    same_as_stored(web_store, lease["run_id"], in_process(web_store, lease["run_id"], "reference:diligent"))


def test_a_kept_run_another_process_moved_on_is_decided_again_from_a_read(
        web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process played step 1 and kept the run; another process took step 2. A step sent
    here without its number is tried as step 2 from what was kept, which the insert refuses (the
    step is taken): the kept stepper is dropped and the step is decided again from the stored
    run, as step 3. The run is the in-process run all the same."""
    from collections import OrderedDict

    _submission(web_store)
    mine: OrderedDict[Any, Any] = OrderedDict()
    monkeypatch.setattr(remote, "_LIVE", mine)
    lease = remote.next_run(web_store, actor=ALICE)
    assert lease is not None
    run_id, agent, history = lease["run_id"], load_agent("reference:diligent")(), list(lease["messages"])
    index: int | None = 1
    for cache, sent_index in ((mine, 1), (OrderedDict(), 2), (mine, None), (mine, 4)):
        monkeypatch.setattr(remote, "_LIVE", cache)
        message = agent(history, lease["tools"])
        answer = remote.step(web_store, run_id, message, actor=ALICE, index=sent_index)
        assert answer["step"] == index and not answer["done"]
        history, index = [*history, message, *answer["messages"]], index + 1
    assert [s.step for s in RemoteRepo(web_store).steps(run_id)] == [1, 2, 3, 4]
    while not answer["done"]:
        message = agent(history, lease["tools"])
        answer = remote.step(web_store, run_id, message, actor=ALICE, index=index)
        history, index = [*history, message, *answer["messages"]], index + 1
    same_as_stored(web_store, run_id, in_process(web_store, run_id, "reference:diligent"))
