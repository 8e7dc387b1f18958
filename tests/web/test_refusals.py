"""Every API refusal has one shape, `{"detail": str, "field": str | null}`, documented in OpenAPI as
the `Refusal` schema (issue 29, item 3): request validation included, said in plain words naming
the field, never echoing the value sent. Page requests get the site's HTML error page instead."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.service import accounts
from assay.service.actors import OPERATOR
from assay.store import Store
from assay.web.refusals import field_of, validation_refusal

from .conftest import bearer, issue_key, make_app


def _refusal_schema(app: Any) -> dict[str, Any]:
    document = app.openapi()
    return document["components"]["schemas"]["Refusal"]


def test_every_api_4xx_from_a_sample_of_bad_requests_validates_against_the_one_schema(sqlite_store: Store) -> None:
    accounts.create(sqlite_store, "alice", None, actor=OPERATOR)
    app = make_app(sqlite_store, rate_limit=0, body_limit=4096)
    client = TestClient(app, raise_server_exceptions=False)
    key = bearer(issue_key(sqlite_store, "alice", "api"))
    schema = _refusal_schema(app)
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/api/submissions", {"json": {"suite": "forge"}, "headers": key}),  # missing fields
        ("POST", "/api/submissions", {"json": {"suite": "forge", "label": "x", "agent": 7}, "headers": key}),
        ("POST", "/api/submissions", {"json": {"suite": "forge", "label": "x", "agent": "remote", "nope": 1},
                                      "headers": key}),
        ("POST", "/api/submissions", {"content": b"{not json", "headers": {**key, "Content-Type": "application/json"}}),
        ("POST", "/api/submissions", {"json": {"suite": "forge", "label": "x", "agent": "remote"}}),  # 401
        ("GET", "/api/suites/nosuch/versions", {}),  # 404 from the service
        ("GET", "/api/nosuch", {}),  # 404: no route
        ("DELETE", "/api/suites", {}),  # 405
        ("GET", "/api/leaderboard/forge?limit=abc", {}),  # a query parameter
        ("POST", "/api/panel/applications", {"json": {"email": "a@example.org"}}),
        ("POST", "/api/panel/applications", {"content": b"[1]", "headers": {"Content-Type": "application/json"}}),
        ("POST", "/api/benchmark/ingest", {"json": {"action": "finalize-run", "run": "r"}}),  # no session: 401
        ("POST", "/api/submissions", {"content": b"x" * 5000, "headers": key}),  # 413
        ("POST", "/api/submissions", {"content": b"[" * 100 + b"]" * 100, "headers": key}),  # too deep
    ]
    statuses = []
    for method, url, kwargs in requests:
        answer = client.request(method, url, **kwargs)
        statuses.append(answer.status_code)
        assert 400 <= answer.status_code < 500, (method, url, answer.status_code, answer.text)
        assert answer.headers["content-type"].startswith("application/json"), (method, url)
        jsonschema.validate(answer.json(), schema)
    assert {401, 404, 405, 413, 422} <= set(statuses)
    limited = TestClient(make_app(sqlite_store, rate_limit=0.001, rate_burst=1))
    limited.get("/api/suites")
    answer = limited.get("/api/suites")
    assert answer.status_code == 429 and answer.headers["Retry-After"]
    jsonschema.validate(answer.json(), schema)


def test_request_validation_names_the_field_in_plain_words_without_the_input(sqlite_store: Store) -> None:
    accounts.create(sqlite_store, "alice", None, actor=OPERATOR)
    client = TestClient(make_app(sqlite_store, rate_limit=0))
    key = bearer(issue_key(sqlite_store, "alice", "api"))
    missing = client.post("/api/submissions", json={"suite": "forge", "agent": "remote"}, headers=key).json()
    assert missing == {"detail": "label: required field is missing", "field": "label"}
    wrong = client.post("/api/submissions", json={"suite": "forge", "label": "x", "agent": "sekrit-agent"},
                        headers=key).json()
    assert wrong["field"] == "agent" and "sekrit" not in wrong["detail"] and "literal" not in wrong["detail"]
    nested = client.post("/api/submissions", json={"suite": "forge", "label": "x",
                                                   "agent": {"spec": "openai:m", "base_url": "ftp://sekrit"}},
                         headers=key).json()
    assert nested["field"] == "agent.base_url" and "sekrit" not in nested["detail"]
    assert nested["detail"].startswith("agent.base_url: ")
    query = client.get("/api/leaderboard/forge?limit=abc").json()
    assert query == {"detail": "limit: must be a whole number, not a string", "field": "limit"}


def test_the_openapi_document_names_one_refusal_schema_for_every_4xx(sqlite_store: Store) -> None:
    document = make_app(sqlite_store).openapi()
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert schemas["Refusal"]["required"] == ["detail", "field"]
    seen = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for code, answer in operation["responses"].items():
                if code.startswith("4"):
                    seen += 1
                    ref = answer["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/Refusal", (method, path, code)
            if path.startswith("/api/"):
                assert {"422", "429"} <= set(operation["responses"]), (method, path)
    assert seen > 40


@pytest.mark.parametrize(("loc", "field"), [
    (("body", "agent", "literal['remote']"), "agent"),
    (("body", "agent", "ModelAgent", "base_url"), "agent.base_url"),
    (("body", "ratings", "safety"), "ratings.safety"),
    (("query", "limit"), "limit"),
    (("body", "items", 2, "name"), "items[2].name"),
    (("body",), None),
])
def test_a_location_is_the_dotted_field_without_body_or_union_tags(loc: tuple[Any, ...], field: str | None) -> None:
    assert field_of(loc) == field


_KINDS = ["missing", "string_type", "int_parsing", "string_pattern_mismatch", "string_too_long", "literal_error",
          "greater_than_equal", "extra_forbidden", "dict_type", "something_new"]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(errors=st.lists(st.tuples(st.sampled_from(_KINDS), st.lists(st.sampled_from(["body", "a", "b", 0, "Tag"]),
                                                                   max_size=4), st.text(max_size=20)),
                       min_size=1, max_size=5))
def test_a_validation_refusal_is_one_line_in_the_shape_and_never_quotes_the_input(
        errors: list[tuple[str, list[Any], str]]) -> None:
    raw = [{"type": kind, "loc": loc, "msg": "pydantic says", "input": "SENTINEL" + text,
            "ctx": {"pattern": "^x$", "max_length": 3, "ge": 1, "expected": "'remote'"}} for kind, loc, text in errors]
    body = validation_refusal(raw)
    assert set(body) == {"detail", "field"} and isinstance(body["detail"], str)
    assert "SENTINEL" not in body["detail"] and "\n" not in body["detail"]
    assert body["field"] in {field_of(e["loc"]) for e in raw}
    assert "pydantic says" not in body["detail"]


def test_page_routes_answer_errors_with_the_html_page_and_the_api_with_json(sqlite_store: Store) -> None:
    client = TestClient(make_app(sqlite_store, rate_limit=0))
    for url, status in (("/no/such/page", 404), ("/suites/nosuch", 404)):
        page = client.get(url)
        assert page.status_code == status and page.headers["content-type"].startswith("text/html")
        assert '<a href="/">' in page.text and '"detail"' not in page.text
    wrong = client.post("/benchmark", headers={"Accept": "text/html"})
    assert wrong.status_code == 405 and wrong.headers["content-type"].startswith("text/html")
    assert "Not allowed" in wrong.text
    api = client.get("/api/no/such")
    assert api.status_code == 404 and api.json() == {"detail": "Not Found", "field": None}
    limited = TestClient(make_app(sqlite_store, rate_limit=0.001, rate_burst=1))
    limited.get("/benchmark")
    page = limited.get("/benchmark")
    assert page.status_code == 429 and page.headers["content-type"].startswith("text/html")
    assert page.headers["Retry-After"] and "Too many requests" in page.text and '<a href="/">' in page.text


def test_a_bug_on_a_page_is_the_html_500_page_and_on_the_api_json(sqlite_store: Store) -> None:
    app = make_app(sqlite_store, rate_limit=0)

    def broken() -> None:
        raise RuntimeError("a bug with a secret inside")

    app.add_api_route("/broken", broken, include_in_schema=False)
    app.add_api_route("/api/broken", broken, include_in_schema=False)
    client = TestClient(app, raise_server_exceptions=False)
    page = client.get("/broken")
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "secret" not in page.text and '<a href="/">' in page.text
    api = client.get("/api/broken")
    assert api.status_code == 500 and api.json() == {"detail": "internal error", "field": None}
