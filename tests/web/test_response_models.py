"""Every JSON route of the API declares a closed response model, and the OpenAPI document says so.

A response model with `extra="forbid"` all the way down turns a key a service view gains without
its model into a failing test (a 500 from FastAPI's response validation), never silent drift; and
the published schema (`/openapi.json`, the docs' API page) then tells a client exactly which keys
an answer holds. The binary export is the one route that answers something other than JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from assay.web.app import Settings, create_app
from assay.web.schemas import BoardEntry, Closed, SuiteSummary

#: Routes that answer a file, not JSON (method, path).
BINARY = {("GET", "/api/suites/{key}/{version}/export")}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(Settings(db_url=None, secret=b"response-models-" * 4))


def api_routes(routes: Any) -> Iterator[APIRoute]:
    """Every APIRoute of an app or router, through included routers."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):  # FastAPI's included router
            yield from api_routes(route.original_router.routes)
        elif hasattr(route, "routes") and not hasattr(route, "app"):
            yield from api_routes(route.routes)


def open_members(schema: Any, defs: dict[str, Any], where: str = "$", seen: frozenset[str] = frozenset()) -> list[str]:
    """Where a JSON Schema lets an object hold keys it does not name (or any value for a key)."""
    found: list[str] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            found += open_members(item, defs, f"{where}[{i}]", seen)
        return found
    if not isinstance(schema, dict):
        return found
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return [] if name in seen else open_members(defs[name], defs, name, seen | {name})
    if schema.get("type") == "object":
        extra = schema.get("additionalProperties", True)
        if "properties" in schema and extra is not False:
            found.append(f"{where}: an object with named keys that allows others")
        if "properties" not in schema and (extra is True or extra == {}):
            found.append(f"{where}: an object of anything")
    for key in ("properties",):
        for name, member in schema.get(key, {}).items():
            found += open_members(member, defs, f"{where}.{name}", seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += open_members(schema[key], defs, f"{where}.{key}", seen)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            found += open_members(schema[key], defs, where, seen)
    return found


def json_routes(app: FastAPI) -> list[APIRoute]:
    return [r for r in api_routes(app.router.routes) if r.include_in_schema
            and not any((m, r.path) in BINARY for m in r.methods)]


def test_the_walk_finds_every_documented_operation(app: FastAPI) -> None:
    documented = {(method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops}
    walked = {(m, r.path) for r in api_routes(app.router.routes) if r.include_in_schema for m in r.methods}
    assert walked == documented
    assert BINARY <= walked


def test_every_json_route_declares_a_closed_response_model(app: FastAPI) -> None:
    routes = json_routes(app)
    assert len(routes) >= 20
    missing = [f"{sorted(r.methods)} {r.path}" for r in routes if r.response_model is None]
    assert missing == []
    for route in routes:
        schema = TypeAdapter(route.response_model).json_schema(mode="serialization")
        assert open_members(schema, schema.get("$defs", {})) == [], route.path


def test_the_openapi_document_shows_every_answer_closed(app: FastAPI) -> None:
    document = app.openapi()
    components = document["components"]["schemas"]
    for route in json_routes(app):
        for method in route.methods:
            op = document["paths"][route.path][method.lower()]
            code = str(route.status_code or 200)
            content = op["responses"][code].get("content", {})
            assert "application/json" in content, (method, route.path)
            schema = content["application/json"]["schema"]
            assert schema, (method, route.path)
            assert open_members(schema, components) == [], (method, route.path)
    assert components["BoardEntry"]["additionalProperties"] is False
    binary = document["paths"]["/api/suites/{key}/{version}/export"]["get"]["responses"]["200"]["content"]
    assert "application/gzip" in binary


def test_the_checker_sees_an_open_model() -> None:
    class Loose(Closed):
        anything: dict[str, Any]

    schema = TypeAdapter(list[Loose]).json_schema(mode="serialization")
    assert open_members(schema, schema["$defs"]) == ["Loose.anything: an object of anything"]
    open_schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert open_members(open_schema, {}) == ["$: an object with named keys that allows others"]


def test_a_key_no_model_names_is_refused() -> None:
    summary = {"key": "forge", "version": "1.0", "title": "Forge", "language": "en", "visibility": "public",
               "reps_per_scenario": 5, "released_at": "2026-01-01T00:00:00", "release_hash": "ab" * 32,
               "builtin": True}
    assert SuiteSummary.model_validate(summary).model_dump() == summary
    with pytest.raises(ValidationError, match="extra_forbidden"):
        SuiteSummary.model_validate({**summary, "seed": 7})


def test_a_member_given_only_sometimes_is_left_out_when_absent() -> None:
    entry: dict[str, Any] = {
        "submission_id": "s1", "agent_label": "a", "label_self_declared": True, "config_signature": None,
        "public_handle": None, "play_model": None, "model_provenance": None, "measurement_era": None,
        "measurement_era_is_current": None, "variance_note": None, "harness_version": None, "digest": None,
        "rank": None, "leaderboard_class": "platform", "status": "complete", "n_runs": 1, "n_cases": 1,
        **{k: None for rate in ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")
           for k in (rate, f"{rate}_ci")},
        "facilitator_models": [], "usage": None, "cost_per_run_usd": None,
    }
    plain = BoardEntry.model_validate(entry).model_dump(mode="json")
    assert set(plain) == set(entry) and "composite" not in plain
    traits = {**entry, "composite": 0.5, "composite_ci": [0.4, 0.6], "judge_is_pinned": True}
    shown = BoardEntry.model_validate(traits).model_dump(mode="json")
    assert shown["composite"] == 0.5 and shown["judge_is_pinned"] is True and "traits" not in shown
