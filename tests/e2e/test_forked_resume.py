"""A scripted batch played by forked processes survives a kill like any other: the `assay run`
process SIGKILLed mid-batch leaves its stored runs stored and no child behind, and `assay resume`
records every other slot exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .test_cli import ASSAY, REPO, assay, clean_env, ok
from .test_resume import _n_recorded, _recorded_once, _wait_for

pytestmark = pytest.mark.heavy  # runs the `assay` console script in subprocesses


def _processes_naming(text: str) -> list[int]:
    """The processes whose command line holds `text` (a forked child keeps its parent's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile
                continue
    return found


def test_a_killed_forked_batch_loses_nothing_records_nothing_twice_and_leaves_no_child(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'forked.db'}"
    proc = subprocess.Popen([str(ASSAY), "run", "forge", "--agent", "reference:diligent", "--trials", "600",
                             "--workers", "2", "--quiet", "--db", db], cwd=REPO, env=clean_env(None),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _n_recorded(db) >= 256)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    end = time.monotonic() + 30
    while _processes_naming(str(tmp_path)) and time.monotonic() < end:  # the children notice, and leave
        time.sleep(0.2)
    assert _processes_naming(str(tmp_path)) == []
    batch = json.loads(ok(assay("batches", "--json", "--db", db, db_file=None)).out)[0]
    assert batch["status"] == "pending" and 256 <= batch["n_recorded"] < batch["n_planned"] == 3000
    resumed = ok(assay("resume", batch["id"], "--db", db, db_file=None, timeout=300))
    assert "3000/3000 runs recorded, complete" in resumed.out
    assert len(_recorded_once(db, batch["id"])) == 3000
