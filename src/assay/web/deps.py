"""Dependencies every route shares (FastAPI dependency injection, so tests can override them).

- `get_store(request)`: the one `Store` this process opened at start-up (`app.state.store`).
- `api_actor`: the caller of a submitter route, from `Authorization: Bearer KEY` with an API key:
  `account_actor(account)`; no key, an unknown or revoked key, or an agent key → 401.
- `agent_actor`: the caller of a remote-play route, from an agent key: `agent_of(account)`; an API
  key here is refused like no key.
- `public_actor`: the public (`PUBLIC`); public routes never look at a key.

The key checks are implemented with the keys work (`service/keys.py`, issue 10).
"""

from __future__ import annotations

from fastapi import Request

from assay.service.actors import PUBLIC, Actor
from assay.store.db import Store


def get_store(request: Request) -> Store:
    return request.app.state.store


def public_actor() -> Actor:
    return PUBLIC


def api_actor(request: Request) -> Actor:
    raise NotImplementedError("API keys: issue 10")


def agent_actor(request: Request) -> Actor:
    raise NotImplementedError("agent keys: issue 10")
