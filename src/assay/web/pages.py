"""The public board pages: server-rendered HTML, complete without JavaScript.

- `GET /` the public suites; `GET /suites/{key}[?version=V]` a suite version's board (the latest
  public one by default) with a version picker (a plain GET form), provenance, entries in words,
  and an SVG chart drawn on the server (`web.chart`); `GET /suites/{key}/{version}/card` the eval
  card; `GET /docs` the HTTP API's reference drawn from `/openapi.json` (self-contained: no script,
  no CDN); `GET /static/style.css` the one stylesheet.
- Every handler calls `service/` as the public (`PUBLIC`, from `deps.public_actor`) and adds no
  rule of its own: what exists, which version is the default, what is ranked — all the service's.
- A suite the public may not see (internal, or none by that name) is the 404 page, the same for
  both; a board that fails to load for any other reason (the database is unreachable, a bug) is
  a distinct 5xx page that says so, with no trace: the trace goes to the server's log.

Templates autoescape, so labels, handles and notes are shown literally; the card's Markdown goes
through `web.markdown`, which escapes before it adds any markup.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from assay.errors import Invalid, NotFound
from assay.service import board as board_service
from assay.service import cards, releases
from assay.service.actors import PUBLIC, Actor
from assay.store.db import Store
from assay.web import chart, cost_chart, edge, markdown
from assay.web.deps import get_store, public_actor

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

HERE = Path(__file__).resolve().parent
STYLESHEET = HERE / "static" / "style.css"
NOT_EVIDENCE = (
    "These figures describe how each agent behaved in a simulated world whose ground truth is known. "
    "They are not evidence that an agent is safe to run in production."
)
#: No script, no frames, nothing from elsewhere: the pages need only their own stylesheet.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
CLASS_WORDS = {
    "platform": "platform class",
    "self_hosted_facilitator": "self-hosted facilitator: played against the submitter's own facilitator, "
                               "so it is listed but never ranked",
    "unclassified": "unclassified: some runs carry no facilitator classification, so it is not ranked",
}
STABILITY_WORDS = {
    "stable": "stable: safety-trait scores agreed across the reps of each scenario",
    "unstable": "unstable: a safety-trait score varied across the reps of one scenario by more than the threshold",
    "insufficient_reps": "provisional: fewer than 3 scored reps of some scenario, so stability cannot be judged yet",
}
PROVENANCE_WORDS = {
    "self_reported": "self-reported",
    "platform_verified": "verified by the platform",
}

T = TypeVar("T")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(enabled_extensions=("html",), default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["rate"] = rate
    env.filters["interval"] = interval
    env.filters["figure"] = figure
    env.globals.update(NOT_EVIDENCE=NOT_EVIDENCE, CLASS_WORDS=CLASS_WORDS, STABILITY_WORDS=STABILITY_WORDS,
                       PROVENANCE_WORDS=PROVENANCE_WORDS, stylesheet_version=_stylesheet_tag())
    return env


def _stylesheet_tag() -> str:
    return hashlib.sha256(STYLESHEET.read_bytes()).hexdigest()[:12] if STYLESHEET.is_file() else "0"


def rate(value: Any) -> str:
    """A figure as the board rounds it (4 places); words where there is none."""
    return "no number" if value is None else f"{float(value):.4f}"


def figure(value: Any) -> str:
    """A panel board figure as shown (2 places); words where there is none."""
    return "no number" if value is None else f"{float(value):.2f}"


def interval(value: Any) -> str:
    return "" if not value else f"[{float(value[0]):.4f}, {float(value[1]):.4f}]"


#: The one template environment of the web pages, the board's and the panel's (`panel_pages`).
ENV = _environment()


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _not_found(message: str) -> HTMLResponse:
    return render("error.html", 404, title="Not found", heading="Not found",
                  message=message, kind="not-found")


def _failed(what: str, exc: BaseException) -> HTMLResponse:
    from assay.store.faults import StoreUnavailable, describe, is_transient

    # unreachable, killed, locked, or still so after the retries; any other database error is a 500
    unreachable = isinstance(exc, StoreUnavailable) or is_transient(exc)
    if unreachable:  # an outage is one line in the log (as on every route); a bug, its traceback
        log.warning("%s could not be loaded: store unavailable: %s", what, describe(exc))
    else:
        log.exception("%s could not be loaded", what)
    status = 503 if unreachable else 500
    reason = ("the board's database could not be reached" if unreachable
              else "an unexpected error occurred on the server")
    page = render("error.html", status, title=f"{what[:1].upper()}{what[1:]} could not be loaded",
                  heading=f"The {what} could not be loaded",
                  message=f"The {what} failed to load: {reason}. This says nothing about any entry; "
                          "try again later.", kind="failed")
    if unreachable:
        page.headers["Retry-After"] = "5"  # as every store outage answers (`app._unavailable`)
    return page


def _attempt(what: str, load: Callable[[], T]) -> T | HTMLResponse:
    """The service's answer, the 404 page for what the public may not see, or the 5xx page."""
    try:
        return load()
    except NotFound as exc:
        return _not_found(exc.message)
    except Invalid as exc:  # a cursor this board never gave
        return render("error.html", 422, title="Not a page", heading="Not a page of this board",
                      message=exc.message, kind="not-found")
    except Exception as exc:  # noqa: BLE001 - any other failure is a failed load, never a trace
        return _failed(what, exc)


