"""The small wrongs a first hour hits (issue 29), each refused or said rightly now; in process
(`tests.support.cli.run_main`), on a private SQLite store per test."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.cli import run_main


def _assay(tmp_path: Path, *args: str, expect: int = 0) -> tuple[str, str]:
    code, out, err = run_main([*args, "--db", f"sqlite:///{tmp_path / 'store.db'}"], cwd=tmp_path,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "120"})
    assert code == expect, (args, code, out, err)
    if expect == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("assay: error: "), err
    return out, err


def _count(tmp_path: Path, table: str) -> int:
    with sqlite3.connect(tmp_path / "store.db") as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 - a fixed table name


@pytest.mark.parametrize(("suite", "agent", "fits"), [
    ("academy", "reference:diligent", "steadfast"),
    ("forge", "reference:silent", "diligent"),
])
def test_a_reference_agent_for_another_kit_is_refused_before_anything_runs(
        tmp_path: Path, suite: str, agent: str, fits: str) -> None:
    _out, err = _assay(tmp_path, "run", suite, "--agent", agent, "--trials", "1", expect=2)
    assert "--agent" in err and "kit" in err and fits in err
    assert _count(tmp_path, "runs") == 0 and _count(tmp_path, "batches") == 0
    _assay(tmp_path, "account", "create", "ada")
    _out, err = _assay(tmp_path, "submit", suite, "--agent", agent, "--account", "ada", "--label", "x", expect=2)
    assert "kit" in err and _count(tmp_path, "submissions") == 0
