"""`assay account create|set-handle|revoke-handle|show`: accounts and their public handles.

`assay.cli.lazy` calls `register(app)` when one of its commands is named. Every command takes
`--db URL` like the rest of the CLI, and follows its error contract: a refusal is a `BadInput`
(one stderr line, exit 2) raised before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

from typing import TYPE_CHECKING, Optional

import typer

from assay.cli.ui import DbOpt, JsonFlag, open_store_at, out, print_json

if TYPE_CHECKING:
    from assay.service.accounts import AccountView

account_app = typer.Typer(no_args_is_help=True, help="Accounts and their public handles.")


def _print_account(view: AccountView, as_json: bool) -> None:
    if as_json:
        print_json(view)
    else:
        out.print(f"account {view['name']}: public handle {view['public_handle'] or '(none)'}", markup=False)


@account_app.command("create")
def account_create(
    name: str = typer.Argument(..., help="Account name (a-z, 0-9, '-')."),
    public_handle: Optional[str] = typer.Option(None, "--public-handle", help="The name shown on the board."),
    as_json: bool = JsonFlag, db: Optional[str] = DbOpt,
) -> None:
    """Create an account, optionally with a public handle (needed to publish)."""
    from assay.service import accounts

    _print_account(accounts.create(open_store_at(db), name, public_handle, actor=OPERATOR), as_json)


@account_app.command("set-handle")
def account_set_handle(name: str = typer.Argument(..., help="Account name."),
                       handle: str = typer.Argument(..., help="The new public handle, shown on the board."),
                       as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Set an account's public handle (a new handle event; the history is kept)."""
    from assay.service import accounts

    _print_account(accounts.set_handle(open_store_at(db), name, handle, actor=OPERATOR), as_json)


@account_app.command("revoke-handle")
def account_revoke_handle(name: str = typer.Argument(..., help="Account name."), as_json: bool = JsonFlag,
                          db: Optional[str] = DbOpt) -> None:
    """Revoke an account's public handle: its entries leave the public board at once."""
    from assay.service import accounts

    _print_account(accounts.revoke_handle(open_store_at(db), name, actor=OPERATOR), as_json)


@account_app.command("show")
def account_show(name: str = typer.Argument(..., help="Account name."), as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """An account, its public handle and the handle's history."""
    from assay.service import accounts

    _print_account(accounts.view(open_store_at(db), name, actor=OPERATOR), as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(account_app, name="account")
