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


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one listed forge entry: (its directory, the submission id)."""
    root = tmp_path_factory.mktemp("published")
    _assay(root, "account", "create", "ada", "--public-handle", "Ada")
    out, _err = _assay(root, "submit", "forge", "--agent", "reference:diligent", "--account", "ada", "--label", "d",
                       "--publish", "-q")
    return root, out.split()[1]


def test_quiet_submit_prints_only_the_id_and_its_status(published: tuple[Path, str]) -> None:
    root, sid = published
    out, _err = _assay(root, "results", sid, "--json")
    assert len(sid) == 32 and sid in out


def test_compare_refuses_a_submission_with_itself(published: tuple[Path, str]) -> None:
    root, sid = published
    _out, err = _assay(root, "compare", sid, sid[:10], expect=2)
    assert "both name submission" in err and sid in err


def test_an_entry_is_found_by_a_unique_prefix_when_listed(published: tuple[Path, str]) -> None:
    root, sid = published
    out, _err = _assay(root, "entry", sid[:10], "--json")
    import json

    assert json.loads(out)["entry"]["submission_id"] == sid
    _out, err = _assay(root, "entry", "ffffffffff", expect=2)
    assert "no published entry" in err


@pytest.mark.parametrize("name", ["Spring Era", "_x", "a/b", "é", "x" * 81, ""])
def test_an_era_name_is_plain_words(published: tuple[Path, str], name: str) -> None:
    root, _sid = published
    before = _count(root, "measurement_eras")
    _out, err = _assay(root, "era", "add", name, "--from", "2030-01-01", "--reason", "r", expect=2)
    assert "era name" in err and "2026-06-scoring-fix" in err
    assert _count(root, "measurement_eras") == before


def test_an_unknown_config_field_lists_the_allowed_ones(tmp_path: Path) -> None:
    _out, err = _assay(tmp_path, "config", "set", "submission_cap", '{"max_per_account": 2}', expect=2)
    assert "unknown field" in err and "max_per_account_per_version" in err
    _out, err = _assay(tmp_path, "config", "set", "submission_cap", '{"max_per_account_per_version": "x"}', expect=2)
    assert "must be an integer" in err and "Input should" not in err


@pytest.mark.heavy  # runs git
def test_the_secret_beside_a_store_in_the_checkout_is_never_committed(tmp_path: Path) -> None:
    """The service quick-start keeps its store in the checkout (`--db sqlite:///assay.db`), and the
    server secret is written beside it (assay.service.secret): git must ignore both."""
    import shutil
    import subprocess

    from assay.service.secret import secret_path

    repo = Path(__file__).resolve().parents[2]
    beside = secret_path(f"sqlite:///{repo / 'assay.db'}")
    assert beside.parent == repo
    git = shutil.which("git")
    assert git is not None, "git is needed to read .gitignore"
    for name in (beside.name, "assay.db", ".secret.123.abcd"):
        done = subprocess.run([git, "check-ignore", "-q", "--no-index", name], cwd=repo, check=False)
        assert done.returncode == 0, f"{name} is not ignored"


def test_the_participation_config_shows_the_kit_floor_a_campaign_run_is_held_to(tmp_path: Path) -> None:
    """`silent` is gated by the campaign kit's floor (3 messages), not by the config default (1):
    `config get` says so, and the figures agree with the floor the sweep applies."""
    import json

    from assay.stats.traits import DEFAULT_MIN_ACTIONS_PER_TURN, DEFAULT_MIN_PLAYER_MESSAGES

    out, _err = _assay(tmp_path, "config", "get", "academy_eval_participation")
    shown = json.loads(out)
    assert shown["value"]["min_player_messages"] == 1
    assert shown["kit_floors"]["campaign"] == {"min_player_messages": DEFAULT_MIN_PLAYER_MESSAGES,
                                               "min_actions_per_turn": DEFAULT_MIN_ACTIONS_PER_TURN}
    assert "higher" in shown["note"]


@pytest.mark.parametrize("url", ["", "mysql://x/y", "sqlite://", "{tmp}/plain-path.db", "sqlite:///{tmp}/no/dir/a.db",
                                 "postgresql://u:pw@127.0.0.1:1/x"])
def test_every_db_refusal_names_the_flag_alike(tmp_path: Path, url: str) -> None:
    code, out, err = run_main(["batches", "--db", url.format(tmp=tmp_path)], cwd=tmp_path,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert code == 2 and not out, err
    assert err.startswith("assay: error: --db: ") and len(err.strip().splitlines()) == 1, err
    assert ":pw@" not in err
    if "plain-path" in url:
        assert f"sqlite:///{tmp_path}/plain-path.db" in err  # the URL that names the file


class _Stopped(Exception):
    pass


def test_a_pending_run_shows_no_score_and_no_verdict(tmp_path: Path) -> None:
    """A planned slot with no run yet is `pending`: neither `score 0` nor `passed no`."""
    from assay.service.runs import run_suite
    from assay.store.db import open_store

    made: list[str] = []

    def stop(batch_id: str, _n: int) -> None:
        made.append(batch_id)
        raise _Stopped  # the plan is stored, no run has started

    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        with pytest.raises(_Stopped):
            run_suite("forge", agent_spec="reference:diligent", trials=1, store=store, on_created=stop)
    finally:
        store.close()
    out, _err = _assay(tmp_path, "runs", made[0])
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 5 and all(r[3] == "pending" for r in rows), out
    assert all(r[4:] == ["-", "-", "-"] for r in rows), out  # score, passed, claimed
    import json

    listed, _err = _assay(tmp_path, "runs", made[0], "--json")
    assert all(r["score"] is None and r["passed"] is None for r in json.loads(listed))


@pytest.mark.parametrize(("args", "says"), [
    (("run", "forge", "--agent", "reference:diligent", "--max-cost", "-3"), "--max-cost -3: must be greater than or equal to 0"),
    (("run", "forge", "--agent", "reference:diligent", "--trials", "0"), "--trials 0: must be greater than or equal to 1"),
    (("run", "forge", "--agent", "reference:diligent", "--trials=abc"), "--trials abc: must be a whole number"),
    (("run", "forge", "--agent", "reference:diligent", "--time-limit", "soon"), "--time-limit soon: must be a number"),
    (("board", "forge", "--limit", "0"), "--limit 0: must be greater than or equal to 1"),
])
def test_a_flag_out_of_range_is_refused_in_plain_words(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    """The parser's own refusals read like every other one (`FLAG VALUE: what it must be`), without
    the validator's `Invalid value for …: Input should be …`; and nothing is stored."""
    _out, err = _assay(tmp_path, *args, expect=2)
    assert err.strip() == f"assay: error: {says}"
    assert not (tmp_path / "store.db").exists()
