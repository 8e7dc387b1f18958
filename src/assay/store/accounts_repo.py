"""Reads and appends for accounts and their public handles (an event stream: the latest row wins).

A handle is unique among the handles held now, re-checked inside the write under one lock, and
every handle event re-lists the account's board entries (`board_repo.relist`) in its transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from assay.errors import Conflict, NotFound
from assay.store.board_repo import relist
from assay.store.board_schema import account_handles, accounts, current_handles, entry_figures, submissions
from assay.store.repo import Repository
from assay.store.schema import utcnow


@dataclass(frozen=True, slots=True)
class AccountRow:
    """An account (`accounts`) with the public handle it holds now (None: none, or revoked)."""

    name: str
    created_at: datetime
    public_handle: str | None


@dataclass(frozen=True, slots=True)
class HandleEventRow:
    """One `account_handles` event: the handle taken from then on (None: a revocation)."""

    id: int
    account: str
    handle: str | None
    created_at: datetime


class AccountsRepo(Repository):
    """Accounts and the handle each holds."""

    LOCKS = "board"  # the board's lock names (one namespace for every repository the board split into)

    def account(self, name: str) -> AccountRow | None:
        with self.read() as conn:
            row = conn.execute(sa.select(accounts).where(accounts.c.name == name)).first()
            if row is None:
                return None
            handle = conn.execute(
                sa.select(current_handles.c.handle).where(current_handles.c.account == name)
            ).scalar_one_or_none()
        return AccountRow(row.name, row.created_at, handle)

    def handle_history(self, name: str) -> list[HandleEventRow]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(account_handles).where(account_handles.c.account == name).order_by(account_handles.c.id)
            ).all()
        return [HandleEventRow(**r._mapping) for r in rows]

    def _holder(self, conn: sa.Connection, handle: str) -> str | None:
        # Handles are unique among the handles held now (case-insensitively, compared in Python
        # so both backends agree).
        rows = conn.execute(
            sa.select(current_handles.c.account, current_handles.c.handle).where(current_handles.c.handle.is_not(None))
        ).all()
        for row in rows:
            if str(row.handle).lower() == handle.lower():
                return str(row.account)
        return None

    def add_account(self, name: str, handle: str | None) -> None:
        with self.write() as conn:
            self.lock(conn, "handles", "all")
            if conn.execute(sa.select(accounts.c.name).where(accounts.c.name == name)).first() is not None:
                raise Conflict("an account by that name already exists", "account", value=name)
            if handle is not None:
                holder = self._holder(conn, handle)
                if holder is not None:
                    raise Conflict("the public handle is taken", "public_handle", value=handle)
            now = utcnow()
            conn.execute(sa.insert(accounts).values(name=name, created_at=now))
            if handle is not None:
                conn.execute(sa.insert(account_handles).values(account=name, handle=handle, created_at=now))

    def add_handle_event(self, name: str, handle: str | None) -> None:
        """Set (or, with None, revoke) an account's public handle: one new row either way."""
        with self.write() as conn:
            self.lock(conn, "handles", "all")
            if conn.execute(sa.select(accounts.c.name).where(accounts.c.name == name)).first() is None:
                raise NotFound("no such account", "account", value=name)
            current = conn.execute(
                sa.select(current_handles.c.handle).where(current_handles.c.account == name)
            ).scalar_one_or_none()
            if handle is None:
                if current is None:
                    raise Conflict("the account has no public handle to revoke", "account", value=name)
            else:
                holder = self._holder(conn, handle)
                if holder is not None and holder != name:
                    raise Conflict("the public handle is taken", "public_handle", value=handle)
                if current == handle:
                    raise Conflict(f"the account already holds the handle '{handle}'", "account", value=name)
            conn.execute(sa.insert(account_handles).values(account=name, handle=handle, created_at=utcnow()))
            relist(conn, entry_figures.c.submission_id.in_(sa.select(submissions.c.id)
                                                                .where(submissions.c.account == name)))

