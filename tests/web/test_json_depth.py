"""JSON nesting is capped before any route parses a body (issue 23, item 3).

A body nested a thousand deep used to end in `RecursionError` (500) on `POST /api/panel/applications`,
`POST /admin/login` and `POST /api/benchmark/ingest`. Every POST route of the app now answers such
a body 422 `{"detail", "field": "body"}`, deep arrays and deep objects alike, whatever the content
type says, while a body just within the cap reaches its route. A hypothesis fuzz of nested JSON
and a bounded schemathesis run over the POST routes find no 5xx.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.web.guards import MAX_JSON_DEPTH, nests_deeper

from .conftest import bearer, issue_key, make_app
from .panel.conftest import ADMIN_EMAIL, ADMIN_PASSWORD


def _deep_array(n: int) -> str:
    return "[" * n + "]" * n


def _deep_object(n: int) -> str:
    return '{"email": ' * n + '"x"' + "}" * n


def _post_paths(routes: Any, prefix: str = "") -> Any:
    for route in routes:
        included = getattr(route, "include_context", None)  # an included router: its own routes
        if included is not None:
            yield from _post_paths(route.original_router.routes, prefix + included.prefix)
        elif "POST" in (getattr(route, "methods", None) or ()):
            yield prefix + route.path


def _post_routes(app: FastAPI) -> list[str]:
    """Every POST path of the app (in the schema or not), its path parameters filled in."""
    return sorted({re.sub(r"\{[^}]+\}", "0123456789abcdef0123456789abcdef", p) for p in _post_paths(app.routes)})


@pytest.fixture
def app(web_store: Any) -> FastAPI:
    from assay.service import accounts, admins
    from assay.service.actors import OPERATOR

    admins.create(web_store, ADMIN_EMAIL, ADMIN_PASSWORD, actor=OPERATOR)
    accounts.create(web_store, "alice", "alice-h", actor=OPERATOR)
    return make_app(web_store, rate_limit=0)


def _credentials(app: FastAPI, store: Any) -> tuple[TestClient, dict[str, str]]:
    """A client logged in as the admin, and headers with its CSRF token and an agent key."""
    client = TestClient(app, base_url="https://testserver")
    login = client.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    assert login.status_code == 200, login.text
    return client, {"X-CSRF-Token": login.json()["csrf_token"], **bearer(issue_key(store, "alice", "agent"))}


def test_the_depth_scan_counts_brackets_outside_strings_only() -> None:
    assert nests_deeper(_deep_array(65).encode(), 64) and not nests_deeper(_deep_array(64).encode(), 64)
    assert not nests_deeper(json.dumps({"s": "[" * 1000}).encode(), 64)
    assert not nests_deeper(json.dumps({"s": '\\"[' * 1000}).encode(), 64)  # escaped quotes stay in the string
    assert nests_deeper(json.dumps(["\"", json.loads(_deep_array(100))]).encode(), 64)
    # the encodings json.loads itself accepts: a string cannot hide brackets in UTF-16 either
    hidden = '["\\"", ' + "[" * 100 + '"x"' + "]" * 100 + "]"
    for encoding in ("utf-8", "utf-16-le", "utf-16-be", "utf-32"):
        assert nests_deeper(hidden.encode(encoding), 64), encoding
    assert not nests_deeper(b"\xff\xfe\x00garbage", 64)


def test_every_post_route_refuses_deep_arrays_and_objects_with_a_422(app: FastAPI, web_store: Any) -> None:
    client, headers = _credentials(app, web_store)
    routes = _post_routes(app)
    assert {"/api/panel/applications", "/admin/login", "/api/benchmark/ingest", "/api/submissions",
            "/api/agent/runs/next"} <= set(routes)
    for path in routes:
        for body in (_deep_array(1000), _deep_object(1000), _deep_array(MAX_JSON_DEPTH + 1)):
            for content_type in ("application/json", "text/plain", "application/x-www-form-urlencoded"):
                answer = client.post(path, content=body, headers={**headers, "Content-Type": content_type})
                assert answer.status_code == 422, (path, content_type, answer.status_code, answer.text[:200])
                assert answer.json() == {"detail": f"the request body nests arrays and objects more than "
                                                   f"{MAX_JSON_DEPTH} deep", "field": "body"}


def test_a_body_within_the_cap_reaches_its_route(app: FastAPI, web_store: Any) -> None:
    client, headers = _credentials(app, web_store)
    within = '{"email": "p@example.org", "specialty": "sre", "years_experience": 3, "statement": "s", ' \
             '"extra": ' + _deep_array(MAX_JSON_DEPTH - 1) + "}"
    answer = client.post("/api/panel/applications", content=within, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and answer.json()["field"] != "body"  # the route's own refusal (extra field)
    login = client.post("/admin/login", content=json.dumps({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}),
                        headers={"Content-Type": "application/json"})
    assert login.status_code == 200


_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\ ax', max_size=6))


@st.composite
def _nested(draw: Any) -> Any:
    """A JSON value nested 1..3×cap deep, arrays and objects mixed (keys and strings full of brackets
    and quotes), some levels with a sibling; built iteratively, so drawing it costs nothing deep."""
    depth = draw(st.integers(1, 3 * MAX_JSON_DEPTH))
    kinds = draw(st.lists(st.sampled_from("[{"), min_size=depth, max_size=depth))
    keys = draw(st.lists(st.text(alphabet='{["x\\', max_size=3), min_size=depth, max_size=depth))
    siblings = draw(st.lists(_LEAVES, min_size=depth, max_size=depth))
    value = draw(_LEAVES)
    for kind, key, sibling in zip(kinds, keys, siblings):
        value = [value, sibling] if kind == "[" else {key: value, key + "]": sibling}
    return value


def test_nested_json_fuzz_finds_no_5xx_on_any_post_route(app: FastAPI, web_store: Any) -> None:
    client, headers = _credentials(app, web_store)
    routes = _post_routes(app)
    seen: dict[bool, int] = {True: 0, False: 0}

    @given(path=st.sampled_from(routes), value=_nested())
    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def fuzz(path: str, value: Any) -> None:
        body = json.dumps(value)
        answer = client.post(path, content=body, headers={**headers, "Content-Type": "application/json"})
        assert answer.status_code < 500, (path, answer.status_code, answer.text[:200])
        deep = nests_deeper(body.encode(), MAX_JSON_DEPTH)
        seen[deep] += 1
        if deep:
            assert answer.status_code == 422 and answer.json()["field"] == "body"

    fuzz()
    assert seen[True] and seen[False], seen


def test_schemathesis_finds_no_5xx_on_the_post_routes(app: FastAPI, web_store: Any) -> None:
    client, headers = _credentials(app, web_store)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(method="POST")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8
    cookies = {"assay_admin": client.cookies.get("assay_admin")}
    statuses: list[tuple[str, int]] = []
    for operation in operations:
        if operation.path in ("/admin/logout", "/api/submissions"):  # would end the session / start model play
            given_headers: dict[str, str] = {}
        else:
            given_headers = headers

        @given(case=operation.as_strategy())
        @settings(max_examples=6, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def no_5xx(case: Any) -> None:
            response = case.call(headers=given_headers, cookies=cookies)
            statuses.append((operation.path, response.status_code))
            assert response.status_code < 500, (operation.path, response.status_code, response.text[:200])

        no_5xx()
    assert statuses and all(status < 500 for _, status in statuses)
