"""API keys and agent keys: issued once, stored as a keyed digest, compared in constant time.

- An **API key** (`ak_…`) is a submitter's: it authenticates as the account itself
  (`account_actor`), which may submit and read its own submissions.
- An **agent key** (`gk_…`) is an agent's: it authenticates as an agent of the account
  (`agent_of`), which may play that account's runs and nothing else.

The key is shown once, at creation; the store keeps only HMAC-SHA256(server secret, key), so a
copy of the database is not a copy of the keys, and a key is only valid under the secret it was
issued with. The kind is visible in the key's first characters so a person can tell which is
which, but the stored kind is what decides. A key of the wrong kind, an unknown key and a revoked
key are refused alike (`Unauthenticated`), and a revocation takes effect on the next request:
every request re-reads the key's row, nothing is cached.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Literal, TypedDict

from assay.errors import Invalid, NotFound, Unauthenticated
from assay.service import accounts
from assay.service.actors import Actor, account_actor, agent_of, require_owner, require_speaks_for
from assay.store.db import Store
from assay.store.keys_repo import KeyCandidate, KeysRepo, StoredKey
from assay.store.keys_schema import KEY_KINDS

KeyKind = Literal["api", "agent"]

#: The tag that starts each kind of key: visible kind, for people and secret scanners.
TAGS: dict[str, str] = {"api": "ak_", "agent": "gk_"}
#: Random characters after the tag kept as the display prefix (and the lookup index).
PREFIX_CHARS = 8
#: Bytes of randomness in a key (`secrets.token_urlsafe`): 256 bits.
KEY_BYTES = 32
#: Longer than any key we issue; a longer presented value is refused before any work is done.
MAX_PRESENTED = 256


def check_kind(kind: str) -> KeyKind:
    if kind not in KEY_KINDS:
        raise Invalid(f"a key kind is one of: {', '.join(KEY_KINDS)}", "kind", value=kind)
    return kind  # type: ignore[return-value]


def digest(secret: bytes, key: str) -> str:
    """The stored form of a key: HMAC-SHA256 under the server secret, hex."""
    return hmac.new(secret, key.encode("utf-8"), hashlib.sha256).hexdigest()


def _prefix(key: str) -> str:
    return key[: len("ak_") + PREFIX_CHARS]


class KeyView(TypedDict):
    """A key as its owner may see it (a TypedDict: printed as it is by `assay key`, these keys in this order)."""

    id: str
    account: str
    kind: str
    prefix: str
    created_at: str
    revoked: bool
    revoked_at: str | None


def view(row: StoredKey) -> KeyView:
    """A key as its owner may see it: never the key, never its digest."""
    revoked = row.revoked_at
    return {
        "id": row.id,
        "account": row.account,
        "kind": row.kind,
        "prefix": row.prefix,
        "created_at": row.created_at.isoformat(),
        "revoked": revoked is not None,
        "revoked_at": revoked.isoformat() if revoked is not None else None,
    }


def create(store: Store, account: str, kind: str, secret: bytes, *, actor: Actor) -> tuple[KeyView, str]:
    """Issue a key of `kind` for `account`: its view and the key itself, which is never shown again.

    The operator, an admin, or the account itself may issue its keys."""
    if not actor.is_staff:
        require_speaks_for(actor, account, "create keys")
    kind = check_kind(kind)
    accounts.get(store, account)  # a clear refusal for an unknown account, before anything is drawn
    key = TAGS[kind] + secrets.token_urlsafe(KEY_BYTES)
    row = KeysRepo(store).add_key(key_id=secrets.token_hex(8), account=account, kind=kind, prefix=_prefix(key),
                                  digest=digest(secret, key))
    return view(row), key


def list_keys(store: Store, account: str, *, actor: Actor) -> list[KeyView]:
    """An account's keys, oldest first, revoked ones included (marked): for it and the staff."""
    if not actor.is_staff:
        require_owner(actor, account, "account", account, "account")
    accounts.get(store, account)
    return [view(r) for r in KeysRepo(store).for_account(account)]


def revoke(store: Store, key_id: str, *, actor: Actor) -> KeyView:
    """Revoke a key (an appended revocation): refused from the next request on, for good."""
    repo = KeysRepo(store)
    found = repo.key(key_id)
    if found is None:
        raise NotFound("no such key", "key", value=key_id)
    if not actor.is_staff:
        require_owner(actor, found.account, "key", key_id, "key")
    return view(repo.revoke(key_id))


def refusal(kind: str) -> Unauthenticated:
    """The one refusal for every bad credential, so none is told apart from another."""
    return Unauthenticated(f"a valid {'agent' if kind == 'agent' else 'API'} key is required "
                           "(Authorization: Bearer KEY)", "key")


def _match(store: Store, secret: bytes, presented: str) -> KeyCandidate | None:
    """The key row a presented key is (digest compared in constant time against every key issued
    with its display prefix), revoked or not; None when it is no key at all."""
    wanted = digest(secret, presented)
    match: KeyCandidate | None = None
    for row in KeysRepo(store).candidates(_prefix(presented)):
        if hmac.compare_digest(row.digest, wanted):
            match = row
    return match


def identify(store: Store, secret: bytes, presented: str | None) -> str | None:
    """The id of the valid, unrevoked key (of either kind) `presented` is, else None: whom a request
    is counted against by the rate limit. A value that is no key is nobody's: the caller is then its
    address, so inventing values buys no new allowance."""
    if not presented or len(presented) > MAX_PRESENTED:
        return None
    match = _match(store, secret, presented)
    return match.id if match is not None and match.revoked_at is None else None


def authenticate(store: Store, secret: bytes, presented: str | None, kind: str) -> Actor:
    """The actor a presented key stands for, when it is a valid, unrevoked key of `kind`.

    The key's digest is compared in constant time against every key issued with its display
    prefix; anything else (no key, an unknown, revoked or malformed one, the other kind) is the
    same `Unauthenticated`."""
    kind = check_kind(kind)
    if not presented or len(presented) > MAX_PRESENTED:
        raise refusal(kind)
    match = _match(store, secret, presented)
    if match is None or match.revoked_at is not None or match.kind != kind:
        raise refusal(kind)
    return account_actor(match.account) if kind == "api" else agent_of(match.account)
