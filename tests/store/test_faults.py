"""Store faults cost no batch and say what to do (issue 23, item 5).

- Transient faults (a restart, a killed connection, a locked SQLite) are retried by the store's
  transaction helper, a whole transaction re-run from its start, within a bound; with an injected
  clock and sleep nothing here waits.
- A write that fails for good (a full disk, a read-only store) ends the run writer at once: the
  batch stops, never hangs, and says in one line which batch to resume; `assay resume` then
  finishes it with every run recorded exactly once.

The SQLite faults are real: a store on a 2 MiB tmpfs that fills, and one remounted read-only (the
tests run as root, as CI does, and fail without it). The PostgreSQL ones are in
`tests/store/test_pg_faults.py`, on a server of their own.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from assay.records import RunRecord
from assay.service import completion, execution
from assay.service.execution import RunWriter
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store import open_store
from assay.store.faults import Retry, StoreUnavailable, is_fault, is_transient
from assay.store.runs_repo import RunsRepo
from tests.e2e.test_cli import assay

FORGE = resolve_suite("forge")


class FakeClock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _wrapped(orig: BaseException, kind: type[sa.exc.DBAPIError] = sa.exc.OperationalError) -> sa.exc.DBAPIError:
    return kind("INSERT INTO runs ... (secret parameters)", {"p": "secret"}, orig)  # type: ignore[arg-type]


LOCKED = _wrapped(sqlite3.OperationalError("database is locked"))
FULL = _wrapped(sqlite3.OperationalError("database or disk is full"))
READ_ONLY = _wrapped(sqlite3.OperationalError("attempt to write a readonly database"))
SHUTDOWN = _wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
REFUSED = _wrapped(psycopg.OperationalError("connection failed: Connection refused"))


# -- what is transient, and the bound -------------------------------------------------------------


def test_restarts_kills_and_locks_are_transient_a_full_disk_and_a_read_only_file_are_not() -> None:
    for exc in (LOCKED, SHUTDOWN, REFUSED):
        assert is_fault(exc) and is_transient(exc), exc
    for exc in (FULL, READ_ONLY):
        assert is_fault(exc) and not is_transient(exc), exc
    integrity = _wrapped(sqlite3.IntegrityError("UNIQUE constraint failed"), sa.exc.IntegrityError)
    assert not is_fault(integrity) and not is_transient(integrity)
    assert not is_fault(ValueError("a bug")) and not is_transient(ValueError("a bug"))
    assert is_transient(sa.exc.OperationalError("SELECT 1", None, Exception("x"), connection_invalidated=True))


def test_a_transient_fault_is_tried_again_with_backoff_until_it_passes() -> None:
    clock, calls = FakeClock(), []

    def attempt() -> str:
        calls.append(clock.now)
        if len(calls) < 5:
            raise SHUTDOWN
        return "done"

    assert Retry(30, clock, clock.sleep).call(attempt) == "done"
    assert len(calls) == 5
    assert clock.slept == [0.05, 0.1, 0.2, 0.4]  # doubling pauses


def test_past_the_bound_one_store_unavailable_names_the_cause_and_the_time_waited() -> None:
    clock = FakeClock()

    def attempt() -> None:
        raise REFUSED

    with pytest.raises(StoreUnavailable) as caught:
        Retry(2, clock, clock.sleep).call(attempt)
    assert 2.0 <= clock.now <= 2.0 + 1e-9  # never sleeps past the bound
    fault = caught.value
    assert fault.cause == "connection failed: Connection refused" and fault.waited == 2
    assert "\n" not in fault.line() and "secret" not in fault.line() and "INSERT" not in fault.line()
    told = fault.about("b" * 32, "submission").line()
    assert f"submission {'b' * 32}" in told and f"`assay resume {'b' * 32}`" in told and "retried for 2 s" in told
    assert isinstance(fault.__cause__, sa.exc.OperationalError)  # the traceback, for --debug


def test_a_fault_that_will_not_pass_is_raised_at_once() -> None:
    clock, calls = FakeClock(), []

    def attempt() -> None:
        calls.append(1)
        raise FULL

    with pytest.raises(sa.exc.OperationalError):
        Retry(30, clock, clock.sleep).call(attempt)
    assert calls == [1] and clock.slept == []


def test_an_unusable_store_retry_bound_is_one_refusal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from assay.errors import BadInput

    monkeypatch.setenv("ASSAY_STORE_RETRY", "soon")
    with pytest.raises(BadInput, match="ASSAY_STORE_RETRY must be a number of seconds"):
        open_store(f"sqlite:///{tmp_path / 'a.db'}")


# -- the transaction helper re-runs a whole transaction -------------------------------------------


class _Injected(list):  # type: ignore[type-arg]
    """The statements an injected fault failed; `stop()` removes the fault."""

    def __init__(self, engine: sa.Engine, listener: Any) -> None:
        super().__init__()
        self.engine, self.listener = engine, listener

    def stop(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self.listener)


def _fail_statements(engine: sa.Engine, needle: str, fault: BaseException, times: int) -> _Injected:
    """Make the next `times` statements containing `needle` fail with `fault` (before they run)."""

    def _fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if needle in statement and len(failed) < times:
            failed.append(statement)
            raise fault

    failed = _Injected(engine, _fail)
    sa.event.listen(engine, "before_cursor_execute", _fail)
    return failed


def test_a_batch_survives_transient_faults_on_every_kind_of_statement(store: Any) -> None:
    """Killed connections on the run inserts, the claims and the plan reads: each transaction is
    run again from its start, and every run is recorded exactly once."""
    clock = FakeClock()
    store.retry = Retry(30, clock, clock.sleep)
    fault = LOCKED if store.dialect == "sqlite" else SHUTDOWN
    failed = [_fail_statements(store.engine, needle, fault, 2)
              for needle in ("INSERT INTO runs", "INSERT INTO run_verdicts", "INSERT INTO run_claims",
                             "FROM planned_runs")]
    result = run_suite(FORGE, agent_spec="reference:diligent", trials=4, store=store)
    assert [len(f) for f in failed] == [2, 2, 2, 2] and len(clock.slept) == 8  # every fault met, waited out
    rows = RunsRepo(store).runs_for_batch(result.batch_id, bodies=False)
    assert len(rows) == 20 and all(r.status == "completed" for r in rows)
    with store.engine.connect() as conn:
        per_run = conn.execute(sa.text("SELECT run_id, COUNT(*) FROM run_verdicts GROUP BY run_id")).all()
    assert all(n == 1 for _, n in per_run)
    assert RunsRepo(store).add_completion(result.batch_id)


def test_a_store_down_past_the_bound_stops_the_batch_naming_it_and_resume_finishes_it(store: Any) -> None:
    clock = FakeClock()
    store.retry = Retry(1, clock, clock.sleep)
    fault = LOCKED if store.dialect == "sqlite" else REFUSED
    injected = _fail_statements(store.engine, "INSERT INTO runs", fault, 10**6)
    created: list[str] = []
    with pytest.raises(StoreUnavailable) as caught:
        run_suite(FORGE, agent_spec="reference:diligent", trials=2, store=store,
                  on_created=lambda ident, _n: created.append(ident))
    assert caught.value.batch_id == created[0] and caught.value.waited >= 1
    assert f"`assay resume {created[0]}`" in caught.value.line()
    injected.stop()
    assert RunsRepo(store).unrecorded(created[0]) == 10
    _resume(store, created[0])
    assert RunsRepo(store).unrecorded(created[0]) == 0 and RunsRepo(store).add_completion(created[0])


def test_an_exclusive_lock_held_on_a_sqlite_store_mid_batch_is_waited_out(
        sqlite_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the SQLite file's write lock for a while (a real lock, a real wait:
    the busy timeout shortened to 50 ms, so the retries, not SQLite's own wait, carry it)."""
    import assay.store.db as db

    monkeypatch.setattr(db, "SQLITE_BUSY_TIMEOUT_MS", 50)
    store = open_store(sqlite_store.url)
    locker = sqlite3.connect(sqlite_store.url.removeprefix("sqlite:///"), isolation_level=None,
                             check_same_thread=False)
    retried: list[BaseException] = []
    store.retry = Retry(10, on_retry=retried.append)
    created = threading.Event()
    held = threading.Event()

    def hold() -> None:
        created.wait(10)
        locker.execute("BEGIN EXCLUSIVE")
        held.set()
        time.sleep(0.8)
        locker.execute("COMMIT")

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()

    def on_created(_ident: str, _n: int) -> None:
        created.set()
        held.wait(10)

    try:
        result = run_suite(FORGE, agent_spec="reference:diligent", trials=2, store=store, on_created=on_created)
    finally:
        holder.join(10)
        locker.close()
        store.close()
    assert retried and all(is_transient(exc) for exc in retried)
    assert _recorded_once(sqlite_store.url, result.batch_id) == 10


