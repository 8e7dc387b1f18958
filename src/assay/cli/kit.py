"""`assay kit [NAME]`: what a kit's final state looks like and what its tools change.

`assay.cli` calls `register(app)`. With no name, the kits; with one, its state (every path a check
may read, its value and what changes it) and its tools, in tables that fit 80 columns; `--json` the
machine form (the state's JSON Schema, the same rows, the tools' argument schemas and effects);
`--markdown` the docs page (docs/state-reference.md is `assay kit --markdown`). An unknown kit is
the CLI's one-line refusal, exit 2.
"""

from __future__ import annotations

from typing import Any

import typer

from assay.cli.ui import JsonFlag, out, print_json

WIDTH = 80


def _kits() -> list[Any]:
    from assay.worlds.kits import KITS, get_kit

    return [get_kit(name) for name in sorted(KITS)]


def print_reference(ref: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from assay.scenario.reference import arguments

    width = min(out.width, WIDTH)
    out.print(Text(f"{ref['kit']}: {ref['summary']}", style="bold"), width=width)
    for note in ref["notes"]:
        out.print(note, markup=False, highlight=False, width=width)
    state = Table(title="state: what a check can read", title_justify="left", expand=True, show_lines=False)
    longest = max((len(row["path"]) for row in ref["paths"]), default=4)
    state.add_column("path", overflow="fold", min_width=min(longest, width // 2))
    state.add_column("value, and what changes it", overflow="fold", ratio=1)
    for row in ref["paths"]:
        cell = Text(row["value"])
        if row["about"]:
            cell.append("\n" + row["about"], style="dim")
        state.add_row(Text(row["path"]), cell)
    out.print(state, width=width)
    tools = Table(title="tools", title_justify="left", expand=True)
    tools.add_column("tool", no_wrap=True)
    tools.add_column("arguments, and what it changes in the state", overflow="fold")
    for tool in ref["tools"]:
        tools.add_row(Text(tool["name"]), Text(arguments(tool)).append("\n" + tool["effect"], style="dim"))
    out.print(tools, width=width)
    out.print("Paths: keys joined by dots; a dot inside a key is written '\\.'. <word>: a key of the initial "
              "state; []: a list's items (count them, filter with where). See docs/state-reference.md.",
              markup=False, highlight=False, width=width)


def kit(
    name: str | None = typer.Argument(None, help="Kit name (estate, campaign); none lists the kits."),
    as_json: bool = JsonFlag,
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the docs page (docs/state-reference.md)."),
) -> None:
    """A kit's final-state reference: every path a check may read, and each tool's effect on it."""
    from assay.scenario.reference import markdown, reference
    from assay.worlds.kits import get_kit

    kits = [get_kit(name)] if name is not None else _kits()
    if as_markdown:
        out.file.write(markdown(kits))
    elif name is None:
        if as_json:
            print_json([{"kit": k.name, "summary": k.summary} for k in kits])
            return
        for k in kits:
            out.print(f"{k.name:<10} {k.summary}", markup=False, highlight=False)
    elif as_json:
        print_json(reference(kits[0]))
    else:
        print_reference(reference(kits[0]))


def register(app: typer.Typer) -> None:
    app.command("kit")(kit)
