"""`assay admin`: admin accounts for the web's admin pages and panel ingest (issue 11).

`assay admin create EMAIL --password-stdin` reads the password from standard input (one line; the
trailing newline is dropped), so it is never on the command line, in the shell's history or echoed;
without `--password-stdin` it is asked for on the terminal, hidden, twice. Only its Argon2id hash is
stored. `assay admin list` lists the admins (never a hash). Both run as the local operator on the
store `--db` names; an admin logs in at `/admin/login` of an `assay serve` over that store.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from assay.service.actors import OPERATOR
from assay.cli.ui import DbOpt, JsonFlag, open_store_at, out, print_json

admin_app = typer.Typer(no_args_is_help=True, help="Admin accounts (the web's admin pages and panel ingest).")


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))


@admin_app.command("create")
def admin_create(
    email: str = typer.Argument(..., metavar="EMAIL", help="The admin's email (what they log in with)."),
    password_stdin: bool = typer.Option(False, "--password-stdin",
                                        help="Read the password from standard input (one line) instead of a prompt."),
    as_json: bool = JsonFlag,
    db: Optional[str] = DbOpt,
) -> None:
    """Create an admin. Only the password's Argon2id hash is stored; the password itself is never shown,
    logged or stored."""
    from assay.errors import BadInput
    from assay.service import admins

    password = _read_password(password_stdin)
    if password_stdin and not password:
        raise BadInput("no password on standard input", "--password-stdin")
    view = admins.create(open_store_at(db), email, password, actor=OPERATOR)
    if as_json:
        print_json(view)
        return
    out.print(f"admin {view['email']} created ({view['id']})", markup=False, highlight=False, soft_wrap=True)


@admin_app.command("list")
def admin_list(as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Every admin (id, email, created); never a password or its hash."""
    from rich.table import Table

    from assay.service import admins

    rows = admins.list_admins(open_store_at(db), actor=OPERATOR)
    if as_json:
        print_json(rows)
        return
    table = Table(title="admins")
    for col in ("id", "email", "created"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["email"], r["created_at"][:19])
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add `assay admin` to `app`."""
    app.add_typer(admin_app, name="admin")
