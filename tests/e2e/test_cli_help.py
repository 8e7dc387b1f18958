"""`--help` written for people: conventional placeholders (`SUITE`, `FILE`, `N`), a description for
every argument, no hard line breaks inside a paragraph, choices never split mid-word, and what each
help says true (in process: `tests.support.cli.run_main`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from assay.cli import app
from tests.support.cli import run_main


def _commands() -> Iterator[tuple[list[str], Any]]:
    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk([*path, name], sub)

    yield from walk([], typer.main.get_command(app))


COMMANDS = list(_commands())


def _help(path: list[str], tmp_path: Path, columns: int = 80) -> str:
    code, out, err = run_main([*path, "--help"], cwd=tmp_path, env={"COLUMNS": str(columns), "PATH": "/usr/bin"})
    assert code == 0, (path, err)
    return out


@pytest.mark.parametrize("path", [p for p, _c in COMMANDS], ids=lambda p: " ".join(p) or "assay")
def test_help_uses_conventional_placeholders(path: list[str], tmp_path: Path) -> None:
    shown = _help(path, tmp_path)
    for bad in ("<str>", "<int", "<float", "<path>", "[[", "<=x", "x>="):
        assert bad not in shown, (path, bad, shown)
    # a Typer placeholder ({path}); a family template's documented `${name}` syntax is not one
    assert not re.search(r"(?<!\$)\{[a-z_]+\}", shown), shown


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=lambda p: " ".join(p) if isinstance(p, list) else "")
def test_every_argument_is_described_and_no_paragraph_has_a_hard_break(path: list[str], command: Any) -> None:
    for param in command.params:
        assert (getattr(param, "help", None) or "").strip(), (path, param.name)
    for paragraph in (command.help or "").split("\n\n"):
        assert "\n" not in paragraph.strip(), (path, paragraph)


def test_choices_and_the_command_list_read_unbroken(tmp_path: Path) -> None:
    compare = _help(["compare"], tmp_path)
    assert "false_success_rate" in compare and "objective_met_rate" in compare
    top = _help([], tmp_path, columns=200)
    board = next(line for line in top.splitlines() if re.search(r"│ board\s", line))
    assert "--recompute, every entry's stored figures" in board  # one sentence, one line at 200 columns


def test_help_says_what_is_true(tmp_path: Path) -> None:
    submit = _help(["submit"], tmp_path, columns=200)
    from assay.service.suites import builtin_suite_names

    for suite in builtin_suite_names():
        assert suite in submit, suite
    assert "owner's view" in submit and "SUITE" in submit
    assert "Argon2id hash is stored" in _help(["admin", "create"], tmp_path, columns=200)
    run = _help(["run"], tmp_path, columns=200)
    assert "--trials" in run and re.search(r"--trials\s+N\b", run)
    assert "thinking" in run and "Wall-clock" not in run  # the limit counts the agent's time (engine.time_left)


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=lambda p: " ".join(p) if isinstance(p, list) else "")
def test_no_help_text_is_eaten_as_rich_markup(path: list[str], command: Any) -> None:
    """Typer renders help through Rich markup: an unescaped `[word]` (an extra's name, a usage example)
    is taken for a style and vanishes from the screen. Every help says on screen what it says in code."""
    from rich.text import Text

    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for text in texts:
        assert Text.from_markup(text).plain == text.replace("\\[", "["), (path, text)
