"""Tables that fit the page: at $COLUMNS=80 (and piped, 120) no board, results, runs or submissions
table cuts a figure or a word; the columns that do not fit leave, named, and `--wide` brings them
back; the ids the next command takes are shown; an empty listing says what to do.

In process (`tests.support.cli.run_main`, the console script's `main`), on one SQLite store the
module fills once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_main

ENV_BASE = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"sqlite:///{root / 'tables.db'}"

    def __call__(self, *args: str, columns: int | None = 80, expect: int = 0, db: str | None = None) -> str:
        env = dict(ENV_BASE, **({"COLUMNS": str(columns)} if columns is not None else {}))
        code, out, err = run_main([*args, "--db", db or self.url], cwd=self.root, env=env)
        assert code == expect, (args, code, out, err)
        return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    s = Store(tmp_path_factory.mktemp("tables"))
    s("run", "forge", "--agent", "reference:hasty", "--trials", "4", "-q")
    batch = json.loads(s("results", "--json"))
    s("run", "forge", "--agent", "reference:diligent", "--trials", "1", "-q")
    single = json.loads(s("results", "--json"))
    s("account", "create", "alice", "--public-handle", "Alice")
    s("submit", "forge", "--agent", "reference:diligent", "--account", "alice", "-q",
      "--label", "a rather long self-declared label for the diligent agent", "--publish")
    view = json.loads(s("submissions", "--json"))[0]
    owner = json.loads(s("results", view["id"], "--json"))
    return {"cli": s, "batch": batch, "single": single, "owner": owner}


def _fits(text: str, width: int) -> None:
    """Every line of a table within `width`, and nothing cut short with an ellipsis."""
    assert "…" not in text, text
    for line in text.splitlines():
        if any(c in line for c in "┃│┏└"):
            assert len(line) <= width, (len(line), line)


@pytest.mark.parametrize("width", [80, 60, None])  # None: piped with no $COLUMNS, a 120-column page
def test_no_table_cuts_a_figure_or_a_word(store: dict[str, Any], width: int | None) -> None:
    cli, batch, owner = store["cli"], store["batch"], store["owner"]
    page = width or 120
    board = cli("board", "forge", columns=width)
    _fits(board, page)
    assert re.search(r"\b1\.0000\b", board) and "[0.3934, 1.0000]" in board  # the pass figure and its interval, whole
    words = set(re.findall(r"[\w-]+", board))
    assert set("a rather long self-declared label for the diligent agent".split()) <= words  # wrapped, never cut
    results = cli("results", batch["batch_id"], columns=width)
    _fits(results, page)
    assert f"{batch['summary']['pass_rate']:.2f}" in results
    for case in batch["cases"]:
        assert case["case_id"] in results
    _fits(cli("results", owner["id"], columns=width), page)
    _fits(cli("submissions", columns=width), page)
    _fits(cli("runs", batch["batch_id"], columns=width), page)


def test_a_narrow_page_names_the_columns_it_left_out_and_wide_shows_them(store: dict[str, Any]) -> None:
    cli = store["cli"]
    narrow = cli("board", "forge", columns=80)
    left = re.search(r"hidden to fit 80 columns: (.+) \(--wide shows them\)", narrow.replace("\n", " "))
    assert left is not None, narrow
    assert "era" in left.group(1)
    wide = cli("board", "forge", "--wide", columns=80)
    for header in ("era", "objective", "cases", "digest", "consistency"):
        assert re.search(rf"\b{header}\b", wide), header
    assert "hidden to fit" not in wide


def test_pass_hat_k_is_folded_to_1_2_and_the_last_unless_wide(store: dict[str, Any]) -> None:
    cli, batch = store["cli"], store["batch"]
    folded = cli("results", batch["batch_id"], columns=200)
    assert {"pass^1", "pass^2", "pass^4"} <= set(re.findall(r"pass\^\d+", folded))
    assert "pass^3" not in folded
    wide = cli("results", batch["batch_id"], "--wide", columns=80)
    assert {"pass^1", "pass^2", "pass^3", "pass^4"} <= set(re.findall(r"pass\^\d+", wide))


def test_results_shows_run_ids_debrief_takes(store: dict[str, Any]) -> None:
    cli, batch = store["cli"], store["batch"]
    shown = cli("results", batch["batch_id"], columns=80)
    run_ids = [t["run_id"] for c in batch["cases"] for t in c["trials"]]
    prefixes = set(re.findall(r"\b[0-9a-f]{12}\b", shown))
    listed = [r for r in run_ids if r[:12] in prefixes]
    assert len(listed) >= len(batch["cases"])  # at least one run of every case
    assert f"assay runs {batch['batch_id']}" in shown  # 4 trials a case: the rest are one command away
    debrief = json.loads(cli("debrief", listed[0][:12], "--json"))
    assert debrief["run_id"] == listed[0]


def test_results_of_a_submission_shows_its_runs_and_seeds(store: dict[str, Any]) -> None:
    cli, owner = store["cli"], store["owner"]
    shown = cli("results", owner["id"], columns=120)
    for run in owner["runs"]:
        assert run["run_id"][:12] in shown and str(run["seed"]) in shown
    assert owner["digest"] in shown


def test_the_board_carries_each_entry_s_digest(store: dict[str, Any]) -> None:
    cli, owner = store["cli"], store["owner"]
    assert owner["digest"] in cli("board", "forge", "--wide")
    assert owner["digest"][:12] in cli("board", "forge", columns=160)


def test_one_trial_withholds_consistency_and_says_why(store: dict[str, Any]) -> None:
    cli, single = store["cli"], store["single"]
    shown = cli("results", single["batch_id"], columns=120)
    assert "1.00" in shown  # diligent passes
    row = next(line for line in shown.splitlines() if "diligent" in line and "│" in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[2] == "—", row  # agent, pass rate, consistency
    assert "at least 2 trials" in shown
    summary = json.loads(cli("results", single["batch_id"], "--json"))["summary"]
    assert summary["consistency"] is None and "one trial a case was planned" in summary["consistency_reason"]


@pytest.mark.parametrize(("args", "says"), [
    (["board", "forge"], "no entries yet — publish one: assay account create NAME --public-handle HANDLE, then "
                         "assay submit forge --agent reference:diligent --account NAME --label LABEL --publish"),
    (["submissions"], "no submissions yet — make one with: assay submit forge"),
    (["batches"], "no batches yet — play one with: assay run forge --agent reference:diligent"),
])
def test_an_empty_listing_says_what_to_do(store: dict[str, Any], tmp_path: Path, args: list[str], says: str) -> None:
    shown = store["cli"](*args, columns=200, db=f"sqlite:///{tmp_path / 'empty.db'}")
    assert says in shown and "┏" not in shown


def test_columns_is_read_at_each_print_not_when_the_console_was_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich fixes $COLUMNS when a console is made (at import); a piped line keeps 120 columns and
    a table follows $COLUMNS as it is when the table is printed."""
    import io

    from assay.cli.ui import PIPED_WIDTH, Col, Screen, fit_table

    monkeypatch.setenv("COLUMNS", "50")
    page = io.StringIO()
    console = Screen(file=page)
    monkeypatch.setenv("COLUMNS", "90")
    assert console.width == PIPED_WIDTH
    cols = [Col("name"), *(Col(f"figure {i}", 50, "right") for i in range(8))]
    hidden = fit_table(console, cols, [["x", *(f"{i}.0000" for i in range(8))]])
    assert hidden  # 9 columns of 8+ characters do not fit 90
    assert max(len(line) for line in page.getvalue().splitlines() if "┃" in line) <= 90
