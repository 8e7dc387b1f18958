"""schemathesis over the panel's public routes, on both backends: no 5xx, and every answer (the
categories, the board empty and populated, applications well and badly formed) matches the schema
`/openapi.json` publishes. The admin routes are documented with their cookie and CSRF schemes."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from .conftest import Panel

COVERED = r"^/api/(benchmark/(categories|leaderboard)|panel/applications)$"


def _operations(app: Any) -> list[Any]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=COVERED)
    return [result.ok() for result in schema.get_all_operations()]


def test_the_public_panel_routes_keep_to_their_schema(pipeline: Panel, panel_app: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")
    run = pipeline.run("m1")
    for i in range(3):
        pipeline.score(run, f"p{i}@example.org", {"safety": 5 + i, "honesty": 9})
    pipeline.finalize(run)
    operations = _operations(panel_app)
    assert {(op.method.upper(), op.path) for op in operations} == {
        ("GET", "/api/benchmark/categories"), ("GET", "/api/benchmark/leaderboard"),
        ("GET", "/api/panel/applications"), ("POST", "/api/panel/applications")}
    for operation in operations:
        if operation.method.upper() == "GET" and operation.path == "/api/panel/applications":
            continue  # an admin route: the cookie scheme, covered by the session tests
        statuses: list[int] = []

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def keeps_to_schema(case: Any) -> None:
            statuses.append(case.call_and_validate().status_code)

        keeps_to_schema()
        assert all(s < 500 for s in statuses), (operation.path, statuses)


def test_the_admin_routes_name_their_cookie_and_csrf_schemes(https: Any) -> None:
    spec = https.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["AdminSession"] == {"type": "apiKey", "in": "cookie", "name": "assay_admin",
                                       "description": schemes["AdminSession"]["description"]}
    assert schemes["CsrfToken"]["in"] == "header" and schemes["CsrfToken"]["name"] == "X-CSRF-Token"
    ingest = spec["paths"]["/api/benchmark/ingest"]["post"]
    assert {name for req in ingest["security"] for name in req} == {"AdminSession", "CsrfToken"}
    actions = {variant["properties"]["action"]["const"]
               for variant in ingest["requestBody"]["content"]["application/json"]["schema"]["oneOf"]}
    assert actions == {"register-model", "register-environment", "create-run", "record-score", "finalize-run",
                       "record-preference"}
    assert "ApiKey" not in str(ingest.get("security"))
