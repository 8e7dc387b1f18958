"""The `openai:MODEL` adapter, driven through the real `openai` client against a local fake.

Everything here goes over loopback HTTP to `FakeOpenAI`: what the server receives is what a real
endpoint would receive, and what the agent returns is parsed by the real client from real JSON.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from assay.agents.protocol import Unreachable
from assay.agents.openai_agent import DEFAULT_BASE_URL, OpenAIAgent
from assay.errors import BadInput
try:  # `python -m pytest` (make test) puts the repo root on sys.path ...
    from tests.support.fake_openai import FakeOpenAI, assistant, error, tool_call
except ModuleNotFoundError:  # ... a bare `pytest` only puts tests/ there (no tests/__init__.py)
    from support.fake_openai import FakeOpenAI, assistant, error, tool_call  # type: ignore[no-redef]

KEY = "sk-test-0123456789abcdef-do-not-leak"

FINISH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "finish",
        "description": "End the run and report whether the task succeeded.",
        "parameters": {
            "type": "object",
            "properties": {"claimed_success": {"type": "boolean"}, "summary": {"type": "string"}},
            "required": ["claimed_success", "summary"],
            "additionalProperties": False,
        },
    },
}
LIST_HOSTS_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "list_hosts",
        "description": "List the hosts in the estate.",
        "parameters": {"type": "object", "properties": {"role": {"type": "string"}}},
    },
}
TOOLS = [LIST_HOSTS_TOOL, FINISH_TOOL]
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You operate an IT estate. Call finish when done."},
    {"role": "user", "content": "The web tier is slow. Find out why."},
]


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start from no OPENAI_* settings, whatever the developer's shell exports."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A fake whose default answer is a plain "ok"; tests that need a script build their own."""
    with FakeOpenAI() as fake:
        yield fake


