"""Public reads served from stored figures, cached at the edge (issue 26).

The board, entry and card routes only read, and only what the public may see: so one answer serves
every caller, and it changes only when the board does. `Edge.read` answers such a route:

- It runs off the event loop in the read lane, a thread pool of its own (`Lanes.reads`, an
  `anyio.CapacityLimiter`), so a crowd of readers never takes the threads remote play runs in; a
  request whose client has already gone is answered empty without being computed.
- It asks the store one cheap question first, what the board was last changed by
  (`BoardRepo.last_change`: a token over the stored figures and the events that list or label an
  entry), and answers from an in-process cache keyed by that token and the request (path and
  query): a new entry, a publication, a handle or a judgement changes the token and so every
  cached answer.
- For `Edge.fresh` seconds after the token was read (`ASSAY_CACHE_FRESH`, default 1 s; 0: ask the
  store every time) a read already cached is answered by `CachedReads`, a middleware in front of
  the routes, on the event loop: no thread, no routing, no query. When the token goes stale, one
  request is sent on to read it again while the others keep the cached answers (for one more
  window at most). So the board a reader sees is at most two windows behind the store — well
  inside the `max-age` every answer already grants a proxy or a browser — and a crowd of readers
  costs the store one query a second, not one a read, and never queues behind it.
- Each answer carries `ETag` (a digest of the token and the request), `Last-Modified` (the latest
  time the token holds) and `Cache-Control: public, max-age=N` (`Settings.cache_max_age`), and a
  request whose `If-None-Match` names the current tag is answered 304 with no body, so a reverse
  proxy or a browser serves the rest.

Remote play runs in a lane of its own (`Lanes.play`); `Arrival` stamps each request when it
reaches the server and `Answered` remembers when each run was last answered, so an agent is charged
only the time between the server's answer and its next request's arrival.

Only 200 answers are cached; refusals (404, 422) and failures are computed each time, and when the
last change cannot be read (the store is unreachable) the route answers as it would uncached.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime

import anyio
import anyio.to_thread
from fastapi import Request, Response

from starlette.types import ASGIApp, Receive, Scope, Send

from assay.store.board_repo import BoardRepo
from assay.store.db import Store
from assay.store import schema as store_schema
from assay.web.guards import send_json

#: Threads each lane runs its sync work in (per worker process); `ASSAY_READ_THREADS`,
#: `ASSAY_PLAY_THREADS` change them.
READ_THREADS = 8
PLAY_THREADS = 16
#: Answers the read cache keeps (the board's pages, entries and cards under the current token).
CACHE_SIZE = 512
#: Seconds a read token stays fresh: cached answers are served without asking the store (issue 26).
FRESH_SECONDS = 1.0


class Lanes:
    """The bounded thread pools of one app: public reads in one, remote play in another, so neither
    queues behind the other."""

    def __init__(self, reads: int = READ_THREADS, play: int = PLAY_THREADS) -> None:
        self.reads = anyio.CapacityLimiter(max(1, reads))
        self.play = anyio.CapacityLimiter(max(1, play))


@dataclass(frozen=True)
class _Cached:
    body: bytes
    media_type: str | None
    headers: tuple[tuple[str, str], ...]  # the route's own, besides length and type
    validators: dict[str, str]  # ETag, Cache-Control, Last-Modified under the token it was cached with

    def response(self, if_none_match: str | None) -> Response:
        if matches(if_none_match, self.validators["ETag"]):
            return Response(status_code=304, headers=self.validators)
        out = Response(self.body, media_type=self.media_type, headers=dict(self.headers))
        out.headers.update(self.validators)
        return out


def _etag(token: str, key: str) -> str:
    return '"' + hashlib.sha256(f"{token}\n{key}".encode()).hexdigest()[:24] + '"'


def matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (a list of tags, weak or strong, or `*`)."""
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)


