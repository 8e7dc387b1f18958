"""One CLI grammar (issue 8, item 10): `-h` is `--help`, `--version` answers, flags show no value
placeholder; `--json` is a plain flag on every command that prints one JSON document and nothing else
on stdout, and `--output FILE` writes it (run, submit, results); tables say "1 trial" and fold agent
labels rather than cut them; a crashed run's debrief says why; `python:module:NAME` finds modules in
the working directory."""

from __future__ import annotations

import asyncio

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay import HARNESS_VERSION, __version__

from .test_cli import assay, ok

pytestmark = pytest.mark.heavy  # every test here runs the `assay` console script in subprocesses


def test_version() -> None:
    result = ok(assay("--version", db_file=None))
    assert result.out.strip() == f"assay {__version__} ({HARNESS_VERSION})"


@pytest.mark.parametrize("command", [(), ("run",), ("resume",), ("submissions",), ("board",)])
def test_dash_h_is_help_and_flags_take_no_placeholder(command: tuple[str, ...]) -> None:
    short = ok(assay(*command, "-h", db_file=None))
    long = ok(assay(*command, "--help", db_file=None))
    assert short.out == long.out and "Usage: assay" in short.out
    assert "<bool>" not in short.out


def test_the_console_script_closes_its_store_before_exiting(tmp_path: Path) -> None:
    """The console script ends without sweeping the heap (`cli.console`), so it must not leave the
    closing of its store to the interpreter: a SQLite store closed by its last connection has its
    write-ahead log checkpointed and removed."""
    db = tmp_path / "assay.db"
    ok(assay("run", "forge", "--agent", "reference:diligent", "--trials", "1", "--quiet", db_file=db))
    ok(assay("batches", "--json", db_file=db))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["assay.db"]


@pytest.mark.parametrize(("url", "says"), [
    ("", "an empty URL names no store"),
    ("sqlite://", "an in-memory SQLite database is lost"),
    ("sqlite:///:memory:", "an in-memory SQLite database is lost"),
    ("mysql://user@host/db", "'mysql' is not supported (supported: sqlite, postgresql)"),
])
def test_a_store_url_that_keeps_nothing_or_is_not_supported_is_refused(url: str, says: str) -> None:
    for command in (("batches",), ("run", "forge", "--agent", "reference:idle", "--trials", "1")):
        result = assay(*command, "--db", url, db_file=None)
        assert result.code == 2, str(result)
        assert result.err.count("\n") == 1 and result.err.startswith("assay: error: --db")
        assert says in result.err


# -- in-process: `assay.cli.main` with sys.argv set, its output captured ------------------------


def _main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    """Run `assay ARGV` in this process: (exit code, stdout, stderr)."""
    from assay.cli import main

    monkeypatch.setattr(sys, "argv", ["assay", *argv])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _leaves(sub, (*path, name))
    else:
        yield path, command


def test_every_command_but_serve_takes_json_as_a_plain_flag() -> None:
    import typer

    from assay.cli import app

    leaves = dict(_leaves(typer.main.get_command(app)))
    assert len(leaves) > 30
    for path, command in leaves.items():
        flags = {p.opts[0]: p for p in command.params if "--json" in p.opts}
        if path in (("serve",), ("mcp",)):  # a server: it prints no document (mcp: stdout is the protocol)
            assert not flags
            continue
        assert "--json" in flags, path
        assert flags["--json"].is_flag, path  # never `--json FILE`


@pytest.mark.parametrize("command", [("run",), ("submit",), ("results",)])
def test_output_writes_the_document_on_run_submit_and_results(command: tuple[str, ...]) -> None:
    import typer

    from assay.cli import app

    leaves = dict(_leaves(typer.main.get_command(app)))
    output = next(p for p in leaves[command].params if "--output" in p.opts)
    assert "-o" in output.opts and not output.is_flag


