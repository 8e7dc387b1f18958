"""How a refusal reads on the command line: one line, naming the flag at fault.

The domain layers name the *field* a refusal is about ("label", "account", …); which flag spells
that field is the CLI's business, and this table is the only place it is written down. A field the
invoked command takes as an argument rather than a flag (`assay account create NAME`) is shown by
its value alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Sequence
from typing import Any

import typer

from assay.errors import BadInput, DomainError

#: domain field → the flag that sets it, on every command that has one
FLAGS: dict[str, str] = {
    "account": "--account",
    "agent": "--agent",
    "baseline": "--baseline",
    "batch": "--batch",
    "db": "--db",
    "executor": "--executor",
    "facilitator": "--facilitator",
    "from": "--from",
    "inspect": "--inspect",
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


def parameter_line(message: str, opts: Sequence[str], argv: Sequence[str]) -> str:
    """The text after `assay: error: ` for a flag the command line parser refused, in the same shape
    as a domain refusal (`--trials 0: must be greater than or equal to 1`), not the validator's
    wording (`Invalid value for '--trials': Input should be …`)."""
    flag = max(opts, key=len, default="")
    value = None
    for i, arg in enumerate(argv):
        if arg in opts and i + 1 < len(argv):
            value = argv[i + 1]
        elif any(arg.startswith(f"{o}=") for o in opts if o.startswith("--")):
            value = arg.split("=", 1)[1]
    words = message.split(", unable to", 1)[0].strip()
    if words.startswith("Input should be "):
        words = "must be " + words[len("Input should be "):]
    words = {"must be a valid integer": "must be a whole number", "must be a valid number": "must be a number"}.get(
        words, words)
    subject = " ".join(p for p in (flag, value) if p)
    return f"{subject}: {words}" if subject else words


def command_flags(app: Any, argv: Sequence[str]) -> set[str] | None:
    """The long flags the command `argv` invokes declares, or None when it cannot be told."""
    try:
        import typer

        command = typer.main.get_command(app)
        args = list(argv)
        while hasattr(command, "commands"):  # a group: its first non-flag argument names the subcommand
            name = next((a for a in args if not a.startswith("-")), None)
            sub = command.commands.get(name) if name is not None else None
            if name is None or sub is None:
                return None
            args = args[args.index(name) + 1:]
            command = sub
        return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
    except Exception:  # noqa: BLE001 - a refusal must still print; it then names every flag it can
        return None


# -- store faults: one line, the traceback only when asked for -------------------------------------

#: Set to 1 (or `assay --debug …`) to print the traceback of a store fault after its line.
ENV_DEBUG = "ASSAY_DEBUG"
#: The exit code of a command the store failed under (sysexits' EX_TEMPFAIL: try again later).
STORE_FAULT_EXIT = 75


def debugging() -> bool:
    return os.environ.get(ENV_DEBUG, "").strip() not in ("", "0")


def store_fault(exc: BaseException) -> int | None:
    """If `exc` is the store failing, print its one line (and, debugging, the traceback) to
    stderr and return the exit code; None for anything else."""
    from assay.store.faults import StoreUnavailable, describe, is_fault

    if not is_fault(exc):
        return None
    from assay.cli.ui import err

    line = exc.line() if isinstance(exc, StoreUnavailable) else f"the store failed: {describe(exc)}"
    if debugging():
        import traceback

        sys.stderr.write("".join(traceback.format_exception(exc)))
    else:
        line += f" (run with --debug or {ENV_DEBUG}=1 for the traceback)"
    err.print(f"assay: error: {line}", markup=False, highlight=False, soft_wrap=True)
    return STORE_FAULT_EXIT


def _set_store_retry(value: float | None) -> float | None:
    from assay.store.faults import ENV_RETRY

    if value is not None:
        os.environ[ENV_RETRY] = repr(float(value))  # read by every store this process (and its workers) opens
    return value


StoreRetryOpt = typer.Option(
    None, "--store-retry", min=0.0, metavar="SECONDS", callback=_set_store_retry,
    help="How long a store that is restarting, unreachable or locked is waited for before the command "
         "stops and says how to resume (default: $ASSAY_STORE_RETRY, else 30).")