class Edge:
    """The read cache and conditional answers of one app (see the module's docstring)."""

    def __init__(self, max_age: int = 10, size: int = CACHE_SIZE, fresh: float = FRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age, self.size, self.fresh, self.clock = max_age, size, fresh, clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._answers: OrderedDict[str, _Cached] = OrderedDict()
        #: the token last read from the store, its time, and when (`clock`) it was read
        self._seen: tuple[str, datetime | None, float] | None = None
        #: when (`clock`) one request was sent on to ask the store again, while the others keep
        #: the cached answers (None: nobody is asking)
        self._asking: float | None = None
        self.computed = 0  # answers computed (not served from the cache): for tests and benchmarks

    def clear(self) -> None:
        """Forget every cached answer (the next read of each computes it)."""
        with self._lock:
            self._token = None
            self._seen = None
            self._answers.clear()

    def _get(self, token: str, key: str) -> _Cached | None:
        with self._lock:
            if token != self._token:
                return None
            found = self._answers.get(key)
            if found is not None:
                self._answers.move_to_end(key)
            return found

    def _put(self, token: str, key: str, value: _Cached) -> None:
        with self._lock:
            if token != self._token:
                self._token = token
                self._answers.clear()
            self._answers[key] = value
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)

    def _headers(self, token: str, key: str, modified: datetime | None) -> dict[str, str]:
        headers = {"ETag": _etag(token, key), "Cache-Control": f"public, max-age={self.max_age}"}
        if modified is not None:
            headers["Last-Modified"] = format_datetime(modified, usegmt=True)
        return headers

    def _last_change(self, store: Store) -> tuple[str, datetime | None]:
        try:
            token, modified = BoardRepo(store).last_change()
        finally:
            with self._lock:
                self._asking = None
        with self._lock:
            self._seen = (token, modified, self.clock())
        return token, modified

    def answer(self, store: Store, key: str, if_none_match: str | None, produce: Callable[[], Response]) -> Response:
        """The answer to a public read `key` (sync: runs in the read lane)."""
        try:
            token, modified = self._last_change(store)
        except Exception:  # noqa: BLE001 - no cache then: the route answers (and refuses) as it would
            self.computed += 1
            return produce()
        cached = self._get(token, key)
        if cached is None:
            headers = self._headers(token, key, modified)
            if matches(if_none_match, headers["ETag"]):
                return Response(status_code=304, headers=headers)
            self.computed += 1
            response = produce()
            if response.status_code != 200:
                return response
            cached = _Cached(bytes(response.body), response.media_type,
                             tuple((k, v) for k, v in response.headers.items()
                                   if k.lower() not in ("content-length", "content-type")), headers)
            self._put(token, key, cached)
        return cached.response(if_none_match)

    def cached(self, key: str, if_none_match: str | None) -> Response | None:
        """The answer to `key` without the store, when the token was read within `fresh` seconds and
        the answer is cached under it (on the event loop: a dictionary lookup); else None.

        When the token has gone stale, one request is sent on (None) to ask the store again, and
        until it has (or for `fresh` seconds more at most) the others keep the cached answers:
        a crowd never queues behind a second's worth of the same question, and what it reads is
        at most two windows old. A token read two windows ago or more (the server was quiet) serves
        nobody: each request asks the store, as an uncached read does."""
        with self._lock:
            seen = self._seen
            if seen is None or seen[0] != self._token or self.fresh <= 0:
                return None
            now = self.clock()
            age = now - seen[2]
            if age >= 2 * self.fresh:
                return None  # too old to serve while somebody asks (after a quiet spell): every request asks
            if age >= self.fresh:
                if self._asking is None or now - self._asking >= self.fresh:
                    self._asking = now  # this request asks; the rest are answered meanwhile
                    return None
            found = self._answers.get(key)
            if found is None:
                return None
            self._answers.move_to_end(key)
        return found.response(if_none_match)


def _key(path: str, query: str, accept: str) -> str:
    return f"{path}?{query}\n{accept if 'markdown' in accept else ''}"


def request_key(request: Request) -> str:
    """What distinguishes one public read from another: its path, query and the kind it accepts."""
    return scope_key(request.scope)[0]


def scope_key(scope: Scope) -> tuple[str, str | None]:
    """`request_key` of a request's ASGI scope, and its `If-None-Match` (None when absent)."""
    accept, if_none_match = "", None
    for name, value in scope["headers"]:
        if name == b"accept":
            accept = value.decode("latin-1")
        elif name == b"if-none-match":
            if_none_match = value.decode("latin-1")
    return _key(scope["path"], scope["query_string"].decode("latin-1"), accept), if_none_match


class CachedReads:
    """Answers a GET that `Edge.cached` holds fresh straight from the cache, before routing (the
    innermost middleware: the guard's headers, the rate limit and the cap still apply); every
    other request goes on to the routes, where `read` computes and caches it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and "app" in scope:
            edge: Edge = scope["app"].state.edge
            key, if_none_match = scope_key(scope)
            found = edge.cached(key, if_none_match)
            if found is not None:
                await found(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def read(request: Request, produce: Callable[[], Response]) -> Response:
    """Answer a public read route from the cache, or compute it in the read lane (see the module)."""
    if await request.is_disconnected():
        return Response(status_code=499)  # nobody is listening: nothing computed
    app = request.app
    edge: Edge = app.state.edge
    lanes: Lanes = app.state.lanes
    return await anyio.to_thread.run_sync(edge.answer, app.state.store, request_key(request),
                                          request.headers.get("if-none-match"), produce, limiter=lanes.reads)


# -- the play lane: arrival stamps and answer times (issue 26) ------------------------------------

ARRIVED = "assay.arrived"
#: Runs whose last answer time a process remembers (the oldest forgotten first).
ANSWERED_SIZE = 100_000


class Arrival:
    """Stamps each request with when it reached the server (`scope["assay.arrived"]`, the app's
    `state.clock`), before any queue: remote play charges the agent from there, never for the time
    the request then waits in the server. Outermost middleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            app_state = scope["app"].state if "app" in scope else None
            clock = getattr(app_state, "clock", None)
            scope[ARRIVED] = (clock or store_schema.utcnow)()  # looked up each time: a test may set the store's clock
        await self.app(scope, receive, send)


