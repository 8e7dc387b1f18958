"""A body the route's models refuse is a 422 in the one refusal shape that names where and why and never echoes the input:
not even text JSON can carry but Python cannot encode (a lone surrogate), which used to be a 500."""

from __future__ import annotations

from fastapi.testclient import TestClient

from assay.service import accounts
from assay.service.actors import OPERATOR
from assay.store import Store

from .conftest import bearer, issue_key, make_app


def test_a_lone_surrogate_anywhere_in_a_body_is_a_422_without_the_input(sqlite_store: Store) -> None:
    accounts.create(sqlite_store, "alice", None, actor=OPERATOR)
    client = TestClient(make_app(sqlite_store), raise_server_exceptions=False)
    body = '{"suite": "forge", "label": "\\ud800 secret-ish", "agent": "remote", "publish": false}'
    answer = client.post("/api/submissions", content=body.encode(), headers={
        **bearer(issue_key(sqlite_store, "alice", "api")), "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert set(body) == {"detail", "field"} and isinstance(body["detail"], str) and body["detail"]
    assert "secret-ish" not in answer.text


def test_a_missing_field_names_its_place(sqlite_store: Store) -> None:
    accounts.create(sqlite_store, "alice", None, actor=OPERATOR)
    client = TestClient(make_app(sqlite_store), raise_server_exceptions=False)
    answer = client.post("/api/submissions", json={"suite": "forge"},
                         headers=bearer(issue_key(sqlite_store, "alice", "api")))
    assert answer.status_code == 422
    assert answer.json() == {"detail": "label: required field is missing (also at fault: agent)", "field": "label"}
