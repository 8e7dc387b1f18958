"""A batch survives a kill: real `assay` processes SIGKILLed mid-batch, then resumed — twice at once.

On SQLite and on PostgreSQL: every planned (scenario, rep) ends recorded exactly once, the
submission completes, and its figures are those an unbroken submission of the same agent gets.
Also: Ctrl-C and SIGTERM stop a batch with 130 and 143, leaving its unplayed slots to `resume`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from .test_cli import ASSAY, REPO, assay, clean_env, ok

pytestmark = pytest.mark.heavy  # every test here runs the `assay` console script in subprocesses

SLOW = f"python:{Path(__file__).parent / 'agents' / 'slow.py'}:SlowDiligent"


def _interruptible() -> None:
    """Ctrl-C as a terminal sends it: a runner started in the background by a non-interactive shell
    (`cmd &`) ignores SIGINT, and an ignored signal stays ignored across exec, so `assay` would never
    see the one this test sends (Python keeps SIGINT ignored when it starts ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args: str, db: str, pause: str = "0.05") -> subprocess.Popen[str]:
    # the slow agent is sandboxed: it sees ASSAY_TEST_PAUSE only when it is named (and a resume
    # passes on the names its batch was stored with)
    return subprocess.Popen([str(ASSAY), *args, "--agent-env", "ASSAY_TEST_PAUSE", "--db", db], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=clean_env(None, ASSAY_TEST_PAUSE=pause),
                            preexec_fn=_interruptible)


def _listing(db: str, account: str) -> dict | None:
    rows = json.loads(ok(assay("submissions", "--account", account, "--json", "--db", db, db_file=None)).out)
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def _n_recorded(db: str) -> int:
    """Runs stored so far, read behind the CLI's back (cheaper to poll than a CLI process)."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar_one())
    except sa.exc.OperationalError:  # not created yet
        return 0
    finally:
        engine.dispose()


def _wait_for(predicate, seconds: float = 60.0) -> None:  # noqa: ANN001
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail("timed out waiting")


def _recorded_once(db: str, submission_id: str) -> list[tuple[str, int]]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT p.case_id, p.trial, COUNT(r.run_id) FROM planned_runs p LEFT JOIN runs r ON r.run_id = p.run_id "
                "WHERE p.batch_id = :b GROUP BY p.case_id, p.trial"), {"b": submission_id}).all()
    finally:
        engine.dispose()
    assert all(n == 1 for _, _, n in rows), rows
    return sorted((c, t) for c, t, _ in rows)


def _figures(view: dict) -> dict:
    return {k: view[k] for k in ("status", "n_planned", "n_recorded", "n_scored", "pass_rate", "consistency",
                                 "false_success_rate", "objective_met_rate")}


def test_a_killed_submission_is_finished_by_two_resumes_at_once(db_url: str) -> None:
    for account in ("killed", "whole"):
        ok(assay("account", "create", account, "--db", db_url, db_file=None))
    proc = _start("submit", "forge", "--agent", SLOW, "--account", "killed", "--label", "slow", "--workers", "1",
                  db=db_url)
    try:
        _wait_for(lambda: _n_recorded(db_url) >= 3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    first_err = proc.stderr.read() if proc.stderr else ""
    stopped = _listing(db_url, "killed")
    submission_id = stopped["id"]
    assert f"submission {submission_id}" in first_err  # announced before the first run
    assert stopped["status"] == "pending" and 3 <= stopped["n_recorded"] < stopped["n_planned"] == 15

    resumes = [_start("resume", submission_id[:10], "--workers", "2", db=db_url, pause="0.01") for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in resumes]
    for p, (out, err) in zip(resumes, outputs):
        assert p.returncode == 0, (out, err)
        assert "Traceback" not in err

    done = _listing(db_url, "killed")
    assert done["status"] == "complete"
    assert done["n_recorded"] == done["n_planned"] == done["n_scored"] == 15
    assert len(_recorded_once(db_url, submission_id)) == 15

    ok(assay("submit", "forge", "--agent", SLOW, "--agent-env", "ASSAY_TEST_PAUSE", "--account", "whole",
             "--label", "slow", "--db", db_url,
             db_file=None, ASSAY_TEST_PAUSE="0"))
    whole = _listing(db_url, "whole")
    resumed_view = json.loads(ok(assay("results", submission_id, "--json", "--db", db_url, db_file=None)).out)
    whole_view = json.loads(ok(assay("results", whole["id"], "--json", "--db", db_url, db_file=None)).out)
    assert _figures(resumed_view) == _figures(whole_view)

    again = ok(assay("resume", submission_id, "--db", db_url, db_file=None))  # nothing left: nothing played twice
    assert "15/15 runs recorded, complete" in again.out
    assert len(_recorded_once(db_url, submission_id)) == 15


def test_a_resume_refuses_another_agent(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    proc = _start("run", "forge", "--agent", SLOW, "--trials", "4", "--workers", "1", db=db)
    _wait_for(lambda: _n_recorded(db) >= 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    batch = json.loads(ok(assay("batches", "--json", "--db", db, db_file=None)).out)[0]
    assert batch["status"] == "pending"
    refused = assay("resume", batch["id"], "--agent", "reference:hasty", "--db", db, db_file=None)
    assert refused.code == 2 and "is not the agent this batch was planned for" in refused.err
    assert json.loads(ok(assay("batches", "--json", "--db", db, db_file=None)).out)[0] == batch  # nothing stored
    # the latest *finished* batch is what `results` shows by default: there is none yet
    assert "no finished batches" in assay("results", "--db", db, db_file=None).err
    ok(assay("resume", batch["id"], "--agent", SLOW, "--db", db, db_file=None, ASSAY_TEST_PAUSE="0"))
    finished = json.loads(ok(assay("batches", "--json", "--db", db, db_file=None)).out)[0]
    assert finished["status"] == "complete" and finished["n_recorded"] == finished["n_planned"] == 20


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_stops_the_batch_cleanly_and_leaves_the_rest_pending(tmp_path: Path, sig: int,
                                                                          code: int) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    proc = _start("run", "forge", "--agent", SLOW, "--trials", "20", "--workers", "2", db=db)
    _wait_for(lambda: _n_recorded(db) >= 2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (out, err)
    assert "Traceback" not in err
    batch = json.loads(ok(assay("batches", "--json", "--db", db, db_file=None)).out)[0]
    assert "interrupted" in err and f"assay resume {batch['id']}" in err
    assert batch["status"] == "pending" and 2 <= batch["n_recorded"] < batch["n_planned"] == 100
    # the slots this process held are free at once: a resume plays exactly what is left
    resumed = ok(assay("resume", batch["id"], "--workers", "4", "--db", db, db_file=None, ASSAY_TEST_PAUSE="0"))
    assert "100/100 runs recorded, complete" in resumed.out


def test_fail_under_fails_a_pipeline_only_below_the_rate(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    below = assay("run", "forge", "--agent", "reference:hasty", "--trials", "1", "--fail-under", "0.9", "--quiet",
                  "--db", db, db_file=None)
    assert below.code == 1 and "is below --fail-under 0.9" in below.err
    assert "batch " in below.out  # the batch ran and was stored all the same
    ok(assay("run", "forge", "--agent", "reference:diligent", "--trials", "1", "--fail-under", "0.9", "--db", db,
             db_file=None))
    bad = assay("run", "forge", "--agent", "reference:diligent", "--fail-under", "2", "--db", db, db_file=None)
    assert bad.code == 2
