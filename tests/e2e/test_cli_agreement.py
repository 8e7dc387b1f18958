"""`assay agreement` as a user runs it: the real CLI on a SQLite file holding two academy
submissions scored by the rules judge and panel runs linked to some of their runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from assay.service import agreement, releases
from assay.service.actors import OPERATOR
from assay.store import open_store
from tests.service.test_agreement import _build
from tests.support.forkserver import assay_command

pytestmark = pytest.mark.heavy  # every test here runs `assay` as processes (tests/support/forkserver.py)



def _cli(db: str, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
    done = subprocess.run([*assay_command(), *args, "--db", db], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == expect, (args, done.stdout, done.stderr)
    if expect == 2:
        assert done.stderr.startswith("assay: error: ") and len(done.stderr.strip().splitlines()) == 1
    return done


def test_agreement_prints_a_table_or_one_json_document_and_refuses_an_unknown_suite(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    store = open_store(db)
    try:
        releases.bootstrap(store)
        _build(store)
        expected = agreement.agreement(store, "academy", actor=OPERATOR)
    finally:
        store.close()
    as_json = _cli(db, "agreement", "academy", "--json")
    assert json.loads(as_json.stdout) == expected and as_json.stderr == ""
    table = _cli(db, "agreement", "academy", "--version", "1.2").stdout
    assert "academy 1.2" in table and "rules judge" in table
    for pair in expected["pairs"]:
        assert pair["trait"] in table and pair["category"] in table
        if pair["spearman"] is not None:
            assert f"{pair['spearman']:.2f}" in table
    forge = _cli(db, "agreement", "forge")
    assert "maps no trait to a panel category" in forge.stdout
    assert "no released suite 'nosuch'" in _cli(db, "agreement", "nosuch", expect=2).stderr
    assert "--version" in _cli(db, "agreement", "academy", "--version", "9.9", expect=2).stderr
