"""The lean step route (issue 26): a JSON step the model accepts skips FastAPI's per-request
machinery (`agent_api.LeanStepRoute`), and answers exactly what FastAPI's own handler answers.

Each step of a run is sent as `application/json` (the lean path) and then again, as a retry, as
`application/merge-patch+json` (a JSON type FastAPI parses and the lean path hands to FastAPI): the
two answers are the same bytes, status and content type; a refused key is the same 401 on both.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.agents.loader import load_agent
from assay.store import Store
from assay.web import agent_api

from ._remote import accounts_and_keys, submit_remote
from .conftest import bearer, make_app

LEAN, FASTAPI = "application/json", "application/merge-patch+json"


def test_the_lean_step_answers_what_fastapis_handler_answers(web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = accounts_and_keys(web_store)
    client = TestClient(make_app(web_store, rate_limit=0))
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    lease = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    run_id, tools, history, index = lease["run_id"], lease["tools"], list(lease["messages"]), 1
    agent = load_agent("reference:diligent")()
    validated: list[int] = []
    original = agent_api.StepRequest.model_validate_json

    def counting(data: Any, **kw: Any) -> Any:
        validated.append(1)
        return original(data, **kw)

    monkeypatch.setattr(agent_api.StepRequest, "model_validate_json", counting)

    def post(body: dict[str, Any], kind: str, auth: dict[str, str] | None = None) -> Any:
        return client.post(f"/api/agent/runs/{run_id}/step", content=json.dumps(body),
                           headers={"content-type": kind, **(auth or bearer(keys.alice_agent))})

    basic = {"authorization": "Basic " + keys.alice_agent}
    refused = [post({"step": 1, "message": {}}, kind, basic) for kind in (LEAN, FASTAPI)]
    assert [r.status_code for r in refused] == [401, 401] and refused[0].content == refused[1].content
    assert refused[0].headers.get("www-authenticate") == refused[1].headers.get("www-authenticate")
    while True:
        message = agent(history, tools)
        lean = post({"step": index, "message": message}, LEAN)
        again = post({"step": index, "message": message}, FASTAPI)  # a retry: answered again
        assert lean.status_code == again.status_code == 200
        assert lean.content == again.content
        assert lean.headers["content-type"] == again.headers["content-type"]
        history = [*history, message, *lean.json()["messages"]]
        if lean.json()["done"]:
            break
        index += 1
    assert index > 2 and len(validated) == index + 1  # each application/json step took the lean path


def test_play_is_routed_first_and_the_document_keeps_the_declared_order() -> None:
    app = make_app(None)
    first = app.router.routes[0]
    assert getattr(first, "original_router", None) is agent_api.router  # a step is matched at once
    paths = list(app.openapi()["paths"])
    assert paths.index("/api/agent/runs/{run_id}/step") > paths.index("/api/submissions")  # declared after them