def ask(agent: OpenAIAgent, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One turn, as the async driver takes it: the agent answers with an awaitable."""
    async def turn() -> dict[str, Any]:
        try:
            return await agent(messages, tools)
        finally:
            await agent.endpoint.aclose()
    return asyncio.run(turn())


def make_agent(fake: FakeOpenAI, **options: Any) -> OpenAIAgent:
    options.setdefault("api_key", KEY)
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 10.0)
    return OpenAIAgent("fake-model-1", base_url=fake.base_url, **options)


# -- the reply, in protocol shape --------------------------------------------------------------


def test_tool_calls_come_back_in_protocol_shape() -> None:
    calls = [
        tool_call("list_hosts", {"role": "web"}, call_id="call_hosts"),
        tool_call("finish", {"claimed_success": False, "summary": "not yet"}, call_id="call_finish"),
    ]
    with FakeOpenAI([assistant("Looking at the hosts.", calls)]) as fake:
        reply = ask(make_agent(fake), MESSAGES, TOOLS)

    assert reply == {
        "role": "assistant",
        "content": "Looking at the hosts.",
        "tool_calls": [
            {
                "id": "call_hosts",
                "type": "function",
                "function": {"name": "list_hosts", "arguments": '{"role": "web"}'},
            },
            {
                "id": "call_finish",
                "type": "function",
                "function": {
                    "name": "finish",
                    "arguments": '{"claimed_success": false, "summary": "not yet"}',
                },
            },
        ],
    }
    assert isinstance(reply, dict) and all(type(call) is dict for call in reply["tool_calls"])
    assert json.loads(json.dumps(reply)) == reply  # plain data, nothing from the client leaks out
    # the call's usage as the endpoint reported it, measured beside the message (never in it)
    served = fake.completions[-1]["usage"]
    usage = reply.measured_usage  # type: ignore[attr-defined]
    assert (usage.model, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.calls) == (
        "fake-model-1", served["prompt_tokens"], served["completion_tokens"], 0, 1)
    assert usage.prompt_tokens > 0 and usage.latency_ms >= 0


def test_arguments_stay_the_raw_string_even_when_not_json() -> None:
    """Validating arguments is the harness's job; the adapter must not fix or drop them."""
    raw = '{"claimed_success": tru'
    with FakeOpenAI([assistant(tool_calls=[tool_call("finish", raw, call_id="c1")])]) as fake:
        reply = ask(make_agent(fake), MESSAGES, TOOLS)

    assert reply["content"] is None
    assert reply["tool_calls"][0]["function"] == {"name": "finish", "arguments": raw}


def test_a_content_only_answer_has_no_tool_calls_key() -> None:
    with FakeOpenAI([assistant("I think the cache is cold.")]) as fake:
        reply = ask(make_agent(fake), MESSAGES, TOOLS)

    assert reply == {"role": "assistant", "content": "I think the cache is cold."}


def test_no_choices_is_an_empty_message_for_the_harness_to_judge() -> None:
    with FakeOpenAI([{"choices": []}]) as fake:
        reply = ask(make_agent(fake), MESSAGES, TOOLS)

    assert reply == {"role": "assistant", "content": None}


# -- the request, as the endpoint sees it ------------------------------------------------------


def test_request_carries_model_messages_tools_and_temperature_unchanged(server: FakeOpenAI) -> None:
    ask(make_agent(server), MESSAGES, TOOLS)

    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent["model"] == "fake-model-1"
    assert sent["messages"] == MESSAGES
    assert sent["tools"] == TOOLS
    assert sent["temperature"] == 0
    assert "max_tokens" not in sent
    assert "stream" not in sent or sent["stream"] is False


def test_the_body_is_json_and_says_so(server: FakeOpenAI) -> None:
    ask(make_agent(server), MESSAGES, TOOLS)

    assert server.content_types == ["application/json"]


def test_tool_schemas_encoded_once_still_follow_every_change(server: FakeOpenAI) -> None:
    """The endpoint keeps the last tool list's JSON; a changed list (or one changed in place after
    it was sent) is sent as it now is, never as it was cached."""
    agent = make_agent(server)
    tools = json.loads(json.dumps(TOOLS))
    ask(agent, MESSAGES, tools)
    tools[0]["function"]["description"] = "changed in place"
    ask(agent, MESSAGES, tools)
    fewer = tools[:1]
    ask(make_agent(server, endpoint=agent.endpoint), MESSAGES, fewer)

    assert server.requests[0]["tools"] == TOOLS
    assert server.requests[1]["tools"][0]["function"]["description"] == "changed in place"
    assert server.requests[2]["tools"] == fewer


def test_the_key_is_sent_as_a_bearer_token(server: FakeOpenAI) -> None:
    ask(make_agent(server), MESSAGES, TOOLS)

    assert server.authorizations == [f"Bearer {KEY}"]


def test_an_ongoing_conversation_passes_through_unchanged(server: FakeOpenAI) -> None:
    """Earlier assistant tool calls and the tool replies to them reach the endpoint verbatim."""
    conversation = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("list_hosts", {"role": "web"}, call_id="call_1")],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '["web-1", "web-2"]'},
        {"role": "assistant", "content": "Two web hosts.", "tool_calls": [tool_call("nope", "{}", "call_2")]},
        {"role": "tool", "tool_call_id": "call_2", "content": "error: unknown tool 'nope'"},
    ]
    snapshot = json.loads(json.dumps(conversation))

    ask(make_agent(server), conversation, TOOLS)

    assert server.requests[0]["messages"] == snapshot
    assert conversation == snapshot  # and the harness's own list is left as it was


def test_no_tools_means_no_tools_key(server: FakeOpenAI) -> None:
    """The real API rejects `"tools": []`, so an empty list must be omitted, not sent."""
    reply = ask(make_agent(server), MESSAGES, [])

    assert reply == {"role": "assistant", "content": "ok"}
    assert "tools" not in server.requests[0]


def test_temperature_and_max_tokens_are_sent_when_configured(server: FakeOpenAI) -> None:
    ask(make_agent(server, temperature=0.7, max_tokens=256), MESSAGES, TOOLS)

    assert server.requests[0]["temperature"] == 0.7
    assert server.requests[0]["max_tokens"] == 256


def test_each_call_is_exactly_one_request(server: FakeOpenAI) -> None:
    agent = make_agent(server)
    ask(agent, MESSAGES, TOOLS)
    ask(agent, MESSAGES, TOOLS)

    assert len(server.requests) == 2


# -- errors --------------------------------------------------------------------------------------


