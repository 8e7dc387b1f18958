"""A real MCP client written by nobody here: the OpenAI Agents SDK (`openai-agents`, its MCP server
support over Streamable HTTP) plays a forge run at `/mcp`, its model a local OpenAI-compatible stub
on 127.0.0.1 (`tests/support/fake_openai.py`) that answers with the scripted `diligent` agent's
moves, read off the conversation the Agents SDK sends it (issue 28)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from assay.agents.loader import load_agent
from assay.service import submissions
from assay.service.actors import OPERATOR
from tests.support.fake_openai import FakeOpenAI, assistant
from tests.support.mcp_client import OVER

from ._remote import accounts_and_keys, submit_remote
from .conftest import make_app
from .test_mcp import serving


def _text(content: Any) -> str:
    """A tool result as the Agents SDK hands it to the model: the text, however it is wrapped."""
    if isinstance(content, list):
        return "".join(_text(part) for part in content)
    if isinstance(content, dict):
        return str(content.get("text", ""))
    try:
        parsed = json.loads(content)
    except (TypeError, ValueError):
        return str(content)
    return _text(parsed) if isinstance(parsed, dict | list) else str(content)


_SDK: list[tuple[Any, Any]] = []


def _agents_sdk() -> tuple[Any, Any]:
    """The installed `agents` package (the Agents SDK), not `tests/agents`, which pytest's rootdir
    import mode puts first on the path under the same name."""
    import importlib
    import sys
    from pathlib import Path

    if _SDK:
        return _SDK[0]
    tests_dir = str(Path(__file__).resolve().parents[1])
    shadow = sys.modules.pop("agents", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != tests_dir]
    try:
        _SDK.append((importlib.import_module("agents"), importlib.import_module("agents.mcp")))
        return _SDK[0]
    finally:
        sys.path[:] = saved
        if shadow is not None:
            sys.modules["agents"] = shadow


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the client is the point; test_mcp.py runs both stores
def test_the_openai_agents_sdk_plays_a_run_over_mcp(web_store: Any) -> None:
    from openai import AsyncOpenAI

    sdk, sdk_mcp = _agents_sdk()
    Agent, OpenAIChatCompletionsModel, Runner = sdk.Agent, sdk.OpenAIChatCompletionsModel, sdk.Runner
    set_tracing_disabled, MCPServerStreamableHttp = sdk.set_tracing_disabled, sdk_mcp.MCPServerStreamableHttp

    keys = accounts_and_keys(web_store)
    app = make_app(web_store, rate_limit=0)
    submission_id = submit_remote(TestClient(app), keys.alice_api, "agents sdk").json()["id"]
    player = load_agent("reference:diligent")()
    told: list[str] = []

    def model(request: dict[str, Any]) -> dict[str, Any]:
        messages = request["messages"]
        told.append(json.dumps(request.get("tools", [])))
        last = messages[-1]
        if last["role"] == "tool":
            text = _text(last["content"])
            if OVER in text:
                return assistant(content="The run is over.")
            messages = [*messages[:-1], {**last, "content": text}]
        return player(messages, request.get("tools", []))

    set_tracing_disabled(True)
    with FakeOpenAI(model) as stub, serving(app) as url:
        async def go() -> Any:
            async with MCPServerStreamableHttp(
                    {"url": url, "headers": {"Authorization": f"Bearer {keys.alice_agent}"}},
                    client_session_timeout_seconds=60) as server:
                agent = Agent(name="player", instructions="Play the run with the tools; finish when done.",
                              mcp_servers=[server],
                              model=OpenAIChatCompletionsModel(
                                  model="stub", openai_client=AsyncOpenAI(base_url=stub.base_url, api_key="sk-test")))
                return await Runner.run(agent, "Begin.", max_turns=60)

        result = anyio.run(go)
    assert result.final_output == "The run is over."
    assert '"finish"' in told[0] and '"read_runbook"' in told[0]  # the world's tools, as the model sees them
    view = submissions.results(web_store, submissions.find(web_store, submission_id), actor=OPERATOR)
    runs = [r for case in view["cases"] for r in case["runs"]] if "cases" in view else view["runs"]
    done = [r for r in runs if r.get("status") == "completed"]
    assert len(done) == 1 and done[0]["passed"] and done[0]["score"] == 100
