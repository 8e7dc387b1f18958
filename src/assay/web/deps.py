"""Dependencies every route shares (FastAPI dependency injection, so tests can override them).

- `get_store(request)`: the one `Store` this process opened at start-up (`app.state.store`).
- `get_secret(request)`: the server secret keys are hashed under (`app.state.settings.secret`).
- `api_actor`: the caller of a submitter route, from `Authorization: Bearer KEY` with an API key:
  `account_actor(account)`; no key, an unknown or revoked key, or an agent key → 401.
- `agent_actor`: the caller of a remote-play route, from an agent key: `agent_of(account)`; an API
  key here is refused like no key (401).
- `public_actor`: the public (`PUBLIC`); public routes never look at a key.

Use them as `actor: Actor = Depends(api_actor)`. The two key schemes are declared as HTTP bearer
security schemes (`ApiKey`, `AgentKey`), so `/openapi.json` says which routes need which key.
The key is checked on every request (`service.keys.authenticate`): a revoked key is refused at once.
The remote-play routes are the exception (`verified_keys`): a step is asked hundreds of times a
second, so a key found valid is taken on trust for `KEY_RECHECK_SECONDS` and checked again after;
a revoked agent key is refused by them within that time.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from assay.service import keys
from assay.service.actors import PUBLIC, Actor
from assay.store.db import Store

_api_scheme = HTTPBearer(scheme_name="ApiKey", auto_error=False,
                         description="An API key (`ak_…`) from `assay key create --kind api`.")
_agent_scheme = HTTPBearer(scheme_name="AgentKey", auto_error=False,
                           description="An agent key (`gk_…`) from `assay key create --kind agent`.")

agent_scheme = _agent_scheme  # the remote-play routes read the key themselves, in their own lane


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_secret(request: Request) -> bytes:
    return request.app.state.settings.secret


def public_actor() -> Actor:
    return PUBLIC


def _caller(request: Request, credentials: HTTPAuthorizationCredentials | None, kind: str) -> Actor:
    presented = credentials.credentials if credentials is not None else None
    return keys.authenticate(get_store(request), get_secret(request), presented, kind)


def api_actor(request: Request,
              credentials: HTTPAuthorizationCredentials | None = Depends(_api_scheme)) -> Actor:
    """The account an API key belongs to; anything else is 401 (`Unauthenticated`)."""
    return _caller(request, credentials, "api")


def agent_actor(request: Request,
                credentials: HTTPAuthorizationCredentials | None = Depends(_agent_scheme)) -> Actor:
    """An agent of the account an agent key belongs to; anything else is 401 (`Unauthenticated`)."""
    return _caller(request, credentials, "agent")


#: Seconds a key the remote-play routes found valid is taken on trust before it is checked again
#: (so a revoked agent key still plays for at most this long); 0 checks it on every request.
KEY_RECHECK_SECONDS = 5.0
#: Keys a process remembers as verified (the oldest forgotten first).
KNOWN_KEYS = 10_000


class VerifiedKeys:
    """The keys this process found valid lately, for the remote-play routes (issue 26: the key
    check was a database read on every step).

    Remembered by a SHA-256 digest of the kind and the presented key (never the key itself), with
    the actor it stood for and when it was checked; a key seen again within `recheck` seconds of
    its check is its actor at once, otherwise `service.keys.authenticate` checks it (the stored
    digest compared in constant time, revocation read) and it is remembered anew. A refusal is
    never remembered: an unknown or revoked key is checked, and refused, every time. Thread-safe
    (the play lane's threads share it)."""

    def __init__(self, recheck: float = KEY_RECHECK_SECONDS, clock: Callable[[], float] = time.monotonic,
                 size: int = KNOWN_KEYS) -> None:
        self.recheck, self.clock, self.size = recheck, clock, size
        self._lock = threading.Lock()
        self._known: OrderedDict[bytes, tuple[Actor, float]] = OrderedDict()
        self.checked = 0  # keys checked against the store (for tests and benchmarks)

    def authenticate(self, store: Store, secret: bytes, presented: str | None, kind: str) -> Actor:
        """The actor `presented` stands for (as `keys.authenticate`), from memory while its check is recent."""
        if not presented or len(presented) > keys.MAX_PRESENTED or self.recheck <= 0:
            self.checked += 1
            return keys.authenticate(store, secret, presented, kind)
        seen = hashlib.sha256(f"{kind}\n{presented}".encode("utf-8", "surrogateescape")).digest()
        now = self.clock()
        with self._lock:
            found = self._known.get(seen)
        if found is not None and 0 <= now - found[1] < self.recheck:
            return found[0]
        self.checked += 1
        try:
            actor = keys.authenticate(store, secret, presented, kind)
        except BaseException:
            with self._lock:
                self._known.pop(seen, None)
            raise
        with self._lock:
            self._known[seen] = (actor, now)
            self._known.move_to_end(seen)
            while len(self._known) > self.size:
                self._known.popitem(last=False)
        return actor


_VERIFIED_GUARD = threading.Lock()


def verified_keys(app: Any) -> VerifiedKeys:
    """The app's `VerifiedKeys` (`app.state.verified_keys`), made on first use."""
    found: VerifiedKeys | None = getattr(app.state, "verified_keys", None)
    if found is None:
        with _VERIFIED_GUARD:
            found = getattr(app.state, "verified_keys", None)
            if found is None:
                found = app.state.verified_keys = VerifiedKeys()
    return found
