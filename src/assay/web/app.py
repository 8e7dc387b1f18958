"""Building the app: one store per process, the routers, the guards and the error mapping.

Domain errors from `service/` become JSON `{"detail": …, "field": …}` with their status
(docs/architecture.md, Errors: `NotFound` 404, `Conflict` 409, `Forbidden` 403, `Invalid` and any other
`BadInput` 422, `Unauthenticated` 401 with `WWW-Authenticate: Bearer`); nothing else a route
raises may reach the client as a stack trace or a secret (`guards.Guard` answers a bare 500).

`create_app(settings)` opens the store at start-up (lifespan) and closes it at shutdown; a test may
hand in a `store` it opened itself, which the app then uses and leaves open. `app_from_env()` is
the factory `assay serve` gives uvicorn by import string (several workers each build their own
app), reading the settings `Settings.to_env` wrote into the environment.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from assay.errors import BadInput
from assay.store.db import Store
from assay.web.answers import error_page, refusal_response, wants_page
from assay.web.guards import BodyLimit, Guard, JsonDepth, RateLimit, TokenBuckets

#: Environment variables `app_from_env` reads (besides `ASSAY_DB` and `ASSAY_SECRET`).
ENV_BODY_LIMIT = "ASSAY_BODY_LIMIT"
ENV_RATE = "ASSAY_RATE_LIMIT"
ENV_BURST = "ASSAY_RATE_BURST"
ENV_MAX_AGE = "ASSAY_CACHE_MAX_AGE"
ENV_INFLIGHT = "ASSAY_MAX_INFLIGHT"
ENV_FRESH = "ASSAY_CACHE_FRESH"
ENV_READS_PLAYING = "ASSAY_READS_WHILE_PLAYING"

log = logging.getLogger("assay.web")


@dataclass(frozen=True)
class Settings:
    """What `assay serve` hands the app: where the store is, the server's secret, and the limits.

    `rate_limit` is requests per second per caller (refill), `rate_burst` how many may come at once;
    a `rate_limit` of 0 turns the limit off."""

    db_url: str | None
    secret: bytes = field(repr=False)  # never in a log line or a traceback's repr
    body_limit: int = 1 << 20
    rate_limit: float = 20.0
    rate_burst: int = 120
    cache_max_age: int = 10  # seconds a proxy or browser may reuse a public read (issue 26)
    max_inflight: int = 128  # requests in flight per worker (remote play aside) before a 503; 0: no cap
    cache_fresh: float = 1.0  # seconds a cached public read is served without asking the store; 0: ask each time
    reads_while_playing: float = 200.0  # reads a second per worker while remote play is in flight; 0: unpaced

    def to_env(self) -> dict[str, str]:
        """The limits as environment variables for `app_from_env` (never the secret: each worker
        reads it from where it lives, `assay.service.secret`)."""
        env = {ENV_BODY_LIMIT: str(self.body_limit), ENV_RATE: str(self.rate_limit), ENV_BURST: str(self.rate_burst),
               ENV_MAX_AGE: str(self.cache_max_age), ENV_INFLIGHT: str(self.max_inflight),
               ENV_FRESH: str(self.cache_fresh), ENV_READS_PLAYING: str(self.reads_while_playing)}
        if self.db_url is not None:
            env["ASSAY_DB"] = self.db_url
        return env

    @classmethod
    def from_env(cls) -> Settings:
        from assay.service.secret import server_secret
        from assay.store.db import default_url

        db_url = os.environ.get("ASSAY_DB") or default_url()
        return cls(db_url=db_url, secret=server_secret(db_url),
                   body_limit=_env_number(ENV_BODY_LIMIT, int, cls.body_limit),
                   rate_limit=_env_number(ENV_RATE, float, cls.rate_limit),
                   rate_burst=_env_number(ENV_BURST, int, cls.rate_burst),
                   cache_max_age=_env_number(ENV_MAX_AGE, int, cls.cache_max_age),
                   max_inflight=_env_number(ENV_INFLIGHT, int, cls.max_inflight),
                   cache_fresh=_env_number(ENV_FRESH, float, cls.cache_fresh),
                   reads_while_playing=_env_number(ENV_READS_PLAYING, float, cls.reads_while_playing))


def _env_number(name: str, kind: type[int] | type[float], default: float) -> Any:
    """A limit from the environment; a value that is not a number ≥ 0 is one refusal line."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise BadInput(f"{name} must be a number of at least 0, not '{raw}'")
    return value


