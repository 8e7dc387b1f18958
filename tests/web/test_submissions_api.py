"""Submissions over HTTP (API keys): the server composes the batch; the owner alone sees it.

`POST /api/submissions` composes every scenario × rep of the suite version with the server's own
seeds and answers 201 with the id; a remote agent then plays it over the agent routes, or the
server plays a model agent itself in background workers. The cap is 409, `publish` without a
public handle 422, a suite the caller may not see 404; another account's submission is 404.
On SQLite and PostgreSQL, with real keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.agents.loader import load_agent
from assay.service import accounts, releases, remote, submissions
from assay.service.actors import OPERATOR, account_actor
from assay.store import Store
from assay.web import workers
from assay.store.runs_repo import RunsRepo
from tests.board._support import mini_suite, row_counts

from ._remote import accounts_and_keys, submit_remote
from .conftest import bearer, issue_key, make_app

try:  # `python -m pytest` puts the repo root on sys.path; a bare `pytest` only tests/
    from tests.support.fake_openai import FakeOpenAI, assistant, tool_call
except ModuleNotFoundError:  # pragma: no cover
    from support.fake_openai import FakeOpenAI, assistant, tool_call  # type: ignore[no-redef]


def _client(store: Store) -> TestClient:
    return TestClient(make_app(store, rate_limit=0))


def _model(request: dict[str, Any]) -> dict[str, Any]:
    """A model that looks at the alerts once, then finishes claiming nothing."""
    if not any(m["role"] == "assistant" for m in request["messages"]):
        return assistant(tool_calls=[tool_call("list_alerts", {})])
    return assistant(tool_calls=[tool_call("finish", {"claimed_success": False, "summary": "Looked only."})])


def test_a_remote_submission_is_composed_not_played(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    created = submit_remote(client, keys.alice_api, "my agent", play_model="some-model-7b")
    assert created.status_code == 201
    body = created.json()
    assert body["suite"] == {"key": "forge", "version": "1.0"} and body["status"] == "pending"
    assert body["agent"] == {"spec": "remote", "label": "my agent", "label_self_declared": True,
                             "config_signature": remote.remote_factory().config_signature}
    assert body["remote"] is True and body["n_planned"] == 15
    submission_id = body["id"]
    assert RunsRepo(web_store).batch_agent(submission_id).load_spec == "remote"  # type: ignore[union-attr]
    assert RunsRepo(web_store).recorded([r.run_id for r in RunsRepo(web_store).planned_runs(submission_id)]) == set()

    owner = client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.alice_api)).json()
    assert owner["account"] == "alice" and owner["play_model"] == "some-model-7b"
    assert [r["status"] for r in owner["runs"]] == ["pending"] * 15
    assert len({r["seed"] for r in owner["runs"]}) == 15  # the server drew every seed

    listed = client.get("/api/submissions", headers=bearer(keys.alice_api)).json()
    assert [s["id"] for s in listed] == [submission_id] and listed[0]["status"] == "pending"
    assert client.get("/api/submissions", headers=bearer(keys.bob_api)).json() == []

    for label in ("second", "third"):
        assert submit_remote(client, keys.alice_api, label).status_code == 201
    fourth = submit_remote(client, keys.alice_api, "fourth")
    assert fourth.status_code == 409 and fourth.json()["field"] == "account"
    assert "already has 3 submission(s)" in fourth.json()["detail"]
    assert len(client.get("/api/submissions", headers=bearer(keys.alice_api)).json()) == 3
    assert submit_remote(client, keys.bob_api, "bobs").status_code == 201  # the cap is per account


def test_refusals_answer_with_their_status_and_store_nothing(web_store: Store, tmp_path: Path) -> None:
    keys = accounts_and_keys(web_store)
    accounts.create(web_store, "carol", None, actor=OPERATOR)  # no public handle
    carol = issue_key(web_store, "carol", "api")
    releases.release_path(web_store, str(mini_suite(tmp_path / "vault", key="vault", visibility="internal")),
                          actor=OPERATOR)
    client = _client(web_store)
    before = row_counts(web_store)

    no_handle = submit_remote(client, carol, "x", publish=True)
    assert no_handle.status_code == 422 and no_handle.json()["field"] == "publish"
    assert "public handle" in no_handle.json()["detail"]

    internal, unknown = submit_remote(client, keys.alice_api, "x", suite="vault"), submit_remote(
        client, keys.alice_api, "x", suite="nonesuch")
    assert internal.status_code == unknown.status_code == 404
    assert internal.json()["detail"].replace("vault", "K") == unknown.json()["detail"].replace("nonesuch", "K")
    assert submit_remote(client, keys.alice_api, "x", version="9.9").status_code == 404

    for bad in ({"suite": "forge", "agent": "remote"},  # no label
                {"suite": "forge", "label": "   ", "agent": "remote"},
                {"suite": "forge", "label": "x" * 121, "agent": "remote"},
                {"suite": "forge", "label": "x", "agent": "local"},
                {"suite": "forge", "label": "x", "agent": {"spec": "python:/tmp/agent.py:run"}},
                {"suite": "forge", "label": "x", "agent": {"spec": "reference:diligent"}},
                {"suite": "forge", "label": "x", "agent": {"spec": "openai:m", "base_url": "file:///etc/passwd"}},
                {"suite": "forge", "label": "x", "agent": "remote", "seed": 7},
                {"suite": "forge", "label": "x", "agent": "remote", "publish": "yes please"}):
        refused = client.post("/api/submissions", json=bad, headers=bearer(keys.alice_api))
        assert refused.status_code == 422, bad
        assert "Traceback" not in refused.text

    assert client.post("/api/submissions", json={"suite": "forge", "label": "x", "agent": "remote"}).status_code == 401
    assert submit_remote(client, keys.alice_agent, "x").status_code == 401  # an agent key is not an API key
    assert row_counts(web_store) == before


def test_only_the_owner_sees_or_unpublishes_a_submission(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    submission_id = submit_remote(client, keys.alice_api, "remote", publish=True).json()["id"]
    other = client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.bob_api))
    unknown = client.get(f"/api/submissions/{'0' * 32}", headers=bearer(keys.bob_api))
    assert other.status_code == unknown.status_code == 404
    assert other.json()["detail"].replace(submission_id, "X") == unknown.json()["detail"].replace("0" * 32, "X")
    assert client.post(f"/api/submissions/{submission_id}/unpublish", headers=bearer(keys.bob_api)).status_code == 404
    assert client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.alice_agent)).status_code == 401

    # unpublishing before completion stops the automatic publication; one never to be published is a 409
    stopped = client.post(f"/api/submissions/{submission_id}/unpublish", headers=bearer(keys.alice_api))
    assert stopped.status_code == 200 and stopped.json()["published"] is False
    private = submit_remote(client, keys.alice_api, "private").json()["id"]
    refused = client.post(f"/api/submissions/{private}/unpublish", headers=bearer(keys.alice_api))
    assert refused.status_code == 409 and "not published" in refused.json()["detail"]


def test_a_model_agent_is_played_by_the_server_in_the_background(web_store: Store,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0)
    client = TestClient(app)
    with FakeOpenAI(_model) as model:
        # the server sends its own key to the endpoint: a submitter may name only one it offers
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.setenv("ASSAY_MODEL_ENDPOINTS", f"https://models.example/v1, {model.base_url}")
        elsewhere = client.post("/api/submissions", headers=bearer(keys.alice_api), json={
            "suite": "forge", "label": "a model", "agent": {"spec": "openai:fake-model",
                                                           "base_url": "http://127.0.0.1:9/attacker/v1"}})
        assert elsewhere.status_code == 422 and elsewhere.json()["field"] == "base_url"
        created = client.post("/api/submissions", headers=bearer(keys.alice_api), json={
            "suite": "forge", "label": "a model", "publish": True,
            "agent": {"spec": "openai:fake-model", "base_url": model.base_url}})
        assert created.status_code == 201, created.text
        assert created.json()["remote"] is False and created.json()["agent"]["spec"] == "openai:fake-model"
        assert workers.for_app(app).wait(timeout=120)
        requests = len(model.requests)
    owner = client.get(f"/api/submissions/{created.json()['id']}", headers=bearer(keys.alice_api)).json()
    assert owner["status"] == "complete" and owner["published"] is True
    assert {r["status"] for r in owner["runs"]} == {"completed"}
    assert requests == 2 * 15  # every run asked the model twice: look, then finish
    # its runs are not remote runs: no agent key leases them
    assert client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).status_code == 204


def test_a_started_server_resumes_the_model_submissions_a_stopped_one_left(web_store: Store) -> None:
    accounts_and_keys(web_store)
    with FakeOpenAI(_model) as model:
        factory = load_agent("openai:fake-model", base_url=model.base_url)
        # the server stopped right after composing: nothing played
        submission_id = submissions.compose(web_store, "forge", factory=factory, account="alice", label="model",
                                            actor=account_actor("alice"))
        remote_id = submissions.compose(web_store, "forge", factory=remote.remote_factory(), account="alice",
                                        label="remote", actor=account_actor("alice"))
        app = make_app(web_store, rate_limit=0)
        with TestClient(app):  # start-up: the lifespan resumes what the server plays itself
            assert app.state.workers.wait(timeout=120)
    views = {s: submissions.results(web_store, s, actor=OPERATOR) for s in (submission_id, remote_id)}
    assert views[submission_id]["status"] == "complete"
    assert {r["status"] for r in views[remote_id]["runs"]} == {"pending"}  # a remote agent's to play


def test_openapi_documents_the_submission_and_remote_play_routes(web_store: Store) -> None:
    schema = _client(web_store).get("/openapi.json").json()
    paths = schema["paths"]
    assert {"post", "get"} <= set(paths["/api/submissions"])
    assert "get" in paths["/api/submissions/{submission_id}"]
    assert "post" in paths["/api/submissions/{submission_id}/unpublish"]
    lease, step = paths["/api/agent/runs/next"]["post"], paths["/api/agent/runs/{run_id}/step"]["post"]
    assert {"200", "204", "401"} <= set(lease["responses"])
    assert {"200", "404", "409", "422"} <= set(step["responses"])
    assert step["security"] == [{"AgentKey": []}] and lease["security"] == [{"AgentKey": []}]
    assert paths["/api/submissions"]["post"]["security"] == [{"ApiKey": []}]
    models = schema["components"]["schemas"]
    for name in ("SubmissionRequest", "ModelAgent", "SubmissionCreated", "OwnerView", "RunLease", "StepRequest",
                 "StepAnswer", "ChatMessage"):
        assert name in models, name
    assert {"suite", "label", "agent"} <= set(models["SubmissionRequest"]["required"])
    assert set(models["StepAnswer"]["properties"]) >= {"messages", "done", "status"}
    assert set(models["RunLease"]["properties"]) >= {"run_id", "submission_id", "scenario", "messages", "tools",
                                                     "limits"}


@pytest.mark.parametrize("junk", ["[]", "not json", '{"suite": 1}'])
def test_a_body_that_is_not_a_submission_is_422(web_store: Store, junk: str) -> None:
    keys = accounts_and_keys(web_store)
    response = _client(web_store).post("/api/submissions", content=junk,
                                       headers={**bearer(keys.alice_api), "content-type": "application/json"})
    assert response.status_code == 422 and "detail" in response.json()


def test_text_a_database_would_refuse_is_never_a_500(web_store: Store) -> None:
    """PostgreSQL refuses NUL in text: a field holding one is stored as U+FFFD (as run records are),
    a path id holding one names nothing; a base URL that does not parse is a 422."""
    keys = accounts_and_keys(web_store)
    client = TestClient(make_app(web_store, rate_limit=0), raise_server_exceptions=False)
    auth = bearer(keys.alice_api)
    created = client.post("/api/submissions", headers=auth,
                          json={"suite": "forge", "label": "nul\u0000label", "play_model": "m\u0000", "agent": "remote"})
    assert created.status_code == 201 and created.json()["agent"]["label"] == "nul\ufffdlabel"
    assert submit_remote(client, keys.alice_api, "x", suite="fo\u0000rge").status_code == 404
    for path in ("/api/submissions/ab%00cdef", "/api/submissions/ab%00cdef/unpublish"):
        assert (client.post(path, headers=auth) if path.endswith("unpublish") else client.get(path, headers=auth)
                ).status_code == 404
    unparsable = client.post("/api/submissions", headers=auth, json={
        "suite": "forge", "label": "x", "agent": {"spec": "openai:m", "base_url": "http://["}})
    assert unparsable.status_code == 422
    step = client.post("/api/agent/runs/ab%00cd/step", json={"step": 1, "message": {}},
                       headers=bearer(keys.alice_agent))
    assert step.status_code == 404
