"""The rate limit counts a request against the key it authenticates to, else its address (issue 23).

It used to key on whatever `Authorization` value arrived, so 300 invented bearer values got 300
fresh allowances and 300 (append-only, unremovable) panel applications landed in a second. Now an
invented, unknown or revoked value is no key: such requests are one caller, their client address,
however many values they try; a valid key keeps a bucket of its own.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi.testclient import TestClient

from assay.service import keys, panel
from assay.service.actors import OPERATOR

from .conftest import SECRET, bearer, issue_key, make_app

BURST = 5


def _client(store: Any) -> TestClient:
    # refill so slow it never matters within a test: exactly BURST requests go through per caller
    return TestClient(make_app(store, rate_limit=0.001, rate_burst=BURST))


def _application(i: int) -> dict[str, Any]:
    return {"email": f"p{i}@example.org", "specialty": "sre", "years_experience": 3, "statement": "s"}


def test_300_junk_bearer_values_from_one_address_are_limited_like_one_caller(web_store: Any) -> None:
    from assay.service import accounts

    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    api_key = issue_key(web_store, "alice", "api")
    client = _client(web_store)
    junk = [*(f"junk-{i}" for i in range(150)), *(f"ak_{secrets.token_urlsafe(32)}" for _ in range(150))]
    statuses = [client.post("/api/panel/applications", json=_application(i), headers=bearer(value)).status_code
                for i, value in enumerate(junk)]
    assert statuses[:BURST] == [201] * BURST and set(statuses[BURST:]) == {429}, statuses
    assert len(panel.applications(web_store, actor=OPERATOR)) == BURST
    # no header at all is the same caller (the address) and finds its bucket empty
    assert client.get("/api/suites").status_code == 429
    # a valid key from the same address is a caller of its own
    assert [client.get("/api/submissions", headers=bearer(api_key)).status_code
            for _ in range(BURST + 1)] == [200] * BURST + [429]


def test_a_revoked_key_is_no_key_to_the_rate_limit(web_store: Any) -> None:
    from assay.service import accounts

    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    view, revoked = keys.create(web_store, "alice", "api", SECRET, actor=OPERATOR)
    keys.revoke(web_store, view["id"], actor=OPERATOR)
    assert keys.identify(web_store, SECRET, revoked) is None
    client = _client(web_store)
    assert [client.get("/api/suites").status_code for _ in range(BURST)] == [200] * BURST
    assert client.get("/api/submissions", headers=bearer(revoked)).status_code == 429  # the address's bucket


def test_identify_names_the_key_a_value_is_and_nothing_else(web_store: Any) -> None:
    from assay.service import accounts

    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    view, key = keys.create(web_store, "alice", "agent", SECRET, actor=OPERATOR)
    assert keys.identify(web_store, SECRET, key) == view["id"]
    assert keys.identify(web_store, b"another-secret-" + b"x" * 32, key) is None
    for value in (None, "", key[:-1], key + "x", "x" * 10_000, f"gk_{secrets.token_urlsafe(32)}"):
        assert keys.identify(web_store, SECRET, value) is None
