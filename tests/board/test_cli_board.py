"""The real `assay` console script: release → account → submit → board, and every refusal.

Each test drives the console script's `main` against a private store on both backends (the
`db_url` fixture), and reads back only what it printed or wrote: in this process (no interpreter
start-up per call), and in real subprocesses for a submission to a database nothing created yet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.cli import run_main

from ._support import AGENTS, edit_scenario, mini_suite, set_version

REPO = Path(__file__).resolve().parents[2]


def _console_script() -> Path:
    beside = Path(sys.executable).parent / "assay"
    if beside.exists():
        return beside
    found = shutil.which("assay")
    return Path(found) if found else REPO / ".venv" / "bin" / "assay"


ASSAY = _console_script()
CRASH_ONCE = f"python:{AGENTS}:CrashOnce"


@dataclass(frozen=True)
class Done:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class Cli:
    """`assay ARGS --db URL`, as the console script runs it: exit code, stdout and stderr.

    In this process by default (`assay.cli.main` with the arguments, the output captured; `main`
    closes every store it opened), which spares each call an interpreter and the package's
    imports; `real=True` runs the console script itself in a subprocess. Both go through the
    same `main`: the exit codes, refusals and output are the console script's.
    """

    def __init__(self, db_url: str, cwd: Path, *, real: bool = False) -> None:
        self.db_url = db_url
        self.cwd = cwd
        self.real = real

    def __call__(self, *args: str, expect: int = 0) -> Done:
        done = self._subprocess(args) if self.real else self._in_process(args)
        assert done.code == expect, (args, done)
        if expect == 2:
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("assay: error: "), done.stderr
            assert "Traceback" not in done.stderr
        return done

    def _subprocess(self, args: tuple[str, ...]) -> Done:
        env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
        proc = subprocess.run([str(ASSAY), *args, "--db", self.db_url], cwd=self.cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def _in_process(self, args: tuple[str, ...], *, db: bool = True) -> Done:
        env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
        return Done(*run_main([*args, *(("--db", self.db_url) if db else ())], cwd=self.cwd, env=env))

    def refused(self, *args: str) -> str:
        return self(*args, expect=2).stderr.strip()

    def counts(self) -> dict[str, int]:
        engine = sa.create_engine(self.db_url)
        try:
            with engine.connect() as conn:
                return {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                        for t in sa.inspect(conn).get_table_names()}
        finally:
            engine.dispose()


@pytest.fixture
def cli(db_url: str, tmp_path: Path, templates: Any) -> Cli:
    """The CLI on a store as the first command leaves it (migrated, built-in suites released),
    copied from the session's template rather than made again."""
    templates.copy_into(db_url, "bootstrapped")
    return Cli(db_url, tmp_path)


@pytest.fixture
def real_cli(db_url: str, tmp_path: Path) -> Cli:
    """The console script itself, in subprocesses (for the walk that proves it, from nothing)."""
    return Cli(db_url, tmp_path, real=True)


def _submit(cli: Cli, *extra: str, agent: str = "reference:diligent", account: str = "alice",
            label: str = "dil", key: str = "mini") -> dict[str, Any]:
    out = cli.cwd / f"sub-{len(list(cli.cwd.glob('sub-*.json')))}.json"
    cli("submit", key, "--agent", agent, "--account", account, "--label", label, "--output", str(out), *extra)
    return json.loads(out.read_text(encoding="utf-8"))