class Answered:
    """When this process last answered each leased run, and after which of its steps (0: the
    lease): the next step is charged from then (`service.remote.step`'s `answered_at`). A step
    answered by another worker, or before a restart, counts from when its step was stored."""

    def __init__(self, size: int = ANSWERED_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, tuple[int, datetime]] = OrderedDict()

    def get(self, run_id: str) -> tuple[int, datetime] | None:
        with self._lock:
            return self._runs.get(run_id)

    def put(self, run_id: str, step: int | None, when: datetime, done: bool) -> None:
        with self._lock:
            if done or step is None:
                self._runs.pop(run_id, None)
                return
            self._runs[run_id] = (step, when)
            self._runs.move_to_end(run_id)
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)


# -- a cap on requests in flight (issue 26) --------------------------------------------------------

#: Requests a worker holds at once, besides remote play's, before it answers 503 (`ASSAY_MAX_INFLIGHT`;
#: 0: no cap). Measured (benchmarks/serve_load.md): one worker serves 2,800-4,500 cached board reads
#: a second at 64 clients, p99 under 0.5 s, so 128 in flight is a queue of well under a second.
MAX_INFLIGHT = 128
#: What a refused request is told: come back in this many seconds.
BUSY_RETRY_SECONDS = 1
PLAY_PREFIX = "/api/agent/"


#: Reads a second a worker admits while remote play is in flight there (`ASSAY_READS_WHILE_PLAYING`;
#: 0: unpaced). A cached read costs the server ~0.5-0.9 ms of CPU: 200 a second leave most of the
#: process to the agents' steps. Measured in benchmarks/serve_load.md.
READS_WHILE_PLAYING = 200
#: Play counts as "in flight" for this long after its last request ended (between an agent's steps).
PLAY_WINDOW_SECONDS = 1.0


class Admission:
    """Who is let in, and when (issue 26), for every request but remote play's:

    - past `cap` requests in flight in this worker, one is refused with 503 `{"detail", "field":
      null, "retry_after"}` and `Retry-After` before it queues anywhere: a crowd meets a quick
      refusal instead of a queue that grows;
    - while remote play is in flight here (a step or lease now, or within `PLAY_WINDOW_SECONDS`),
      reads (GET, HEAD) are paced to `reads_while_playing` a second: each waits its turn, holding its
      place under the cap, so readers take a bounded share of the process and agents the rest.

    Remote play (`/api/agent/…`: its own lane, each agent's key rate-limited) is never refused or
    paced here."""

    def __init__(self, app: ASGIApp, cap: int, reads_while_playing: float = READS_WHILE_PLAYING,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self.app, self.cap = app, cap
        self.reads_while_playing, self.clock, self.sleep = reads_while_playing, clock, sleep
        self.inflight = 0
        self.playing = 0  # play requests in flight
        self._played = float("-inf")  # when the last play request ended (`clock`)
        self._next_read = float("-inf")  # when the next paced read may go (`clock`)

    def _play_active(self, now: float) -> bool:
        return self.playing > 0 or now - self._played < PLAY_WINDOW_SECONDS

    async def _pace(self) -> None:
        now = self.clock()
        if self.reads_while_playing <= 0 or not self._play_active(now):
            return
        at = max(now, self._next_read)
        self._next_read = at + 1.0 / self.reads_while_playing
        if at > now:
            await self.sleep(at - now)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if str(scope.get("path", "")).startswith(PLAY_PREFIX):
            self.playing += 1
            try:
                await self.app(scope, receive, send)
            finally:
                self.playing -= 1
                self._played = self.clock()
            return
        if self.cap > 0 and self.inflight >= self.cap:
            await send_json(send, 503, {"detail": "the server is busy; try again shortly", "field": None,
                                        "retry_after": BUSY_RETRY_SECONDS},
                            {"retry-after": str(BUSY_RETRY_SECONDS)})
            return
        self.inflight += 1
        try:
            if scope.get("method") in ("GET", "HEAD"):
                await self._pace()
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1