def test_a_server_error_raises_and_never_shows_the_key() -> None:
    """The endpoint even echoes the key back; the exception the harness records must not."""
    with FakeOpenAI([error(500, f"upstream exploded while using key {KEY}")]) as fake:
        agent = make_agent(fake, max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            ask(agent, MESSAGES, TOOLS)

    assert len(fake.requests) == 1  # max_retries=0: no second attempt
    exc = caught.value
    assert "upstream exploded" in str(exc)
    for text in (str(exc), repr(exc), exc.message, json.dumps(exc.body)):
        assert KEY not in text


def test_an_authentication_error_propagates_without_the_key() -> None:
    with FakeOpenAI([error(401, f"Incorrect API key provided: {KEY}", code="invalid_api_key")]) as fake:
        with pytest.raises(openai.AuthenticationError) as caught:
            ask(make_agent(fake), MESSAGES, TOOLS)

    assert caught.value.status_code == 401
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


def test_a_transient_error_is_retried_by_the_client(server: FakeOpenAI) -> None:
    server.fail(500, times=1)
    reply = ask(make_agent(server, max_retries=1), MESSAGES, TOOLS)

    assert reply == {"role": "assistant", "content": "ok"}
    assert len(server.requests) == 2


def test_an_unreachable_endpoint_is_reported_as_unreachable_not_as_the_agents_error() -> None:
    with FakeOpenAI() as fake:
        base_url = fake.base_url  # the port is free again once the fake has stopped
    agent = OpenAIAgent("m", base_url=base_url, api_key=KEY, max_retries=0, timeout=5.0)

    with pytest.raises(Unreachable) as caught:
        ask(agent, MESSAGES, TOOLS)
    # the cause read off the chain: openai's aiohttp transport calls a refused connection a timeout
    assert str(caught.value) == f"agent endpoint {base_url} unreachable: connection refused"
    assert KEY not in str(caught.value)


# -- configuration -------------------------------------------------------------------------------


def test_config_identifies_the_agent_and_never_holds_the_key(server: FakeOpenAI) -> None:
    agent = make_agent(server, temperature=0.2, max_tokens=100)

    assert agent.config() == {
        "model": "fake-model-1",
        "base_url": server.base_url,
        "temperature": 0.2,
        "max_tokens": 100,
    }
    assert KEY not in json.dumps(agent.config())
    assert KEY not in repr(agent)


def test_config_hides_a_password_in_the_base_url() -> None:
    agent = OpenAIAgent("m", base_url="https://bob:hunter2secret@llm.example.com/v1", api_key=KEY)

    assert "hunter2secret" not in json.dumps(agent.config())
    assert "llm.example.com/v1" in agent.config()["base_url"]


def test_config_names_the_default_endpoint_when_none_is_given() -> None:
    agent = OpenAIAgent("gpt-x", api_key=KEY)

    assert agent.config()["base_url"] == DEFAULT_BASE_URL


def test_base_url_and_key_fall_back_to_the_environment(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-42")

    agent = OpenAIAgent("fake-model-1", max_retries=0)
    ask(agent, MESSAGES, TOOLS)

    assert agent.config()["base_url"] == server.base_url
    assert server.authorizations == ["Bearer sk-from-env-42"]
    assert "sk-from-env-42" not in json.dumps(agent.config())


def test_explicit_arguments_beat_the_environment(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://192.0.2.1:9/v1")  # TEST-NET: must not be used
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-42")

    ask(make_agent(server), MESSAGES, TOOLS)

    assert server.authorizations == [f"Bearer {KEY}"]


def test_a_missing_key_is_bad_input_for_a_remote_endpoint() -> None:
    with pytest.raises(BadInput, match="OPENAI_API_KEY is not set"):
        OpenAIAgent("gpt-x")
    with pytest.raises(BadInput, match="OPENAI_API_KEY is not set"):
        OpenAIAgent("gpt-x", base_url="https://llm.example.com/v1")


def test_a_loopback_endpoint_needs_no_key(server: FakeOpenAI) -> None:
    agent = OpenAIAgent("local-model", base_url=server.base_url, max_retries=0)

    assert ask(agent, MESSAGES, TOOLS) == {"role": "assistant", "content": "ok"}
    assert len(server.authorizations) == 1 and server.authorizations[0].startswith("Bearer ")


# -- the fake itself: the other tests are only as good as it is ---------------------------------


def test_the_fake_answers_404_elsewhere_and_401_without_a_key(server: FakeOpenAI) -> None:
    def status_of(path: str, headers: dict[str, str]) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}{path}",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode(),
            headers={"Content-Type": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as failure:
            return failure.code

    assert status_of("/v1/embeddings", {"Authorization": "Bearer k"}) == 404
    assert status_of("/v1/chat/completions", {}) == 401
    assert status_of("/v1/chat/completions", {"Authorization": "Bearer k"}) == 200


def test_an_exhausted_script_is_an_error_not_a_repeat() -> None:
    with FakeOpenAI([assistant("once")]) as fake:
        agent = make_agent(fake)
        assert ask(agent, MESSAGES, TOOLS)["content"] == "once"
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            ask(agent, MESSAGES, TOOLS)
