"""Frozen means frozen: changed checks under a frozen case id are refused, and nothing is stored."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from tests.support.forkserver import assay_command

pytestmark = pytest.mark.heavy  # every test here runs `assay` as processes (tests/support/forkserver.py)

CASE = Path(__file__).resolve().parents[2] / "src/assay/suites/forge/second-host.yaml"


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]  # noqa: S608 - fixed names
                for t in ("scenario_versions", "batches", "planned_runs", "runs", "check_outcomes")}


def _run(db: Path, case: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASSAY_DB": f"sqlite:///{db}"}
    return subprocess.run([*assay_command(), "run", str(case), "--agent", "reference:idle", "--trials", "1"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("edit, refused", [
    (lambda t: t.replace("weight: 35", "weight: 34").replace("weight: 20", "weight: 21"), True),
    (lambda t: t.replace("description: The security team was told.", "description: Security heard."), True),
    (lambda t: t.replace("Contain the incident", "Contain this incident"), False),  # briefing only: new version
])
def test_changed_checks_of_a_frozen_case_are_refused(tmp_path: Path, edit, refused: bool) -> None:  # noqa: ANN001
    db = tmp_path / "store.db"
    assert _run(db, CASE).returncode == 0
    before = _counts(db)
    changed = tmp_path / "second-host.yaml"
    changed.write_text(edit(CASE.read_text(encoding="utf-8")), encoding="utf-8")
    result = _run(db, changed)
    if refused:
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "is frozen (since 2026-12-01)" in lines[0] and "new case id" in lines[0], result.stderr
        assert _counts(db) == before
    else:
        assert result.returncode == 0, result.stderr
        after = _counts(db)
        assert after["scenario_versions"] == before["scenario_versions"] + 1


def test_a_frozen_draft_run_ad_hoc_binds_nothing_until_released(tmp_path: Path) -> None:
    """`assay run FILE` of a draft records its version (it can be replayed), but the frozen rule
    binds from the case's first release, so the author may still fix its checks."""
    db = tmp_path / "store.db"
    draft = tmp_path / "draft.yaml"
    draft.write_text(CASE.read_text(encoding="utf-8").replace("id: forge-second-host", "id: draft-second-host", 1),
                     encoding="utf-8")
    assert _run(db, draft).returncode == 0
    draft.write_text(draft.read_text(encoding="utf-8").replace("weight: 35", "weight: 34").replace(
        "weight: 20", "weight: 21"), encoding="utf-8")
    second = _run(db, draft)
    assert second.returncode == 0, second.stderr
    with sqlite3.connect(db) as conn:
        versions = conn.execute("SELECT version FROM scenario_versions WHERE case_id = 'draft-second-host' "
                                "ORDER BY version").fetchall()
    assert versions == [(1,), (2,)]
