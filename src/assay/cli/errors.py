"""How a refusal reads on the command line: one line, naming the flag at fault.

The domain layers name the *field* a refusal is about ("label", "account", …); which flag spells
that field is the CLI's business, and this table is the only place it is written down. A field the
invoked command takes as an argument rather than a flag (`assay account create NAME`) is shown by
its value alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from assay.errors import BadInput, DomainError

#: domain field → the flag that sets it, on every command that has one
FLAGS: dict[str, str] = {
    "account": "--account",
    "agent": "--agent",
    "baseline": "--baseline",
    "db": "--db",
    "executor": "--executor",
    "facilitator": "--facilitator",
    "from": "--from",
    "judge": "--judge",
    "judge_passes": "--judge-passes",
    "kind": "--kind",
    "label": "--label",
    "play_model": "--play-model",
    "public_handle": "--public-handle",
    "publish": "--publish",
    "ray_address": "--ray-address",
    "reason": "--reason",
    "rubric": "--rubric",
    "suite": "--suite",
    "trials": "--trials",
    "unlisted": "--unlisted",
    "version": "--version",
    "workers": "--workers",
}


def cli_line(exc: BadInput, flags: Collection[str] | None = None) -> str:
    """The text after `assay: error: ` for `exc`.

    A domain error is prefixed by the flag of its field (when the invoked command has that flag:
    `flags`, all of them when None) and by the value it is about: `--account ghost: no such account`.
    Any other `BadInput` reads as it always has, `where: message`.
    """
    if not isinstance(exc, DomainError):
        return str(exc)
    flag = FLAGS.get(exc.field or "")
    if flag is not None and flags is not None and flag not in flags:
        flag = None
    subject = " ".join(p for p in (flag, exc.value) if p)
    return f"{subject}: {exc.message}" if subject else exc.message


def command_flags(app: Any, argv: Sequence[str]) -> set[str] | None:
    """The long flags the command `argv` invokes declares, or None when it cannot be told."""
    try:
        import typer

        command = typer.main.get_command(app)
        args = list(argv)
        while hasattr(command, "commands"):  # a group: its first non-flag argument names the subcommand
            name = next((a for a in args if not a.startswith("-")), None)
            sub = command.commands.get(name) if name is not None else None
            if sub is None:
                return None
            args = args[args.index(name) + 1:]
            command = sub
        return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
    except Exception:  # noqa: BLE001 - a refusal must still print; it then names every flag it can
        return None
