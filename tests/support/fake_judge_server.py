"""A local OpenAI-compatible judge endpoint for tests: asyncio, on 127.0.0.1, in its own thread.

Why another fake beside `fake_openai.py`: a judge sends many passes at once, and the tests must see
them in flight together (latency injected with `asyncio.sleep`, never blocking other requests),
answer some with 429 + `Retry-After` or 500, and tell retries of one pass from new passes. This one
is an `aiohttp.web` server (aiohttp is installed with `openai[aiohttp]`) running its own event
loop in a daemon thread, so synchronous tests, `asyncio.run` tests and the judge's sync wrapper
can all talk to it through the real `openai` client.

The responder is called with a `JudgeCall` (the request body, the run and pass the judge's
headers name, the `TRAITS:` line's trait keys, and `attempt`: how many requests for this
(run, pass) came before, 0 for the first) and returns a reply:

* `scores({...})` / `content("text")`: 200 with that message content (a JSON object of scores,
  or any text at all, malformed JSON included);
* `http_error(status, retry_after=...)`: an OpenAI-shaped error, with `Retry-After` when given.

The default responder scores every trait 0.5. A responder may be a coroutine function.
`server.calls` lists every call (errors included) in arrival order; `max_in_flight` is the most
requests the server held at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

__all__ = ["FakeJudgeServer", "JudgeCall", "Reply", "content", "http_error", "scores", "traits_line"]


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str | None = None
    retry_after: str | None = None
    message: str = ""


def content(text: str | None) -> Reply:
    return Reply(content=text)


def scores(values: dict[str, Any], rationale: dict[str, str] | None = None) -> Reply:
    body = {"scores": values, "rationale": rationale if rationale is not None else {k: f"why {k}" for k in values}}
    return Reply(content=json.dumps(body))


def http_error(status: int, *, retry_after: float | str | None = None, message: str | None = None) -> Reply:
    return Reply(status=status, retry_after=None if retry_after is None else str(retry_after),
                 message=message or f"fake judge error {status}")


def traits_line(body: dict[str, Any]) -> list[str] | None:
    """The trait keys of the one line of the user message beginning `TRAITS: ` (None if not one)."""
    messages = body.get("messages") or []
    user = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    if not isinstance(user, str):
        return None
    found = [line for line in user.splitlines() if line.startswith("TRAITS: ")]
    if len(found) != 1:
        return None
    keys = json.loads(found[0][len("TRAITS: "):])
    return keys if isinstance(keys, list) else None


@dataclass
class JudgeCall:
    body: dict[str, Any]
    headers: dict[str, str]
    run: str | None
    pass_index: int | None
    attempt: int
    traits: list[str] | None
    arrived: float = field(default_factory=time.monotonic)
    status: int | None = None


Responder = Callable[[JudgeCall], Reply | Awaitable[Reply]]


def _half(call: JudgeCall) -> Reply:
    return scores({t: 0.5 for t in call.traits or []})


class FakeJudgeServer:
    """`with FakeJudgeServer(responder, latency=0.2) as server:` … `server.base_url`."""

    def __init__(self, responder: Responder | None = None, *, latency: float = 0.0) -> None:
        self.responder: Responder = responder or _half
        self.latency = latency
        self.calls: list[JudgeCall] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.errors: list[BaseException] = []
        self._attempts: dict[tuple[str | None, int | None], int] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeJudgeServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._open())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-judge", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake judge server did not start")
        return self

    async def _open(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeJudgeServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    # -- what was seen -------------------------------------------------------------------------

    def calls_for(self, run: str, pass_index: int) -> list[JudgeCall]:
        return [c for c in self.calls if c.run == run and c.pass_index == pass_index]

    # -- answering -----------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        run = request.headers.get("X-Assay-Run")
        raw_pass = request.headers.get("X-Assay-Judge-Pass")
        pass_index = int(raw_pass) if raw_pass is not None and raw_pass.isdigit() else None
        with self._lock:
            attempt = self._attempts.get((run, pass_index), 0)
            self._attempts[(run, pass_index)] = attempt + 1
            call = JudgeCall(body, dict(request.headers), run, pass_index, attempt, traits_line(body), arrived)
            self.calls.append(call)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency > 0:
                await asyncio.sleep(arrived + self.latency - time.monotonic())
            try:
                reply = self.responder(call)
                if asyncio.iscoroutine(reply):
                    reply = await reply
            except Exception as exc:  # a broken responder is a test bug: a loud 500
                self.errors.append(exc)
                call.status = 500
                return _error(500, f"responder raised {type(exc).__name__}: {exc}")
            assert isinstance(reply, Reply)
            call.status = reply.status
            if reply.status != 200:
                headers = {"Retry-After": reply.retry_after} if reply.retry_after is not None else {}
                return _error(reply.status, reply.message, headers)
            return web.json_response(_completion(body, reply.content, len(self.calls)))
        finally:
            with self._lock:
                self.in_flight -= 1


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    kind = "rate_limit_exceeded" if status == 429 else ("server_error" if status >= 500 else "invalid_request_error")
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": None}},
                             status=status, headers=headers)


def _completion(request: dict[str, Any], text: str | None, serial: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-judge-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.get("model", "judge-model")),
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": text, "refusal": None}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
