"""The `openai:MODEL` agent: a model behind any OpenAI-compatible chat-completions endpoint.

The agent protocol *is* the chat-completions shape (docs/architecture.md, Agent protocol), so this adapter
is deliberately thin: one async `chat.completions.create` call per turn, the harness's messages and
tools passed through untouched, and the reply turned back into a plain protocol dict. The
harness owns the loop, the limits and the judging of what comes back (bad arguments, empty
answers); the adapter does not second-guess the model, it only reports it faithfully.

Two things it is strict about:

* the API key is a credential, not configuration: it never enters `config()` (and so never the
  config signature or a results file), `repr()`, or the message of an exception it raises;
* the endpoint *is* configuration: the resolved base URL is part of `config()`, because the same
  model name behind two endpoints is two different agents.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import ssl
import threading
import time
import weakref
from typing import Any

import httpx2
import openai

from assay.endpoints import CONNECT_TIMEOUT
from assay.endpoints import REDACTED as _REDACTED
from assay.endpoints import unreachable as _unreachable
from assay.endpoints import is_loopback as _is_loopback
from assay.endpoints import without_credentials as _without_credentials
from assay.agents.protocol import Unreachable
from assay.errors import BadInput
from assay.records import MeasuredReply, usage_of_completion

__all__ = ["DEFAULT_BASE_URL", "Endpoint", "OpenAIAgent", "OpenAIAgentError", "open_endpoint"]

#: Connections an endpoint keeps when no executor said how many runs will be in flight.
DEFAULT_POOL = 100
#: Connections per client; more clients share a larger pool (see `Endpoint`).
SHARD = 16
_AUTH: openai.RequestOptions = {"security": {"bearer_auth": True}}

#: Where the `openai` client goes when neither `base_url` nor `OPENAI_BASE_URL` says otherwise.
DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Sent as the key to loopback endpoints (local servers, test fakes) that need none. The client
#: refuses to run without some key, and a local server usually ignores it.
PLACEHOLDER_API_KEY = "unset"


class OpenAIAgentError(RuntimeError):
    """Stands in for an endpoint error whose message could not be cleaned of the API key."""


class Endpoint:
    """One OpenAI-compatible endpoint, shared by every run of a batch.

    Building an `openai` client costs tens of milliseconds of CPU, and a client per run also
    means a connection pool per run: so the clients belong to the endpoint, per event loop (a
    client belongs to the loop it first ran on), with room for the concurrency the executor
    announces with `size_pool`, and runs borrow them. The room is split over a few clients of at
    most `SHARD` connections each, because the HTTP pool looks for a free connection by scanning
    all of its own: one pool of 1000 connections costs milliseconds of CPU per request, ten pools
    of 100 do not. `aclose()` releases the current loop's clients; those of loops that ended go
    with their loop.
    """

    def __init__(self, base_url: str, key: str, *, timeout: float, max_retries: int) -> None:
        self.base_url = base_url
        self._key = key
        self.timeout = timeout
        self.max_retries = max_retries
        self.connect_timeout = CONNECT_TIMEOUT
        self.pool_size = DEFAULT_POOL
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[openai.AsyncOpenAI]] = (
            weakref.WeakKeyDictionary())
        self._guard = threading.Lock()
        self._turns = itertools.count()
        self._ssl: ssl.SSLContext | None = None
        #: the last tool list seen and its JSON: every run of a batch sends the same schemas
        self._tools: tuple[list[dict[str, Any]], bytes] | None = None

    def size_pool(self, concurrency: int) -> None:
        """Room for `concurrency` requests in flight at once (before the first client is made)."""
        self.pool_size = max(1, concurrency)

    def client(self, shard: int = 0) -> openai.AsyncOpenAI:
        """The running loop's client for `shard` (any int: a run keeps its shard, runs spread)."""
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None:
            with self._guard:
                found = self._clients.get(loop)
                if found is None:
                    found = self._clients[loop] = self._make_clients()
        return found[shard % len(found)]

    def _make_clients(self) -> list[openai.AsyncOpenAI]:
        n = -(-self.pool_size // SHARD)
        per = -(-self.pool_size // n)
        limits = httpx2.Limits(max_connections=per, max_keepalive_connections=per)
        if self._ssl is None:
            # Loading the system's CA bundle costs ~35 ms of CPU; each client would load its own.
            self._ssl = httpx2.create_ssl_context()
        # a connection gets CONNECT_TIMEOUT seconds: an endpoint that is not there fails in seconds,
        # while an answer may take the whole read timeout (a slow model is not a dead endpoint)
        timeout = httpx2.Timeout(self.timeout, connect=min(self.connect_timeout, self.timeout))
        return [openai.AsyncOpenAI(api_key=self._key, base_url=self.base_url, timeout=timeout,
                                   max_retries=self.max_retries,
                                   http_client=_http_client(limits=limits, timeout=timeout, verify=self._ssl))
                for _ in range(n)]

    def tools_json(self, tools: list[dict[str, Any]]) -> bytes:
        """`tools` as JSON, encoded once per distinct list rather than once per request."""
        cached = self._tools
        if cached is not None and (cached[0] is tools or cached[0] == tools):
            return cached[1]
        encoded = _json(tools)
        # a private copy: the caller's list may change after this turn, the cache must not
        self._tools = (json.loads(encoded), encoded)
        return encoded

    def next_shard(self) -> int:
        return next(self._turns)

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for client in self._clients.pop(loop, ()):
            await client.close()

    def __repr__(self) -> str:
        return f"Endpoint({_without_credentials(self.base_url)!r})"


class OpenAIAgent:
    """A chat-completions model as an Assay agent: `await agent(messages, tools)` → assistant message.

    Cheap to make (one per run): the client and its connections belong to the shared `Endpoint`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        endpoint: Endpoint | None = None,
    ) -> None:
        """Resolve endpoint and key (arguments first, then `OPENAI_BASE_URL` / `OPENAI_API_KEY`).

        A missing key is bad input rather than a crash at the first turn, except for a loopback
        endpoint, where a local server or a test fake typically wants no key at all.
        """
        if not model:
            raise BadInput("the model name is empty", where="openai:")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        if endpoint is None:
            endpoint = open_endpoint(model, base_url=base_url, api_key=api_key, timeout=timeout,
                                     max_retries=max_retries)
        self.endpoint = endpoint
        self.base_url = endpoint.base_url
        self._shard = endpoint.next_shard()
        # Only a real key is a secret worth scrubbing from error messages; scrubbing the
        # placeholder would only garble messages that happen to contain the word "unset".
        self._secret: str | None = None if endpoint._key == PLACEHOLDER_API_KEY else endpoint._key

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """Ask the model for its next assistant message; one API call, no retries of our own.

        `messages` and `tools` go to the endpoint exactly as the harness built them (including
        earlier assistant `tool_calls` and `tool` replies). API errors propagate, so the harness
        records the run as `crashed` with the error's type and message, with the key scrubbed;
        an endpoint that cannot be reached after the client's retries raises `Unreachable`, which
        the harness records as `error`.
        """
        request = self._body(messages, tools)
        began = time.perf_counter()
        try:
            # The client's own POST, with its auth, retries and error mapping, minus the typed-params
            # transform of `chat.completions.create`, which rebuilds every message and tool schema
            # (several ms of CPU per request) and changes nothing in a body of plain chat messages,
            # and minus building typed response models only to read four fields back out of them.
            response = await self.endpoint.client(self._shard).post(
                "/chat/completions", cast_to=httpx2.Response, content=request, options=_AUTH)
            completion = json.loads(response.content)
        except openai.APIConnectionError as exc:  # APITimeoutError included
            # the cause read off the whole chain: openai's aiohttp transport reports a refused
            # connection as a timeout, which it is not
            raise Unreachable(_clean(_unreachable("agent endpoint", self.base_url, exc), self._secret)) from None
        except Exception as exc:
            _scrub(exc, self._secret)
            if self._secret and self._secret in f"{exc}{exc!r}":
                # An exception whose message is not built from its args: withhold it entirely.
                raise OpenAIAgentError(
                    f"{type(exc).__name__} from the endpoint; message withheld because it "
                    "contained the API key"
                ) from None
            raise
        # measured, not reported: beside the message, where no JSON an agent sends can put anything
        return MeasuredReply.of(_to_protocol(completion, turn=len(messages)),
                                usage_of_completion(completion, self.model,
                                                    round((time.perf_counter() - began) * 1000)))

    def _body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bytes:
        """The request body as JSON bytes: model, messages, temperature, tools, max_tokens.

        Built by hand so the tool schemas, the same in every request of a batch, are encoded once.
        """
        parts = [b'{"model":', _json(self.model), b',"messages":', _json(messages),
                 b',"temperature":', _json(self.temperature)]
        if tools:  # the API rejects an empty tools array
            parts += [b',"tools":', self.endpoint.tools_json(tools)]
        if self.max_tokens is not None:
            parts += [b',"max_tokens":', _json(self.max_tokens)]
        parts.append(b"}")
        return b"".join(parts)

    def config(self) -> dict[str, Any]:
        """What makes two instances the same agent, for the config signature. Never the key.

        Timeouts and retries are left out on purpose: they change how a failure is handled, not
        what the agent is.
        """
        return {
            "model": self.model,
            "base_url": _without_credentials(self.base_url),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def __repr__(self) -> str:
        return (
            f"OpenAIAgent(model={self.model!r}, base_url={_without_credentials(self.base_url)!r}, "
            f"temperature={self.temperature!r}, max_tokens={self.max_tokens!r})"
        )


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _http_client(**options: Any) -> Any:
    try:
        import aiohttp  # noqa: F401 - openai's aiohttp transport: a C HTTP parser, far less CPU per request
    except ImportError:  # pragma: no cover
        return openai.DefaultAsyncHttpxClient(**options)
    return openai.DefaultAioHttpClient(**options)


def open_endpoint(model: str, *, base_url: str | None = None, api_key: str | None = None,
                  timeout: float = 60.0, max_retries: int = 2) -> Endpoint:
    """The endpoint an `openai:MODEL` agent talks to, its key resolved (never stored elsewhere)."""
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if key is None:
        if not _is_loopback(url):
            raise BadInput(
                "OPENAI_API_KEY is not set; set it, or pass an API key, for the endpoint "
                f"{_without_credentials(url)} (only a loopback endpoint may go without)",
                where=f"openai:{model}",
            )
        key = PLACEHOLDER_API_KEY
    return Endpoint(url, key, timeout=timeout, max_retries=max_retries)


def _clean(text: str, secret: str | None) -> str:
    return text.replace(secret, _REDACTED) if secret else text


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _to_protocol(completion: Any, *, turn: int) -> dict[str, Any]:
    """The protocol's assistant message for a ChatCompletion body (decoded JSON), as a plain dict.

    No choices means the model said nothing: `content` None and no tool calls, which the
    harness judges `empty`. Tool-call arguments stay the raw string the model produced, valid
    JSON or not; validating them is the harness's job, and it answers bad ones with a tool error.
    Read as leniently as the typed client reads it: a missing field is an absent one.
    """
    choices = _obj(completion).get("choices")
    if not isinstance(choices, list) or not choices:
        return {"role": "assistant", "content": None}
    message = _obj(_obj(choices[0]).get("message"))
    content = message.get("content")
    if content is None and message.get("refusal"):
        # A refusal is something the model said; dropping it would make the run look empty.
        content = message["refusal"]
    result: dict[str, Any] = {"role": "assistant", "content": content}

    calls: list[dict[str, Any]] = []
    raw_calls = message.get("tool_calls")
    for index, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        call = _obj(call)
        if call.get("type") == "custom":
            custom = _obj(call.get("custom"))
            name, arguments = custom.get("name"), custom.get("input")
        else:
            fn = _obj(call.get("function"))
            name, arguments = fn.get("name"), fn.get("arguments")
        calls.append(_tool_call(call.get("id"), name, arguments, turn=turn, index=index))
    legacy = message.get("function_call")
    if not calls and isinstance(legacy, dict):
        # Older OpenAI-compatible servers still answer with the deprecated `function_call`.
        calls.append(_tool_call(None, legacy.get("name"), legacy.get("arguments"), turn=turn, index=0))
    if calls:
        result["tool_calls"] = calls
    return result


def _tool_call(call_id: Any, name: Any, arguments: Any, *, turn: int, index: int) -> dict[str, Any]:
    """One protocol tool call; fills what lenient servers leave out, alters nothing they send.

    A missing id is synthesised (the harness must answer each call by id, and `turn` keeps the
    ids unique across the conversation); non-string arguments from a non-conforming server are
    JSON-encoded rather than dropped, so the harness still sees what was sent.
    """
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else json.dumps(arguments)
    return {
        "id": call_id if isinstance(call_id, str) and call_id else f"call_{turn}_{index}",
        "type": "function",
        "function": {"name": name if isinstance(name, str) else str(name), "arguments": arguments},
    }


def _scrub(exc: BaseException, secret: str | None) -> None:
    """Remove the API key from an exception (and its causes) in place, keeping its type.

    The harness records a crashed run with the exception's type and message, and an endpoint or
    proxy may echo the key back in an error body; the type must survive, the key must not.
    """
    if not secret:
        return
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(_redact(arg, secret) for arg in current.args)
        for attribute in ("message", "body"):
            if attribute in vars(current):
                setattr(current, attribute, _redact(getattr(current, attribute), secret))
        current = current.__cause__ or current.__context__


def _redact(value: Any, secret: str) -> Any:
    """`value` with every occurrence of `secret` in its strings replaced, recursively."""
    if isinstance(value, str):
        return value.replace(secret, _REDACTED)
    if isinstance(value, dict):
        return {_redact(k, secret): _redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(item, secret) for item in value)
    return value