def _resume(store: Any, batch_id: str) -> None:
    from assay.run.executors import make_executor

    factory, limits = execution.stored_agent(store, batch_id)
    execution.execute_pending(store, batch_id, factory, make_executor(None, 2, factory), limits,
                            execution.stored_scenarios(store, batch_id))
    assert completion.complete(store, batch_id)


# -- the run writer ends at once ----------------------------------------------------------------


class _Failing:
    """A store whose run writes fail for good (a full disk, say) after `ok` writes."""

    url = "sqlite:///failing"
    engine = writer = None  # what `RunsRepo(store)` reads; nothing here connects

    def __init__(self, ok: int = 0) -> None:
        self.ok, self.writes = ok, 0

    def transaction(self, _body: Any, *, write: bool = True) -> Any:
        if not write:
            return set()  # `RunsRepo.recorded`: nothing is recorded
        self.writes += 1  # `RunsRepo.add_runs`: one write transaction per call
        if self.writes > self.ok:
            raise FULL
        return None


def _records(n: int) -> list[RunRecord]:
    from assay.run.engine import Limits, open_episode
    from assay.run.drivers import play_sync
    from assay.agents.loader import load_agent

    case = FORGE.scenarios[0]
    planned = [p for p in batches_plan(n) if p.scenario_hash == case.content_hash][:n]
    factory = load_agent("reference:idle")
    return [play_sync(open_episode(case, p, Limits()), factory) for p in planned]