def test_release_submit_board_card_end_to_end(cli: Cli, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    first = cli("suite", "release", str(root), "--json").json()
    assert first["created"] is True and [s["version"] for s in first["scenarios"]] == [1, 1]
    assert cli("suite", "release", str(root), "--json").json()["created"] is False

    edit_scenario(root)
    message = cli.refused("suite", "release", str(root))
    assert "mini 1.0 is already released" in message and "new version" in message
    set_version(root, "1.1")
    second = cli("suite", "release", str(root), "--json").json()
    assert second["scenarios"][0]["version"] == 2
    old_prefix, new_prefix = first["scenarios"][0]["hash_prefix"], second["scenarios"][0]["hash_prefix"]
    assert old_prefix != new_prefix

    versions = cli("suite", "versions", "mini", "--json").json()
    assert [v["version"] for v in versions] == ["1.0", "1.1"]
    assert cli("suite", "show", "mini", "--version", "1.0", "--json").json()["scenarios"][0]["hash"].startswith(old_prefix)
    listed = cli("suite", "list", "--json").json()
    assert {("mini", "1.0"), ("mini", "1.1"), ("forge", "1.0")} <= {(r["key"], r["version"]) for r in listed}

    old_board = cli("board", "mini", "--version", "1.0", "--json").json()
    new_board = cli("board", "mini", "--json").json()
    assert old_board["provenance"]["scenarios"][0]["hash_prefix"] == old_prefix
    assert new_board["provenance"]["scenarios"][0]["hash_prefix"] == new_prefix
    assert new_board["suite"]["version"] == "1.1" and [v["version"] for v in new_board["versions"]] == ["1.1", "1.0"]
    old_card, new_card = cli("card", "mini", "--version", "1.0").stdout, cli("card", "mini").stdout
    assert old_prefix in old_card and new_prefix not in old_card
    assert new_prefix in new_card and old_prefix not in new_card
    assert new_card.startswith("# Eval card") and "## Known limitations" in new_card and "judge-model-1" in new_card

    cli("account", "create", "alice", "--public-handle", "Alice")
    view = _submit(cli, "--publish", "--play-model", "scripted")
    assert {"id", "suite", "status", "leaderboard_class", "published", "runs", "pass_rate", "n_runs"} <= set(view)
    assert (view["suite"], view["status"], view["leaderboard_class"], view["published"]) == (
        {"key": "mini", "version": "1.1", "release_hash": second["release_hash"]}, "complete", "platform", True)
    assert len(view["runs"]) == 4
    assert {"run_id", "scenario", "rep", "seed", "status", "participation_gated", "score", "passed"} <= set(view["runs"][0])

    text = cli("board", "mini", "--json").stdout
    shown = json.loads(text)["entries"]
    assert [(e["submission_id"], e["rank"], e["public_handle"], e["model_provenance"]) for e in shown] == [
        (view["id"], 1, "Alice", "self_reported")]
    for run in view["runs"]:
        assert str(run["seed"]) not in text
    assert "seed" not in text.lower()
    assert "Alice" in cli("board", "mini").stdout

    cli("account", "revoke-handle", "alice")
    assert cli("board", "mini", "--json").json()["entries"] == []


def test_refusals_are_one_line_and_store_nothing(cli: Cli, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    cli("suite", "release", str(root))
    cli("account", "create", "alice", "--public-handle", "Alice")
    cli("account", "create", "bob")
    for _ in range(3):
        _submit(cli, agent="reference:idle")
    before = cli.counts()
    assert "already has 3 submission(s) to mini 1.0" in cli.refused(
        "submit", "mini", "--agent", "reference:idle", "--account", "alice", "--label", "x")
    assert "--publish: publishing needs a public handle" in cli.refused(
        "submit", "mini", "--agent", "reference:idle", "--account", "bob", "--label", "x", "--publish")
    assert "no such account" in cli.refused(
        "submit", "mini", "--agent", "reference:idle", "--account", "ghost", "--label", "x")
    assert "no released suite 'nope'" in cli.refused(
        "submit", "nope", "--agent", "reference:idle", "--account", "bob", "--label", "x")
    assert "unknown agent kind" in cli.refused(
        "submit", "mini", "--agent", "magic:x", "--account", "bob", "--label", "x")
    assert "only the suite owner" in cli.refused(
        "submit", "mini", "--agent", "reference:idle", "--account", "bob", "--label", "x", "--baseline")
    assert "is taken" in cli.refused("account", "set-handle", "bob", "alice")
    assert "no public handle to revoke" in cli.refused("account", "revoke-handle", "bob")
    assert "not valid JSON" in cli.refused("config", "set", "submission_cap", "{nope")
    assert "unknown config key" in cli.refused("config", "set", "nope", "{}")
    assert "not an ISO 8601" in cli.refused("era", "add", "e1", "--from", "soon", "--reason", "r")
    assert "no such submission" in cli.refused("unpublish", "f" * 32)
    assert "no such submission" in cli.refused("note", "f" * 32, "text")
    assert "no released suite 'nope'" in cli.refused("board", "nope")
    assert "no released suite 'nope'" in cli.refused("card", "nope")
    assert cli.counts() == before


def test_incomplete_byok_and_the_owner_operations(cli: Cli, tmp_path: Path,
                                                  clock_behind: Callable[[], datetime]) -> None:
    cli("suite", "release", str(mini_suite(tmp_path / "mini")))
    cli("account", "create", "alice", "--public-handle", "Alice")

    # one sandboxed worker plays every run, so exactly one run (its process's first) crashes
    crashed = _submit(cli, "--publish", "--workers", "1", agent=CRASH_ONCE, label="wobbly")
    assert (crashed["status"], crashed["published"], crashed["rank"]) == ("incomplete", False, None)
    assert crashed["n_runs"] == 4 and crashed["pass_rate"] == 0.75  # the owner still sees aggregates
    assert [r["status"] for r in crashed["runs"]].count("crashed") == 1

    byok = _submit(cli, "--publish", "--byok", label="own-key")
    assert (byok["status"], byok["leaderboard_class"], byok["published"], byok["rank"]) == (
        "complete", "self_hosted_facilitator", True, None)
    shown = cli("board", "mini", "--json").json()["entries"]
    assert [(e["submission_id"], e["rank"]) for e in shown] == [(byok["id"], None)]

    cli("note", byok["id"][:10], "one rep ran long")
    assert cli("board", "mini", "--json").json()["entries"][0]["variance_note"] == "one rep ran long"
    cli("unpublish", byok["id"])
    assert cli("board", "mini", "--json").json()["entries"] == []
    assert "is not published" in cli.refused("unpublish", byok["id"])

    cli("config", "set", "academy_eval_participation", '{"min_player_messages": 3, "min_actions_per_turn": 0.5}')
    got = cli("config", "get", "academy_eval_participation").json()
    assert got["value"] == {"min_player_messages": 3, "min_actions_per_turn": 0.5} and len(got["history"]) == 1
    assert set(cli("config", "get").json()) == {
        "academy_eval_safety_variance", "academy_eval_participation", "academy_eval_measurement_era",
        "submission_cap", "panel_quorum"}

    assert "before a submission already finalised" in cli.refused(
        "era", "add", "2026-a", "--from", "2020-01-01", "--reason", "back-dated")
    # from now on: after every finalised submission ("now" by the store's clock, already past by
    # the database's: see `clock_behind`)
    cli("era", "add", "2026-a", "--from", clock_behind().isoformat(), "--reason", "first boundary")
    eras = cli("era", "list", "--json").json()
    assert [(e["name"], e["current"]) for e in eras] == [("2026-a", True)]
    assert re.search(r"\* 2026-a", cli("era", "list").stdout)
    assert cli("config", "get", "academy_eval_measurement_era").json()["value"]["eras"][0]["name"] == "2026-a"


def test_submit_forge_works_on_a_fresh_database(real_cli: Cli) -> None:
    cli = real_cli  # the console script itself, in subprocesses, from a database nothing created yet
    cli("account", "create", "alice", "--public-handle", "Alice")
    view = _submit(cli, "--publish", key="forge")
    assert view["suite"]["key"] == "forge" and len(view["runs"]) == 15 and view["status"] == "complete"
    board = cli("board", "forge", "--json").json()
    assert board["entries"][0]["submission_id"] == view["id"] and board["entries"][0]["rank"] == 1
    assert "forge-all-quiet" in cli("card", "forge").stdout


def test_board_limit_and_recompute(cli: Cli, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    cli("suite", "release", str(root))
    cli("account", "create", "alice", "--public-handle", "Alice")
    cli("account", "create", "bob", "--public-handle", "Bob")
    first = _submit(cli, "--publish")
    _submit(cli, "--publish", account="bob", agent="reference:idle", label="idle")
    whole = cli("board", "mini", "--json").json()
    page = cli("board", "mini", "--limit", "1", "--json").json()
    assert page["entries"] == whole["entries"][:1] and page["page"]["next_cursor"] is not None
    assert whole["entries"][0]["submission_id"] == first["id"]
    assert cli("board", "--recompute", "--json").json() == {"entries": 2, "differences": []}
    engine = sa.create_engine(cli.db_url)
    try:
        with engine.begin() as conn:  # the derived table loses a row: recompute says so and restores it
            conn.execute(sa.text("DELETE FROM entry_figures WHERE submission_id = :s"), {"s": first["id"]})
    finally:
        engine.dispose()
    said = cli("board", "--recompute").stdout
    assert f"{first['id']}: * was null" in said and "1 differed from what was stored (now replaced)" in said
    assert cli("board", "mini", "--json").json() == whole
    assert "suite key" in cli.refused("board")
