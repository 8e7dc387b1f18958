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
"""

from __future__ import annotations

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