def _bounded(store: Store) -> Store:
    """The same store (engine and pool), its transactions waiting out a fault for
    `REQUEST_RETRY_SECONDS` at most: a request answers 503 then, whatever bound it was opened with."""
    return store.with_retry(dataclasses.replace(store.retry, seconds=min(store.retry.seconds, REQUEST_RETRY_SECONDS)))


def _open(settings: Settings) -> Store:
    from assay.service.releases import bootstrap
    from assay.store.db import open_store

    store = _bounded(open_store(settings.db_url))
    try:
        bootstrap(store)
    except BaseException:
        store.close()
        raise
    return store


async def _refused(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BadInput)
    return refusal_response(exc)


async def _malformed(_request: Request, exc: Exception) -> JSONResponse:
    """A request the route's models refuse: 422 in the one refusal shape, the first field at fault
    and what is wrong with it in plain words, never echoing the input (it may be large, secret, or
    not even encodable — a lone surrogate made the default a 500)."""
    from assay.web.refusals import validation_refusal

    assert isinstance(exc, RequestValidationError)
    return JSONResponse(validation_refusal(list(exc.errors())), status_code=422)


#: What a page says for an HTTP status it answers without a route's own words.
def _guard_page(scope: Any, status: int, retry_after: int | None = None) -> Response | None:
    """For the guards: the error page when `scope` is a page request, else None (they answer JSON)."""
    return error_page(status, retry_after) if wants_page(scope) else None


async def _http_error(request: Request, exc: Exception) -> Response:
    """An HTTP error no route answered itself (no such route, a method it does not take, a body
    over the cap): the error page for a page request, else the API's one refusal shape."""
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if wants_page(request.scope):
        page = error_page(exc.status_code)
        page.headers.update(headers)
        return page
    return JSONResponse({"detail": str(exc.detail), "field": "body" if exc.status_code == 413 else None},
                        status_code=exc.status_code, headers=headers or None)


async def _identify(scope: Any, presented: str) -> str | None:
    """The id of the valid key `presented` is, for the rate limit (`service.keys.identify`, off the
    event loop); None while the app has no store yet."""
    from starlette.concurrency import run_in_threadpool

    from assay.service import keys

    app = scope["app"]
    store = getattr(app.state, "store", None)
    if store is None:
        return None
    return await run_in_threadpool(keys.identify, store, app.state.settings.secret, presented)


#: What a store outage answers: come back in this many seconds.
RETRY_AFTER_SECONDS = 5
#: A request waits out a store fault this long at most (a restart), then answers 503: the client
#: retries, not the server on its behalf (the background workers keep the configured bound).
REQUEST_RETRY_SECONDS = 3.0


def _outage_types() -> tuple[type[Exception], ...]:
    import sqlite3

    import psycopg
    import sqlalchemy as sa

    from assay.store.faults import StoreUnavailable

    return (StoreUnavailable, sa.exc.OperationalError, sa.exc.InterfaceError, sqlite3.OperationalError,
            psycopg.OperationalError, psycopg.InterfaceError)


def _is_page(request: Request) -> bool:
    return wants_page(request.scope)


def _failed(request: Request) -> Response:
    """A 500 that says nothing of its cause (the log has it): the error page, or the API's JSON."""
    if _is_page(request):
        from assay.web.pages import render

        return render("error.html", 500, title="Server error", heading="The request failed",
                      message="An unexpected error occurred on the server. This says nothing about any entry.",
                      kind="failed")
    return JSONResponse({"detail": "internal error", "field": None}, status_code=500)


