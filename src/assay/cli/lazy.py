"""Commands registered lazily: `assay run` imports the modules of `run`, never those of `serve`,
`export`, `board` or `mcp` (and what they import: the web app, the panel, the MCP SDK, exports).

The root group (`LazyGroup`) knows every command's name and the module that registers it
(`LAZY`); a module is imported, and its commands built, only when one of its commands is asked
for by name (`get_command`). Whoever needs them all — `assay --help`, a typo's suggestions, a
test walking `group.commands` — gets them all: `commands` loads every module first. The help is
the same as when every module was imported up front: the same commands, built the same way, listed
in the same order (the root's own commands, then the lazy modules' commands, then their groups, as
Typer lists them when all are registered on one app; tests/e2e/test_cli_lazy.py holds the table
to what each module registers).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup

#: (module, its commands, its groups), in the order the help lists them.
LAZY: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("assay.cli.submissions", ("submit", "score", "unpublish", "note"), ()),
    ("assay.cli.board", ("board", "entry", "card", "compare"), ()),
    ("assay.cli.suites", (), ("suite",)),
    ("assay.cli.accounts", (), ("account",)),
    ("assay.cli.config", (), ("config", "era")),
    ("assay.cli.batches", ("resume", "batches", "submissions", "runs"), ()),
    ("assay.cli.serve", ("serve", "play"), ("key", "admin")),
    ("assay.cli.export", ("export", "verify"), ()),  # export, verify (issue 12)
    ("assay.cli.agreement", ("agreement",), ()),  # judge–panel agreement (issue 12)
    ("assay.cli.kit", ("kit",), ()),  # a kit's state and tools (issue 24)
    ("assay.cli.mcp", ("mcp",), ()),  # play over MCP, stdio (issue 28)
    ("assay.cli.family", (), ("family",)),  # scenario families (issue 27)
)

#: Which module registers each lazy name.
MODULE_OF = {name: module for module, commands, groups in LAZY for name in (*commands, *groups)}
#: Every lazy name, commands before groups (Typer's order on an app holding them all).
ORDER = [*(c for _, commands, _ in LAZY for c in commands), *(g for _, _, groups in LAZY for g in groups)]

#: Each module's built commands, by name (built once per process, shared by every group).
_BUILT: dict[str, dict[str, Any]] = {}


def unwrap_docstrings(group: typer.Typer) -> None:
    """A docstring's paragraphs as single lines, so the help wraps them at the terminal's width
    (not where the source happened to break a sentence)."""
    import inspect
    import re

    for info in group.registered_commands:
        if info.callback is not None and info.callback.__doc__:
            doc = inspect.cleandoc(info.callback.__doc__)
            info.callback.__doc__ = re.sub(r"(?<=\S)\n(?=\S)", " ", doc)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            unwrap_docstrings(sub.typer_instance)


def registrar(module: str) -> Callable[[typer.Typer], None]:
    """The function adding `module`'s commands to a Typer app."""
    register: Callable[[typer.Typer], None] = importlib.import_module(module).register
    return register


def build(module: str) -> dict[str, Any]:
    """`module`'s commands and groups as click commands, by name."""
    built = _BUILT.get(module)
    if built is None:
        holder = typer.Typer()
        registrar(module)(holder)
        unwrap_docstrings(holder)
        built = _BUILT[module] = dict(typer.main.get_group(holder).commands)
    return built


class LazyGroup(TyperGroup):
    """The root `assay` group: its own commands at once, the others' modules when first named."""

    def __init__(self, **attrs: Any) -> None:
        self._commands: MutableMapping[str, Any] = {}
        super().__init__(**attrs)
        self._own = list(self._commands)

    @property
    def commands(self) -> MutableMapping[str, Any]:
        for module, _, _ in LAZY:
            self._load(module)
        return self._commands

    @commands.setter
    def commands(self, value: MutableMapping[str, Any]) -> None:
        self._commands = value

    def _load(self, module: str) -> None:
        for name, command in build(module).items():
            self._commands.setdefault(name, command)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self._commands and cmd_name in MODULE_OF:
            self._load(MODULE_OF[cmd_name])
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        names = [*self._own, *(n for n in ORDER if n not in self._own)]
        return [*names, *(n for n in self._commands if n not in names)]
