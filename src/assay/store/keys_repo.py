"""Reads and appends for keys: issue a key row, revoke it with a new row, find keys by prefix.

Like the rest of the store this only ever INSERTs (the database refuses anything else); every
write is one transaction. The repository never sees a key in the clear: it is handed digests
computed by `assay.service.keys`, and it hands digests back only to that module, which compares
them in constant time. Listings (`for_account`) leave the digest out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict, NotFound
from assay.store.board_schema import accounts
from assay.store.keys_schema import api_keys, key_revocations
from assay.store.repo import Repository
from assay.store.schema import utcnow


@dataclass(frozen=True, slots=True)
class StoredKey:
    """An issued key as listed: never the key, never its digest; `revoked_at` None while valid."""

    id: str
    account: str
    kind: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class KeyCandidate(StoredKey):
    """A listed key with its digest: what a presented key is compared against (`service.keys` only)."""

    digest: str = field(repr=False)  # never in a log line


def _key(row: sa.Row[Any]) -> StoredKey:
    return StoredKey(row.id, row.account, row.kind, row.prefix, row.created_at, row.revoked_at)


_LISTED: tuple[sa.ColumnElement[Any], ...] = (api_keys.c.id, api_keys.c.account, api_keys.c.kind, api_keys.c.prefix, api_keys.c.created_at,
           key_revocations.c.revoked_at)


class KeysRepo(Repository):
    """The keys' half of the store, over the same engine."""

    LOCKS = "keys"

    @staticmethod
    def _joined() -> sa.FromClause:
        return api_keys.outerjoin(key_revocations, key_revocations.c.key_id == api_keys.c.id)

    def add_key(self, *, key_id: str, account: str, kind: str, prefix: str, digest: str) -> StoredKey:
        """Record a newly issued key; the account must exist."""
        with self.write() as conn:
            if conn.execute(sa.select(accounts.c.name).where(accounts.c.name == account)).first() is None:
                raise NotFound("no such account (create it with `assay account create NAME`)", "account",
                               value=account)
            conn.execute(sa.insert(api_keys).values(id=key_id, account=account, kind=kind, prefix=prefix,
                                                    digest=digest, created_at=utcnow()))
            row = conn.execute(sa.select(*_LISTED).select_from(self._joined()).where(api_keys.c.id == key_id)).one()
        return _key(row)

    def key(self, key_id: str) -> StoredKey | None:
        """One key (without its digest), with `revoked_at` (None while it is valid)."""
        with self.read() as conn:
            row = conn.execute(sa.select(*_LISTED).select_from(self._joined()).where(api_keys.c.id == key_id)).first()
        return _key(row) if row is not None else None

    def for_account(self, account: str) -> list[StoredKey]:
        """An account's keys, oldest first, without their digests."""
        with self.read() as conn:
            rows = conn.execute(sa.select(*_LISTED).select_from(self._joined())
                                .where(api_keys.c.account == account)
                                .order_by(api_keys.c.created_at, api_keys.c.id)).all()
        return [_key(r) for r in rows]

    def candidates(self, prefix: str) -> list[KeyCandidate]:
        """Every key issued with this display prefix, digest and revocation included: what a presented
        key is compared against."""
        with self.read() as conn:
            rows = conn.execute(_candidates(), {"prefix": prefix}).all()
        return [KeyCandidate(r.id, r.account, r.kind, r.prefix, r.created_at, r.revoked_at, r.digest) for r in rows]

    def revoke(self, key_id: str, at: datetime | None = None) -> StoredKey:
        """Append the key's revocation; a key revoked already is refused (its first revocation stands)."""
        with self.write() as conn:
            found = conn.execute(sa.select(api_keys.c.id).where(api_keys.c.id == key_id)).first()
            if found is None:
                raise NotFound("no such key", "key", value=key_id)
            if conn.execute(sa.select(key_revocations.c.key_id).where(key_revocations.c.key_id == key_id)).first():
                raise Conflict("the key is already revoked", "key", value=key_id)
            try:
                conn.execute(sa.insert(key_revocations).values(key_id=key_id, revoked_at=at or utcnow()))
            except sa.exc.IntegrityError:  # a concurrent revocation of the same key won the race
                raise Conflict("the key is already revoked", "key", value=key_id) from None
            row = conn.execute(sa.select(*_LISTED).select_from(self._joined()).where(api_keys.c.id == key_id)).one()
        return _key(row)


@functools.cache
def _candidates() -> sa.Select[Any]:
    """`KeysRepo.candidates`' statement, built once: it is asked on every authenticated request."""
    return (sa.select(*_LISTED, api_keys.c.digest).select_from(KeysRepo._joined())
            .where(api_keys.c.prefix == sa.bindparam("prefix")))