async def _unavailable(request: Request, exc: Exception) -> Response:
    """A store outage, on any route: 503 with `Retry-After`; JSON `{"detail": "store unavailable"}`
    for the API, the error page for a page. The cause goes to the log, never to the client. A
    database error that does not pass by itself (not `faults.is_transient`, and not what the retries
    gave up on) is no outage: a 500, its cause and trace in the log."""
    from assay.store.faults import StoreUnavailable, describe, is_transient

    if not (isinstance(exc, StoreUnavailable) or is_transient(exc)):
        log.error("%s %s: database error: %s", request.method, request.url.path, describe(exc), exc_info=exc)
        return _failed(request)
    log.warning("%s %s: store unavailable: %s", request.method, request.url.path, describe(exc))
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if _is_page(request):
        from assay.web.pages import render

        response = render("error.html", 503, title="Service unavailable", heading="The store could not be reached",
                          message="The board's database could not be reached. This says nothing about any entry; "
                                  f"try again in {RETRY_AFTER_SECONDS} seconds.", kind="failed")
        response.headers.update(headers)
        return response
    return JSONResponse({"detail": "store unavailable", "field": None, "retry_after": RETRY_AFTER_SECONDS},
                        status_code=503, headers=headers)


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    from assay.web import agent_api, api, pages, submissions_api

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with app.state.mcp.running():  # MCP sessions at /mcp (issue 28)
            if store is not None:
                yield
                return
            app.state.store = _open(settings)
            try:
                yield
            finally:
                app.state.store.close()

    app = FastAPI(
        title="Assay", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,  # /docs: `pages.api_docs`
        # FastAPI's native OpenTelemetry off: it asked the global providers on every request (~4% of
        # the event loop's time under remote play, issue 26), and Assay exports no telemetry
        telemetry={"tracing": False, "metrics": False, "logs": False},
        description="Benchmarks of AI agents in simulated worlds with a known, hidden ground truth: public "
                    "suites and boards, submissions with API keys, and remote play with agent keys. Every "
                    "refusal of the API is JSON `{\"detail\": …, \"field\": …}` (the `Refusal` schema); a "
                    "figure describes behaviour in a simulated world, "
                    "not evidence that an agent is safe to run in production.",
    )
    app.state.settings = settings
    from assay.web.edge import Answered, Arrival, CachedReads, Edge, Lanes  # reads at the edge, the lanes (issue 26)

    app.state.edge = Edge(settings.cache_max_age, fresh=settings.cache_fresh)
    app.state.lanes, app.state.answered = Lanes(), Answered()
    app.state.clock = None  # when a request arrived and was answered (`utcnow`; a test may inject one)
    if store is not None:
        app.state.store = _bounded(store)
    app.add_exception_handler(BadInput, _refused)
    app.add_exception_handler(RequestValidationError, _malformed)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for outage in _outage_types():
        app.add_exception_handler(outage, _unavailable)
    app.include_router(api.router)
    from assay.web import export_api  # the public export of a suite version (issue 23)

    app.include_router(export_api.router)
    app.include_router(submissions_api.router)
    app.include_router(agent_api.router)
    app.include_router(pages.router)
    from assay.web import admin, panel_api, panel_pages  # the human panel and admin sessions (issue 11)

    app.include_router(admin.router)
    app.include_router(panel_api.router)
    app.include_router(panel_pages.router)
    from assay.web import mcp_app  # remote play over MCP (issue 28)

    mcp_app.mount(app)
    declared = _play_first(app, agent_api.router)
    # added innermost first: a request meets Guard, then RateLimit, then BodyLimit, then JsonDepth,
    # then the read cache's fresh answers, then the routes
    app.add_middleware(CachedReads)
    app.add_middleware(JsonDepth)
    app.add_middleware(BodyLimit, limit=settings.body_limit)
    if settings.rate_limit > 0:
        app.add_middleware(RateLimit, buckets=TokenBuckets(settings.rate_limit, settings.rate_burst),
                           identify=_identify, page=_guard_page)
    app.add_middleware(Guard, scrub=(settings.secret.decode("utf-8", "replace"),), page=_guard_page)
    _document_refusals(app, declared)
    if settings.max_inflight > 0 or settings.reads_while_playing > 0:
        from assay.web.edge import Admission

        # before the rate limit's key lookup: the cap in flight, and reads paced while play runs
        app.add_middleware(Admission, cap=settings.max_inflight, reads_while_playing=settings.reads_while_playing)
    app.add_middleware(Arrival)  # outermost: a request is stamped before it waits anywhere
    return app


def _play_first(app: FastAPI, play: Any) -> list[Any]:
    """Route requests to remote play's router (`play`) before the others: a request is matched
    against the app's routers in turn, and a step waited behind the public API's many routes
    (~0.5 ms of the event loop a step, issue 26). Its paths are its own, so no other route is
    shadowed. Returns the routes in their declared order, which `/openapi.json` keeps."""
    declared = list(app.router.routes)
    first = [route for route in declared if getattr(route, "original_router", None) is play]
    app.router.routes = [*first, *(route for route in declared if all(route is not f for f in first))]
    return declared


def _document_refusals(app: FastAPI, declared: list[Any]) -> None:
    """`/openapi.json` with every 4xx naming the one `Refusal` schema (`web.refusals`), its
    operations in the order the routers were declared (not the order they are matched in)."""
    from assay.web.refusals import document_refusals

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            routed = app.router.routes
            app.router.routes = declared  # a new list, not changed in place: routing reads one or the other
            try:
                schema = generate()
            finally:
                app.router.routes = routed
            app.openapi_schema = document_refusals(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def app_from_env() -> FastAPI:
    """The app a uvicorn worker builds (`assay.web.app:app_from_env`, factory=True)."""
    return create_app(Settings.from_env())
