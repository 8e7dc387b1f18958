"""PostgreSQL faults under a real `assay run`: a fast restart, terminated backends, a stop longer
than the retry bound (issue 23, item 5). On a server this module owns (`tests/support/own_pg.py`).

A restart or a killed connection costs the batch nothing (exit 0, every run recorded once); a
store gone for longer than `--store-retry` stops it in one line naming the batch and `assay
resume`, which then finishes it with no run lost or duplicated.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.e2e.test_cli import ASSAY, REPO, assay, clean_env
from tests.support.own_pg import OwnPg, own_pg

SLOW = f"python:{REPO / 'tests' / 'e2e' / 'agents' / 'slow.py'}:SlowDiligent"
TRIALS = 5  # 25 runs of forge


@pytest.fixture(scope="module")
def server() -> Iterator[OwnPg]:
    with own_pg() as pg:
        # every command opens (migrates, bootstraps) the store first: done once, into a template
        import psycopg

        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute('CREATE DATABASE "template_faults"')
        done = assay("batches", "--db", pg.url("template_faults"), db_file=None, timeout=120)
        assert done.code == 0, str(done)
        yield pg


@pytest.fixture
def database(server: OwnPg) -> Iterator[str]:
    import psycopg

    name = f"faults_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "template_faults"')
    yield name


def _start(url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(ASSAY), "run", "forge", "--agent", SLOW, "--trials", str(TRIALS), "--workers", "2",
                             "--agent-env", "ASSAY_TEST_PAUSE", "--quiet", "--db", url, *extra], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=clean_env(None, ASSAY_TEST_PAUSE="0.01"))


def _counts(url: str) -> tuple[int, int, int]:
    """(runs recorded, planned slots recorded more than once, completed batches), behind the CLI's back."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            recorded = conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar_one()
            twice = conn.execute(sa.text("SELECT COUNT(*) FROM (SELECT run_id FROM run_verdicts GROUP BY run_id "
                                         "HAVING COUNT(*) > 1) t")).scalar_one()
            complete = conn.execute(sa.text("SELECT COUNT(*) FROM batch_completions")).scalar_one()
        return int(recorded), int(twice), int(complete)
    except sa.exc.OperationalError:
        return 0, 0, 0
    finally:
        engine.dispose()


def _until(url: str, runs: int, proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + 60
    while _counts(url)[0] < runs:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the batch did not get going"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[str], seconds: float = 60) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the batch hung")
    return proc.returncode, err


def test_a_fast_restart_and_killed_connections_mid_batch_cost_nothing(server: OwnPg, database: str) -> None:
    url = server.url(database)
    proc = _start(url)
    _until(url, 5, proc)
    assert server.terminate(database) >= 1  # the batch's pooled connections, killed
    _until(url, 10, proc)
    assert proc.poll() is None and _counts(url)[0] < 5 * TRIALS  # mid-batch
    server.restart()  # pg_ctl restart -m fast
    code, err = _finish(proc)
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err, err
    assert _counts(url) == (5 * TRIALS, 0, 1)  # every run recorded once, the batch complete


def test_a_stop_longer_than_the_bound_stops_the_batch_in_one_line_and_resume_finishes_it(
        server: OwnPg, database: str) -> None:
    url = server.url(database)
    proc = _start(url, "--store-retry", "1")
    _until(url, 5, proc)
    server.stop()
    try:
        stopped = time.monotonic()
        code, err = _finish(proc, 30)
        assert time.monotonic() - stopped < 15  # the bound (1 s) and a connect attempt, not the default 30 s
    finally:
        server.start()
    assert code == 75, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("assay: error: the store failed: "), err
    assert "retried for 1 s" in lines[0]
    batch_id = lines[0].split("`assay resume ")[1].split("`")[0]
    assert f"batch {batch_id}" in lines[0]
    recorded, twice, _ = _counts(url)
    assert 5 <= recorded < 5 * TRIALS and twice == 0
    resumed = assay("resume", batch_id, "--quiet", "--json", "--db", url, db_file=None, timeout=120,
                    ASSAY_TEST_PAUSE="0")
    assert resumed.code == 0 and "Traceback" not in resumed.err, str(resumed)
    assert _counts(url) == (5 * TRIALS, 0, 1)