def batches_plan(n: int) -> list[Any]:
    from assay.service.runs import plan_batch

    return plan_batch(FORGE, n, 0)


def _within(seconds: float, call: Any) -> BaseException | None:
    """Run `call()` in a thread; fail the test if it has not ended within `seconds` (a hang)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the writer hung"
    return outcome[0]


def test_a_final_flush_that_fails_ends_close_at_once_with_the_fault() -> None:
    """The hang on main: the writer's last flush failed and it then waited for a second end marker."""
    records = _records(3)
    writer = RunWriter(_Failing(), [FORGE.scenarios[0]])
    for record in records:
        writer(record, 1)
    fault = _within(5, writer.close)
    assert fault is FULL or (isinstance(fault, sa.exc.OperationalError) and "disk is full" in str(fault))


def test_a_writer_that_failed_with_the_queue_full_fails_the_next_hand_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execution, "FLUSH_RUNS", 1)  # a queue of 4, a flush per run
    record = _records(1)[0]
    store = _Failing(ok=1)
    writer = RunWriter(store, [FORGE.scenarios[0]])

    def hand_over() -> None:
        for _ in range(100):
            writer(record, 1)

    fault = _within(5, hand_over)
    assert isinstance(fault, sa.exc.OperationalError)
    assert isinstance(_within(5, writer.close), sa.exc.OperationalError)


