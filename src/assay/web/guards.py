"""What stands between the network and the routes: a cap on request bodies, a rate limit per key,
and a last guard that turns any bug into a bare 500. Pure ASGI middleware, so each sees the raw
byte stream and the response start, which `BaseHTTPMiddleware` hides.

- `BodyLimit` refuses a body over the cap with 413: at once when `Content-Length` says so, and
  while streaming otherwise (a chunked body, or a `Content-Length` that lies), by raising
  `BodyTooLarge` from `receive` — an `HTTPException`, so FastAPI's body parsing re-raises it as
  the 413 it is instead of calling it a parse error.
- `JsonDepth` refuses a request body that nests arrays and objects deeper than `MAX_JSON_DEPTH`
  with 422 `{"detail", "field": "body"}`, before any route parses it: Python's parser recurses,
  and a body nested a thousand deep would otherwise end in `RecursionError`. It reads the body
  (capped by `BodyLimit` outside it), counts brackets outside strings without recursing, and hands
  the route the same bytes. Every body is looked at, whatever its content type claims, since some
  routes parse JSON whatever the header says.
- `RateLimit` keeps a token bucket per caller, in this process: the caller is the key a request
  authenticates to (its id, once `service.keys.identify` found it valid; remembered by a digest of
  the header, never the key itself) or, for a request without a valid key — none, an unknown or
  revoked one, any invented value — its client address, so a thousand made-up bearer values are
  still one caller (a key revoked after it was first seen keeps drawing on its own bucket). Over the
  limit: 429 with `Retry-After` in whole seconds (the error page for a person's page request, the
  API's JSON refusal otherwise). With several workers each process keeps its own buckets, so the
  effective limit is per worker.
- `Guard` catches what nothing else did: the client gets `{"detail": "internal error"}` (or the
  error page, for a page request) and no trace; the log gets the traceback with the server secret
  scrubbed out, should it ever appear.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("assay.web")


async def send_json(send: Send, status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> None:
    """A complete JSON response, sent straight onto the ASGI channel."""
    payload = json.dumps(body).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.limit:
            await send_json(send, 413, {"detail": BodyTooLarge(self.limit).detail, "field": "body"},
                            {"connection": "close"})
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, watched)
        except BodyTooLarge as exc:  # raised where no route turned it into a response
            if started:
                raise
            await send_json(send, 413, {"detail": exc.detail, "field": "body"}, {"connection": "close"})


#: How deeply a request body may nest arrays and objects inside one another.
MAX_JSON_DEPTH = 64

#: A JSON string, escapes included (unrolled: linear, no backtracking).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def nests_deeper(body: bytes, limit: int) -> bool:
    """Whether `body`, read as JSON is (UTF-8, -16 or -32, as `json.loads` detects it), nests arrays
    and objects more than `limit` deep. Brackets inside strings do not count; nothing is parsed and
    nothing recurses. A body that is not text is not JSON either and is left to the route."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub('""', text)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False


class JsonDepth:
    def __init__(self, app: ASGIApp, limit: int = MAX_JSON_DEPTH) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before its body was in
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and nests_deeper(body, self.limit):
            await send_json(send, 422, {"detail": f"the request body nests arrays and objects more than "
                                                  f"{self.limit} deep", "field": "body"})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@dataclass
class TokenBuckets:
    """Token buckets by caller: `rate` tokens a second, up to `burst`; each request takes one.

    Single-threaded by design (the event loop's). A bucket that has refilled is the same as no
    bucket, so when more than `max_callers` are kept the full ones are dropped: memory stays
    bounded however many distinct callers arrive."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    max_callers: int = 10_000
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # caller -> (tokens, at)

    def take(self, caller: str) -> float:
        """0 when the request may go ahead (a token taken), else the seconds until one is there."""
        now = self.clock()
        tokens, at = self._buckets.get(caller, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[caller] = (tokens - 1.0, now)
            if len(self._buckets) > self.max_callers:
                self._forget_full(now)
            return 0.0
        self._buckets[caller] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        for caller, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:
                del self._buckets[caller]


#: Finds the id of the valid key a presented bearer value is, else None (`service.keys.identify`,
#: run off the event loop).
Identify = Callable[[Scope, str], Awaitable[str | None]]
#: The HTML error page for a person's page request (`scope`, status, seconds to wait), else None:
#: then the guard answers the API's JSON.
Page = Callable[..., ASGIApp | None]


def bearer_of(scope: Scope) -> str | None:
    """The bearer value of a request's `Authorization` header, if it has one."""
    credential = _header(scope, b"authorization")
    if not credential:
        return None
    scheme, _, value = credential.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def address_of(scope: Scope) -> str:
    client = scope.get("client")
    return "ip:" + (client[0] if client else "unknown")


class RateLimit:
    #: Verified keys remembered (header digest -> key id), so a known key is looked up once.
    KNOWN = 10_000

    def __init__(self, app: ASGIApp, buckets: TokenBuckets, identify: Identify | None = None,
                 page: Page | None = None) -> None:
        self.app, self.buckets, self.identify, self.page = app, buckets, identify, page
        self._known: dict[str, str] = {}

    async def caller_of(self, scope: Scope) -> str:
        """Whose bucket a request draws from: the key it authenticates to, else its client address.

        A key once found valid stays that key's caller here even after it is revoked (its requests
        are refused by the routes anyway): still one caller, never one per value."""
        presented = bearer_of(scope)
        if presented is None or self.identify is None:
            return address_of(scope)
        seen = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).hexdigest()
        key_id = self._known.get(seen)
        if key_id is None:
            try:
                key_id = await self.identify(scope, presented)
            except Exception:  # noqa: BLE001 - a store that cannot answer: the route reports it
                key_id = None
            if key_id is None:
                return address_of(scope)
            if len(self._known) >= self.KNOWN:
                self._known.pop(next(iter(self._known)))
            self._known[seen] = key_id
        return "key:" + key_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wait = self.buckets.take(await self.caller_of(scope))
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            page = self.page(scope, 429, seconds) if self.page is not None else None
            if page is not None:
                await page(scope, receive, send)
                return
            await send_json(send, 429, {"detail": f"too many requests; retry after {seconds} s", "field": None},
                            {"retry-after": str(seconds)})
            return
        await self.app(scope, receive, send)


class Guard:
    """The outermost layer: a bug answers 500 `{"detail": "internal error"}`, never a trace."""

    def __init__(self, app: ASGIApp, scrub: tuple[str, ...] = (), page: Page | None = None) -> None:
        self.app, self.scrub, self.page = app, tuple(s for s in scrub if s), page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:  # noqa: BLE001 - the one place every bug ends up
            text = "".join(traceback.format_exception(exc))
            for secret in self.scrub:
                text = text.replace(secret, "***")
            log.error("internal error on %s %s\n%s", scope.get("method"), scope.get("path"), text)
            if not started:
                page = self.page(scope, 500) if self.page is not None else None
                if page is not None:
                    await page(scope, receive, send)
                else:
                    await send_json(send, 500, {"detail": "internal error", "field": None})
