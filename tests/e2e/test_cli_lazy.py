"""Commands registered lazily (`assay.cli.lazy`): `assay run` imports what it uses and none of the
web app, the MCP SDK, the model clients, Ray, Inspect or the other commands' modules; the lazy
table says truly what each module registers, and the help lists every command in the order it
always had."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from assay.cli import app, lazy

#: Packages `assay run` with a scripted agent has no use for (each costs start-up time).
HEAVY = ("assay.web", "fastapi", "starlette", "uvicorn", "jinja2", "mcp", "openai", "ray", "inspect_ai", "httpx",
         "assay.service.mcp_play", "assay.service.remote", "assay.service.inspect_logs",
         # a SQLite store's run loads no PostgreSQL dialect (`schema.name_postgresql_options`), and an
         # operator's run batch none of the board, panel or judging modules (a submission's)
         "sqlalchemy.dialects.postgresql", "assay.service.board", "assay.service.panel", "assay.service.judgements",
         "assay.service.exports", "assay.score.judge", "assay.worlds.campaign",
         *(module for module, _, _ in lazy.LAZY), "assay.cli.play", "assay.cli.admin")

_PROBE = """
import json, sys
sys.argv = ["assay", "run", "forge", "--agent", "reference:diligent", "--trials", "1", "--quiet",
            "--db", "sqlite:///" + sys.argv[1]]
from assay.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.heavy  # starts a process
def test_assay_run_imports_none_of_the_heavy_packages(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "store.db")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.splitlines()[-1])
    assert "assay.run.engine" in modules and "assay.cli" in modules  # it did run
    loaded = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == [], loaded


def test_the_lazy_table_is_what_each_module_registers() -> None:
    for module, commands, groups in lazy.LAZY:
        holder = typer.Typer()
        lazy.registrar(module)(holder)
        assert tuple(c.name for c in holder.registered_commands) == commands, module
        assert tuple(g.name for g in holder.registered_groups) == groups, module


def test_every_command_is_listed_once_in_the_order_typer_gives_one_app() -> None:
    # every module registered on one app, as before: Typer lists its commands, then its groups
    eager = typer.Typer()
    for info in app.registered_commands:
        eager.registered_commands.append(info)
    for module, _, _ in lazy.LAZY:
        lazy.registrar(module)(eager)
    expected = list(typer.main.get_group(eager).list_commands(None))  # type: ignore[arg-type]
    root = typer.main.get_command(app)
    assert isinstance(root, lazy.LazyGroup)
    assert root.list_commands(None) == expected  # type: ignore[arg-type]
    assert set(root.commands) == set(expected)


def test_a_named_command_loads_its_module_alone() -> None:
    root = lazy.LazyGroup(name="assay", commands={})
    command = root.get_command(None, "verify")  # type: ignore[arg-type]
    assert command is not None and command.name == "verify"
    assert set(root._commands) == {"export", "verify"}  # the export module's commands, nothing else
    assert root.get_command(None, "no-such-command") is None  # type: ignore[arg-type]


def test_each_module_registers_only_its_own_names() -> None:
    """Naming one command builds its module's commands and groups, none of another module's (`submit`
    does not build the board's commands, nor `board` the submissions')."""
    for module, commands, groups in lazy.LAZY:
        root = lazy.LazyGroup(name="assay", commands={})
        first = (*commands, *groups)[0]
        assert root.get_command(None, first) is not None, first  # type: ignore[arg-type]
        assert set(root._commands) == {*commands, *groups}, module
