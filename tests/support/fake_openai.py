"""A real, local, OpenAI-compatible chat-completions server for tests.

Why a real server: the installed `openai` client (v3) talks through `httpx2`, which `respx`
cannot intercept, and a mock of the client would test our assumptions about the client rather
than the client. So tests drive the real `openai.OpenAI` over loopback HTTP against this server,
which speaks just enough of the API for the client to parse real `ChatCompletion` objects.

Only the standard library is used (`http.server.ThreadingHTTPServer` in a daemon thread), the
server binds to 127.0.0.1 on an ephemeral port, and nothing leaves the machine.

Usage::

    with FakeOpenAI([assistant(tool_calls=[tool_call("finish", {...})])]) as server:
        agent = OpenAIAgent("fake-model", base_url=server.base_url, api_key="sk-test")
        agent(messages, tools)
        server.requests        # every JSON body received, in order
        server.authorizations  # the Authorization header of each of those requests

What the responder gives decides the reply to each `POST /v1/chat/completions`:

* an assistant message dict (`assistant(...)`): wrapped into a full ChatCompletion with
  `finish_reason` "tool_calls" when it has tool calls, else "stop";
* a dict with a `"choices"` key: sent as the ChatCompletion body itself, with `id`, `object`,
  `created`, `model` and `usage` filled in when missing (e.g. `{"choices": []}`);
* a `FakeError` (`error(500)`): an HTTP error with an OpenAI-shaped error body.

The responder is either a callable `(request_json) -> reply`, or a sequence of replies played
in order, one per request. A scripted sequence does NOT repeat its last reply: once exhausted
every further request is answered 500 "script exhausted", because an agent that asks more often
than the test planned is a bug the test should see, not paper over. Use a callable when you
want an endless supply.

Errors queued with `server.fail(...)` are answered before the responder is consulted, so a test
can inject a failure into an otherwise scripted conversation.

Every request must carry `Authorization: Bearer <token>`; without one the server answers 401,
as the real API does. The headers are recorded so tests can assert the key was *sent*; the
server never prints or logs anything (request logging is switched off).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "FakeError",
    "FakeOpenAI",
    "Reply",
    "Responder",
    "assistant",
    "error",
    "tool_call",
]

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class FakeError:
    """An HTTP error the fake answers with, in the shape the OpenAI API uses.

    The `openai` client maps the status to its exception classes (401 → AuthenticationError,
    429 → RateLimitError, 5xx → InternalServerError, …) and retries 408/409/429/5xx.
    """

    status: int
    message: str
    type: str
    code: str | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body: `{"error": {"message", "type", "param", "code"}}`."""
        return {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}


Reply = dict[str, Any] | FakeError
"""What a responder returns for one request (see the module docstring)."""

Responder = Callable[[dict[str, Any]], Reply] | Sequence[Reply]
"""A callable `(request_json) -> Reply`, or a script of replies played in order."""