@router.get("/", response_class=HTMLResponse)
def index(store: Store = Depends(get_store), actor: Actor = Depends(public_actor)) -> Response:
    """The public suites: one line per suite, its newest public version first."""
    found = _attempt("list of suites", lambda: releases.list_releases(store, actor=actor))
    if isinstance(found, Response):
        return found
    by_key: dict[str, list[releases.SummaryView]] = {}
    for row in found:
        by_key.setdefault(row["key"], []).append(row)
    suites = []
    for key in sorted(by_key):
        versions = sorted(by_key[key], key=lambda r: releases.version_key(r["version"]), reverse=True)
        suites.append({"key": key, "latest": versions[0], "versions": [v["version"] for v in versions]})
    return render("index.html", title="Assay — public suites", suites=suites)


@router.get("/suites/{key}", response_class=HTMLResponse)
async def suite_board(request: Request, key: str, version: str | None = Query(None),
                      cursor: str | None = Query(None, max_length=200),
                      q: str | None = Query(None, max_length=200)) -> Response:
    """The board page, from the read cache in the read lane (`web.edge`)."""
    return await edge.read(request, lambda: board_page(key, version, cursor, q, get_store(request), PUBLIC))


def board_page(key: str, version: str | None = Query(None), cursor: str | None = Query(None, max_length=200),
                q: str | None = Query(None, max_length=200), store: Store = Depends(get_store),
                actor: Actor = Depends(public_actor)) -> Response:
    """A suite version's board, a page of `board_service.PAGE` entries at a time (from `cursor`),
    optionally only those whose handle or label contains `q`; without `version` the latest public one."""
    version = (version or "").strip() or None  # an empty picker value: the default version
    q = (q or "").strip() or None
    found = _attempt("board", lambda: board_service.board(store, key, version, actor=actor, limit=board_service.PAGE,
                                                          cursor=cursor or None, search=q, full_usage=True))
    if isinstance(found, Response):
        return found
    suite = found["suite"]
    picker: list[Mapping[str, object]] = list(found["versions"])
    if not any(v["version"] == suite["version"] for v in picker):  # an unlisted version, named
        picker.insert(0, {"version": suite["version"], "current": True, "released_at": None, "unlisted": True})
    return render("board.html", title=f"{suite['title']} {suite['version']} — Assay board", board=found,
                  request_cursor=cursor,
                  suite=suite, provenance=found["provenance"], entries=found["entries"], picker=picker,
                  chart=chart.board_chart(found), traits=chart.has_traits(found["entries"]),
                  cost_chart=cost_chart.cost_chart(found), cost_rows=cost_chart.cost_rows(found))


@router.get("/suites/{key}/{version}/card", response_class=HTMLResponse)
async def suite_card(request: Request, key: str, version: str) -> Response:
    """The card page, from the read cache in the read lane (`web.edge`)."""
    return await edge.read(request, lambda: card_page(key, version, get_store(request), PUBLIC))


def card_page(key: str, version: str, store: Store = Depends(get_store),
               actor: Actor = Depends(public_actor)) -> Response:
    """The eval card of one suite version, its Markdown rendered safely."""
    found = _attempt("eval card", lambda: cards.card(store, key, version, actor=actor))
    if isinstance(found, Response):
        return found
    return render("card.html", title=f"Eval card — {key} {version}", key=key, version=version,
                  card=markdown.render(found))


def _inline_refs(node: Any, schemas: dict[str, Any], depth: int = 0) -> Any:
    """A schema with its `$ref`s written in place (to a few levels), for reading on the docs page."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/") and depth < 4:
            return _inline_refs(schemas.get(ref.rsplit("/", 1)[-1], {}), schemas, depth + 1)
        return {k: _inline_refs(v, schemas, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, schemas, depth) for v in node]
    return node


def api_operations(document: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The operations of an OpenAPI document grouped by tag, in the document's order, each with
    what the docs page shows: method, path, summary, parameters, request body, answers."""
    import json

    schemas = document.get("components", {}).get("schemas", {})
    groups: dict[str, list[dict[str, Any]]] = {}
    for path, item in document.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict):
                continue
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            groups.setdefault((op.get("tags") or ["other"])[0], []).append({
                "id": op.get("operationId") or f"{method}-{path}", "method": method.upper(), "path": path,
                "summary": op.get("summary", ""), "description": op.get("description", ""),
                "auth": [name for req in op.get("security", []) for name in req],
                "parameters": op.get("parameters", []),
                "body": json.dumps(_inline_refs(body, schemas), indent=2, ensure_ascii=False) if body else None,
                "responses": [(code, answer.get("description", "")) for code, answer in op.get("responses", {}).items()],
            })
    return list(groups.items())


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> Response:
    """The API's reference, one self-contained page drawn from the app's own OpenAPI document: no
    script and no asset from a CDN, so it works offline and under the pages' security policy."""
    document = request.app.openapi()
    return render("api_docs.html", title="Assay — HTTP API", groups=api_operations(document),
                  openapi=document.get("openapi", "3"))


@router.get("/static/style.css")
def stylesheet(request: Request) -> Response:
    """The one stylesheet, cached by browsers (its URL carries its hash, so a change is a new URL)."""
    body = STYLESHEET.read_bytes()
    etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
    headers = {"Cache-Control": "public, max-age=86400", "ETag": etag, "X-Content-Type-Options": "nosniff"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="text/css; charset=utf-8", headers=headers)
