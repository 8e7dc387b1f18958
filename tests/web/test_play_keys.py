"""The remote-play routes' key check (issue 26): a key found valid is taken on trust for
`deps.KEY_RECHECK_SECONDS`, then checked again, so a revoked agent key stops playing within that
bound; a refusal is never remembered; the other routes still refuse a revoked key at once."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.errors import Unauthenticated
from assay.service import accounts, keys
from assay.service.actors import OPERATOR, agent_of
from assay.web.deps import KEY_RECHECK_SECONDS, VerifiedKeys

from .conftest import SECRET, bearer, make_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_verified_key_is_trusted_until_its_recheck_and_a_revoked_one_is_refused_after(web_store: Any) -> None:
    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    view, key = keys.create(web_store, "alice", "agent", SECRET, actor=OPERATOR)
    clock = Clock()
    verified = VerifiedKeys(recheck=5.0, clock=clock)
    assert verified.authenticate(web_store, SECRET, key, "agent") == agent_of("alice")
    assert verified.authenticate(web_store, SECRET, key, "agent") == agent_of("alice")
    assert verified.checked == 1  # the second answer came from memory
    with pytest.raises(Unauthenticated):  # remembered for its kind only: the wrong kind is checked, and refused
        verified.authenticate(web_store, SECRET, key, "api")
    keys.revoke(web_store, view["id"], actor=OPERATOR)
    clock.now += 4.9
    assert verified.authenticate(web_store, SECRET, key, "agent") == agent_of("alice")  # within the bound
    clock.now += 0.2
    for _ in range(2):  # past it: checked again, refused, and the refusal is not remembered
        with pytest.raises(Unauthenticated):
            verified.authenticate(web_store, SECRET, key, "agent")
    assert verified.checked == 4
    clock.now -= 100  # a clock that went back is no reason to trust anything
    with pytest.raises(Unauthenticated):
        verified.authenticate(web_store, SECRET, key, "agent")


def test_unknown_and_malformed_keys_are_refused_every_time(web_store: Any) -> None:
    verified = VerifiedKeys(clock=Clock())
    for presented in ("gk_" + "x" * 43, "gk_" + "x" * 43, "", None, "gk_" * 200):
        with pytest.raises(Unauthenticated):
            verified.authenticate(web_store, SECRET, presented, "agent")
    assert verified.checked == 5


def test_the_play_routes_refuse_a_revoked_key_within_the_recheck(web_store: Any) -> None:
    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    view, key = keys.create(web_store, "alice", "agent", SECRET, actor=OPERATOR)
    app = make_app(web_store, rate_limit=0)
    clock = Clock()
    app.state.verified_keys = VerifiedKeys(clock=clock)
    client = TestClient(app)
    assert client.post("/api/agent/runs/next", headers=bearer(key)).status_code == 204  # nothing to play
    keys.revoke(web_store, view["id"], actor=OPERATOR)
    assert client.get("/api/agent/suites", headers=bearer(key)).status_code == 401  # elsewhere: at once
    clock.now += KEY_RECHECK_SECONDS
    refused = client.post("/api/agent/runs/next", headers=bearer(key))
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