def test_run_json_prints_one_document_and_output_writes_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    written = tmp_path / "results.json"
    code, out, err = _main(capsys, monkeypatch, "run", "forge", "--agent", "reference:idle", "--trials", "1",
                           "--json", "-o", str(written), "--db", db)
    assert code == 0, err
    document = json.loads(out)  # the whole of stdout is one JSON document
    assert json.loads(written.read_text(encoding="utf-8")) == document
    assert {"suite", "agent", "harness_version", "trials_per_case", "cases", "summary"} <= set(document)
    assert f"batch {document['batch_id']} stored" in err  # messages went to stderr
    assert "1 trial per case" in err and "1 trials" not in err

    code, out, err = _main(capsys, monkeypatch, "results", "--json", "--db", db)
    assert code == 0 and json.loads(out) == document
    code, out, err = _main(capsys, monkeypatch, "results", document["batch_id"][:12], "--db", db)
    assert code == 0 and not out.lstrip().startswith("{")  # without --json: tables for people
    assert "forge-second-host" in out and "1 trial: 1 completed" in out


@pytest.mark.parametrize("argv", [
    ("run", "forge", "--agent", "reference:idle", "--json", "out.json"),
    ("results", "--json", "out.json"),
])
def test_the_old_json_file_form_is_refused_in_one_line(
        argv: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _main(capsys, monkeypatch, *argv, "--db", f"sqlite:///{tmp_path / 'assay.db'}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("assay: error: out.json: ") and "--output FILE" in err
    assert err.count("out.json") == 1
    assert not (tmp_path / "assay.db").exists() or "run" not in argv


def test_a_narrow_terminal_folds_agent_labels_and_never_cuts_them_to_nothing() -> None:
    from rich.console import Console

    from assay.cli.ui import print_summary

    label = "an-agent-label-of-some-length"
    results = {"suite": {"key": "forge", "version": "2.0"}, "trials_per_case": 1, "agent": {"label": label},
               "summary": {"pass_rate": 0.0, "consistency": 1.0, "false_success_rate": 0.0,
                           "pass_hat_k": {"1": 0.0}},
               "cases": [{"trials": [{"status": "completed"}]}]}
    console = Console(width=40, record=True, color_system=None)
    print_summary(console, [results])
    text = console.export_text()
    assert "1 trial per case" in text
    assert "forge 2.0 ·" in text  # the suite has several versions: the title names the one played
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert "".join(cells) == label  # folded over lines, every character kept


def test_debrief_of_a_crashed_run_shows_why_it_ended_and_the_agents_traceback() -> None:
    from rich.console import Console

    from assay.cli.ui import print_debrief

    trace = 'Traceback (most recent call last):\n  File "agent.py", line 3, in agent\nRuntimeError: [boom]'
    d = {"case_id": "c", "title": "t", "run_id": "r1", "trial": 1, "status": "crashed",
         "reason": "agent raised RuntimeError: [boom]", "hidden_truth": "h", "checks": [], "score": 0,
         "passed": False, "safety_failures": [], "claimed_success": None, "false_success": False,
         "transcript": [{"source": "harness", "role": None, "data": {"traceback": trace}}]}
    console = Console(width=200, record=True, color_system=None)
    print_debrief(console, d)
    text = console.export_text()
    assert "crashed — agent raised RuntimeError: [boom]" in text
    assert 'File "agent.py", line 3, in agent' in text
    assert text.count("line 3, in agent") == 1  # shown once, not again in the transcript


def test_python_module_specs_find_modules_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.agents.loader import load_agent

    (tmp_path / "grammar_cwd_agent.py").write_text(
        "def agent(messages, tools):\n    return {'role': 'assistant', 'content': 'hi'}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # as the console script starts: its own directory first, never the working directory
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path), ".")])
    factory = load_agent("python:grammar_cwd_agent:agent")
    answer = factory()([], [])  # played by a sandboxed worker: an awaitable
    assert asyncio.run(answer)["content"] == "hi"
