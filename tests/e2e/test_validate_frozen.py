"""`assay validate` refuses a changed case it can see is already released, and writes nothing.

With a store (`--db`, `ASSAY_DB` or the default file), every case is held to the releases that
pinned it: a frozen case whose checks changed names the suite version that froze it (what `run`
and `suite release` refuse), and a case that differs from what this very suite version pinned is
refused (releases are immutable). Without a store nothing is said about releases, and no store is
made.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from tests.support.forkserver import assay_command

pytestmark = pytest.mark.heavy  # every test here runs `assay` as processes (tests/support/forkserver.py)

FORGE = Path(__file__).resolve().parents[2] / "src/assay/suites/forge"
TABLES = ("scenario_versions", "suite_releases", "release_scenarios", "batches", "runs")


def _assay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*assay_command(), *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


@pytest.fixture
def released(tmp_path: Path) -> tuple[Path, Path, str]:
    """A suite `mini 1.0` of two cases (one frozen), released into a fresh store."""
    suite = tmp_path / "mini"
    suite.mkdir()
    for name, ident in (("second-host.yaml", "mini-second-host"), ("all-quiet.yaml", "mini-all-quiet")):
        text = (FORGE / name).read_text(encoding="utf-8")
        (suite / name).write_text(text.replace(f"id: forge-{name[:-5]}", f"id: {ident}", 1), encoding="utf-8")
    (suite / "suite.yaml").write_text('key: mini\nversion: "1.0"\ntitle: Mini\nlanguage: en\n'
                                      "scenarios: [second-host.yaml, all-quiet.yaml]\n", encoding="utf-8")
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    result = _assay("suite", "release", str(suite), "--db", url)
    assert result.returncode == 0, result.stderr
    return suite, db, url


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_frozen_case_whose_checks_changed_is_refused_naming_the_version_that_froze_it(
        released: tuple[Path, Path, str]) -> None:
    suite, db, url = released
    assert _assay("validate", str(suite), "--db", url).returncode == 0
    before = _counts(db)
    case = suite / "second-host.yaml"
    _edit(case, "weight: 35", "weight: 34")
    _edit(case, "weight: 20", "weight: 21")
    _edit(suite / "suite.yaml", 'version: "1.0"', 'version: "1.1"')  # a new version does not unfreeze it
    line = (f"assay: error: {case}: case mini-second-host is frozen (since 2026-12-01, released in suite mini 1.0) "
            "and its checks changed; a changed check needs a new case id")
    for target in (suite, case):  # the suite, or the one file
        result = _assay("validate", str(target), "--db", url)
        assert result.returncode == 2
        assert result.stderr.splitlines() == [line]
        assert "mini-second-host" not in result.stdout  # a refused case gets no `ok` line
    assert _counts(db) == before, "validating writes nothing"
    # what validate refused, a run refuses too
    run = _assay("run", str(case), "--agent", "reference:idle", "--trials", "1", "--db", url)
    assert run.returncode == 2 and "is frozen (since 2026-12-01)" in run.stderr


def test_a_case_that_differs_from_what_this_suite_version_pinned_is_refused(released: tuple[Path, Path, str]) -> None:
    suite, db, url = released
    before = _counts(db)
    case = suite / "all-quiet.yaml"
    _edit(case, "title: ", "title: Still ")
    result = _assay("validate", str(suite), "--db", url)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"assay: error: {case}: case mini-all-quiet differs from what suite mini 1.0, already "
                           "released, pinned (")
    assert line.endswith("); releases are immutable: give the suite a new version")
    assert _assay("validate", str(case), "--db", url).stderr.splitlines() == [line]  # its suite is beside it
    release = _assay("suite", "release", str(suite), "--db", url)
    assert release.returncode == 2 and "already released and this document differs" in release.stderr
    _edit(suite / "suite.yaml", 'version: "1.0"', 'version: "1.1"')
    result = _assay("validate", str(suite), "--db", url)
    assert result.returncode == 0 and result.stderr == ""
    assert _counts(db) == before


def test_without_a_store_nothing_is_said_of_releases_and_no_store_is_made(
        released: tuple[Path, Path, str], tmp_path: Path) -> None:
    suite, _db, _url = released
    _edit(suite / "second-host.yaml", "weight: 35", "weight: 34")
    _edit(suite / "second-host.yaml", "weight: 20", "weight: 21")
    missing = tmp_path / "elsewhere" / "none.db"
    result = _assay("validate", str(suite), "--db", f"sqlite:///{missing}")
    assert result.returncode == 0, result.stderr
    assert not missing.exists() and not missing.parent.exists()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
    env["XDG_DATA_HOME"] = str(data)
    result = subprocess.run([*assay_command(), "validate", str(suite)], capture_output=True, text=True, timeout=120,
                            check=False, env=env)
    assert result.returncode == 0, result.stderr
    assert not list(data.rglob("*.db")), "the default store was made by validating"
    shutil.rmtree(data, ignore_errors=True)