_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def error(status: int, message: str | None = None, *, type: str | None = None, code: str | None = None) -> FakeError:
    """Build a `FakeError`; message and type default to something plausible for the status."""
    return FakeError(
        status=status,
        message=message if message is not None else f"fake error {status}",
        type=type if type is not None else _DEFAULT_ERROR_TYPES.get(status, "server_error"),
        code=code,
    )


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    """Build one tool-call entry of an assistant message, as the API sends it.

    `arguments` is JSON-encoded when it is a dict; a str is sent verbatim, so tests can make
    the "model" send malformed JSON. Without `call_id` the id is derived from name and
    arguments (deterministic, so transcripts are stable); pass `call_id` when one message
    makes the same call twice.
    """
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    if call_id is None:
        call_id = "call_" + hashlib.sha256(f"{name}\0{raw}".encode()).hexdigest()[:16]
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def assistant(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Build an assistant message; `tool_calls` is present only when there are some."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return message


class FakeOpenAI:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, for the length of a `with`.

    Attributes (read them after or during the `with` block):
      `base_url`        e.g. "http://127.0.0.1:54321/v1", what a client's `base_url` should be;
      `requests`        every JSON body POSTed to /v1/chat/completions, in arrival order,
                        including those answered with an error (so retries are countable);
      `authorizations`  the `Authorization` header of each of those requests (None if absent);
      `paths`           the path of every request received, any method, any path;
      `responder_errors` exceptions a callable responder raised (each answered with a 500).
    """

    def __init__(self, responder: Responder | None = None, *, model: str | None = None) -> None:
        """`responder` defaults to answering "ok"; `model` overrides the echoed model name."""
        self._responder = responder if responder is not None else (lambda _request: assistant("ok"))
        self._script: deque[Reply] | None = None
        if not callable(self._responder):
            self._script = deque(self._responder)
        self._model = model
        self._failures: deque[FakeError] = deque()
        self._lock = threading.Lock()
        self._served = 0
        self.requests: list[dict[str, Any]] = []
        #: the Content-Type header of every chat request, in order
        self.content_types: list[str | None] = []
        self.authorizations: list[str | None] = []
        #: every ChatCompletion body answered with 200, in order (with the `usage` it reported)
        self.completions: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.responder_errors: list[Exception] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Bind to an ephemeral loopback port and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("FakeOpenAI is already running")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval: `shutdown()` waits up to one interval, and tests start many fakes.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- error injection -------------------------------------------------------------------

    def fail(
        self,
        status: int,
        message: str | None = None,
        *,
        type: str | None = None,
        code: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` chat requests with this HTTP error, before the responder."""
        with self._lock:
            for _ in range(times):
                self._failures.append(error(status, message, type=type, code=code))

    # -- request handling (called from server threads) -------------------------------------

    def _record(self, path: str) -> None:
        with self._lock:
            self.paths.append(path)

    def _reply_for(self, body: dict[str, Any], authorization: str | None) -> tuple[int, dict[str, Any]]:
        """Decide (status, JSON body) for one chat request; records it first."""
        with self._lock:
            self.requests.append(body)
            self.authorizations.append(authorization)
            if not _is_bearer(authorization):
                return 401, error(401, "Missing bearer authentication in header", code="invalid_api_key").body()
            invalid = _invalid_request(body)
            if invalid is not None:
                return 400, error(400, invalid).body()
            if self._failures:
                failure = self._failures.popleft()
                return failure.status, failure.body()
            if self._script is not None:
                if not self._script:
                    return 500, error(500, "FakeOpenAI script exhausted: more requests than replies").body()
                reply = self._script.popleft()
            else:
                reply = None
            self._served += 1
            serial = self._served
        if reply is None:  # call the responder outside the lock: it may be slow or re-entrant
            responder = self._responder
            assert callable(responder)
            try:
                reply = responder(body)
            except Exception as exc:  # a broken responder is a test bug: say so, loudly, as a 500
                with self._lock:
                    self.responder_errors.append(exc)
                return 500, error(500, f"FakeOpenAI responder raised {type(exc).__name__}: {exc}").body()
        if isinstance(reply, FakeError):
            return reply.status, reply.body()
        completion = self._completion(reply, body, serial)
        with self._lock:
            self.completions.append(completion)
        return 200, completion

    def _completion(self, reply: dict[str, Any], request: dict[str, Any], serial: int) -> dict[str, Any]:
        """Wrap a reply into a ChatCompletion body the real client parses."""
        model = self._model or str(request.get("model", "fake-model"))
        if "choices" in reply:
            completion = dict(reply)
        else:
            message = dict(reply)
            message.setdefault("role", "assistant")
            message.setdefault("content", None)
            message.setdefault("refusal", None)
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            completion = {
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            }
        completion.setdefault("id", f"chatcmpl-fake-{serial}")
        completion.setdefault("object", "chat.completion")
        completion.setdefault("created", int(time.time()))
        completion.setdefault("model", model)
        completion.setdefault("usage", _usage(request, completion))
        return completion


def _is_bearer(authorization: str | None) -> bool:
    if not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _invalid_request(body: dict[str, Any]) -> str | None:
    """The 400 message the real API would give for a request it rejects, or None.

    Only the mistakes an adapter can plausibly make are checked, so that the fake catches them
    the way the real endpoint would (the real API rejects `"tools": []`, for instance).
    """
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    if "tools" in body and (not isinstance(body["tools"], list) or not body["tools"]):
        return "[] is too short - 'tools'"
    if body.get("stream"):
        return "FakeOpenAI does not support streaming"
    return None


def _usage(request: dict[str, Any], completion: dict[str, Any]) -> dict[str, int]:
    """Rough, deterministic token counts (characters / 4), so usage-reading code has numbers."""
    prompt = len(json.dumps(request.get("messages", []))) // 4
    produced = len(json.dumps([c.get("message") for c in completion.get("choices", [])])) // 4
    return {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    """A request-handler class bound to one FakeOpenAI (the stdlib wants a class, not an object)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            """Silent: request lines carry nothing secret, but tests should not print at all."""

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_fake_{len(fake.paths)}")
            self.end_headers()
            self.wfile.write(data)

        def _drain(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _not_found(self) -> None:
            fake._record(self.path)
            self._drain()
            self._send(404, error(404, f"Unknown request URL: {self.command} {self.path}").body())

        do_GET = do_PUT = do_PATCH = do_DELETE = _not_found

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.split("?", 1)[0] != CHAT_COMPLETIONS_PATH:
                self._not_found()
                return
            fake._record(self.path)
            raw = self._drain()
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, error(400, "We could not parse the JSON body of your request.").body())
                return
            if not isinstance(body, dict):
                self._send(400, error(400, "The request body must be a JSON object.").body())
                return
            with fake._lock:
                fake.content_types.append(self.headers.get("Content-Type"))
            status, reply = fake._reply_for(body, self.headers.get("Authorization"))
            self._send(status, reply)

    return Handler
