"""Accounts and public handles.

An account is a name; its public handle is the latest of its handle events (set or revoke), so
the history of who showed under which handle is kept, and revoking takes every entry of the
account off the public board at once (the board view joins the handle in force now).
"""

from __future__ import annotations

import re
from typing import TypedDict

from assay.errors import Invalid, NotFound
from assay.service.actors import Actor, require_owner, require_speaks_for, require_staff
from assay.store.accounts_repo import AccountRow, AccountsRepo
from assay.store.db import Store

ACCOUNT_NAME = re.compile(r"^[a-z0-9][a-z0-9\-]{1,62}[a-z0-9]$")
HANDLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-\.]{0,38}[A-Za-z0-9]$")


class HandleEvent(TypedDict):
    handle: str | None  # None: revoked
    at: str


class AccountView(TypedDict):
    """An account as it and the staff see it (a TypedDict: printed as it is by `assay account`, in this order)."""

    name: str
    public_handle: str | None
    created_at: str
    handle_history: list[HandleEvent]


def check_name(name: str) -> str:
    if not ACCOUNT_NAME.match(name):
        raise Invalid("an account name is 3-64 characters of a-z, 0-9 and '-' (not at either end)", "account",
                      value=name)
    return name


def check_handle(handle: str) -> str:
    if not HANDLE.match(handle):
        raise Invalid("a public handle is 2-40 characters of letters, digits, '_', '-' and '.', "
                      "starting and ending with a letter or digit", "public_handle", value=handle)
    return handle


def create(store: Store, name: str, public_handle: str | None = None, *, actor: Actor) -> AccountView:
    require_staff(actor, "create accounts", "account")
    check_name(name)
    if public_handle is not None:
        check_handle(public_handle)
    repo = AccountsRepo(store)
    repo.add_account(name, public_handle)
    return view(store, name, actor=actor)


def set_handle(store: Store, name: str, handle: str, *, actor: Actor) -> AccountView:
    if not actor.is_staff:
        require_speaks_for(actor, name, "set the public handle")
    check_handle(handle)
    AccountsRepo(store).add_handle_event(name, handle)
    return view(store, name, actor=actor)


def revoke_handle(store: Store, name: str, *, actor: Actor) -> AccountView:
    if not actor.is_staff:
        require_speaks_for(actor, name, "revoke the public handle")
    AccountsRepo(store).add_handle_event(name, None)
    return view(store, name, actor=actor)


def get(store: Store, name: str) -> AccountRow:
    account = AccountsRepo(store).account(name)
    if account is None:
        raise NotFound("no such account (create it with `assay account create NAME`)", "account", value=name)
    return account


def view(store: Store, name: str, *, actor: Actor) -> AccountView:
    """An account and its handle history: for the account itself and the platform's staff."""
    if not actor.is_staff:
        require_owner(actor, name, "account", name, "account")
    account = get(store, name)
    history = AccountsRepo(store).handle_history(name)
    return {
        "name": account.name,
        "public_handle": account.public_handle,
        "created_at": account.created_at.isoformat(),
        "handle_history": [{"handle": h.handle, "at": h.created_at.isoformat()} for h in history],
    }