# -- real SQLite faults: a full disk, a read-only store -------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only: the tests run as root, and fail rather than skip without it)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    assert done.returncode == 0, f"cannot mount a tmpfs (these tests need root): {done.stderr.strip()}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def _remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


@pytest.fixture(scope="module")
def bootstrapped_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bootstrapped SQLite store (as every command first makes it), copied into each test's fs."""
    path = tmp_path_factory.mktemp("template") / "assay.db"
    from assay.service.releases import bootstrap

    with open_store(f"sqlite:///{path}") as store:
        bootstrap(store)
    return path


def _recorded_once(url: str, batch_id: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT p.run_id, COUNT(r.run_id) FROM planned_runs p LEFT JOIN runs r ON r.run_id = p.run_id "
                "WHERE p.batch_id = :b GROUP BY p.run_id"), {"b": batch_id}).all()
    finally:
        engine.dispose()
    assert all(n <= 1 for _, n in rows)
    return sum(n for _, n in rows)


@pytest.mark.heavy  # starts a process
def test_a_filesystem_that_fills_mid_batch_stops_it_in_one_line_and_resume_finishes_it(
        small_fs: Path, bootstrapped_file: Path) -> None:
    shutil.copy(bootstrapped_file, small_fs / "assay.db")
    url = f"sqlite:///{small_fs / 'assay.db'}"
    for attempt in range(1):  # main hung in 3 tries of 5 (the writer unit tests above pin the cause)
        started = time.monotonic()
        result = assay("run", "forge", "--agent", "reference:diligent", "--trials", "150", "--quiet",
                       "--db", url, db_file=None, timeout=60)
        assert time.monotonic() - started < 60
        assert result.code == 75, str(result)
        assert "Traceback" not in result.err, result.err
        lines = [line for line in result.err.splitlines() if line.strip()]
        fault = [line for line in lines if line.startswith("assay: error:")]
        assert len(fault) == 1 and "disk is full" in fault[0], result.err
        batch_id = fault[0].split("`assay resume ")[1].split("`")[0]
        assert f"batch {batch_id}" in fault[0]
        _remount(small_fs, "size=256m")
        resumed = assay("resume", batch_id, "--quiet", "--json", "--db", url, db_file=None, timeout=60)
        assert resumed.code == 0, str(resumed)
        assert _recorded_once(url, batch_id) == 750
        if attempt < 1:  # fill it again, from where it is now
            used = sum(f.stat().st_size for f in small_fs.iterdir())
            _remount(small_fs, f"size={used // 1024 + 512}k")


@pytest.mark.heavy  # starts a process
def test_a_read_only_store_stops_the_batch_in_one_line_and_debug_adds_the_traceback(
        tmp_path: Path, bootstrapped_file: Path) -> None:
    """A store file opened read-only (as root, file modes do not stop a write: SQLite's own
    read-only mode does): the first write fails, at once and in one line, storing nothing."""
    shutil.copy(bootstrapped_file, tmp_path / "assay.db")
    url = f"sqlite:///file:{tmp_path / 'assay.db'}?mode=ro&uri=true"
    argv = ("run", "forge", "--agent", "reference:diligent", "--trials", "2", "--quiet", "--db", url)
    result = assay(*argv, db_file=None, timeout=60)
    assert result.code == 75, str(result)
    assert "Traceback" not in result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines == ["assay: error: the store failed: attempt to write a readonly database (run with --debug or "
                     "ASSAY_DEBUG=1 for the traceback)"], result.err
    debugged = assay("--debug", *argv, db_file=None, timeout=60)
    assert debugged.code == 75 and "Traceback" in debugged.err, str(debugged)
    assert debugged.err.rstrip().splitlines()[-1] == "assay: error: the store failed: attempt to write a readonly database"
