"""The two ways the service answers a refusal: the API's one JSON shape (`refusal_response`) and
the pages' HTML error page (`error_page`). Their own module, so the app and the routers it mounts
(admin, MCP) import them without importing the app."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from assay.errors import BadInput, DomainError, Unauthenticated, http_status


def refusal_response(exc: BadInput) -> JSONResponse:
    """A refusal as the client reads it: its status, one-line `detail`, and the field at fault
    (null when no one field is): the one shape of every API refusal (`web.refusals`)."""
    body: dict[str, str | None] = {"detail": str(exc), "field": exc.field if isinstance(exc, DomainError) else None}
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    return JSONResponse(body, status_code=http_status(exc), headers=headers)


_PAGE_WORDS = {
    404: ("Not found", "There is no page at this address."),
    405: ("Not allowed", "This page does not take that kind of request."),
    413: ("Too large", "The request was larger than the server takes."),
    429: ("Too many requests", "Too many requests came from you at once."),
    500: ("Server error", "An unexpected error occurred on the server. This says nothing about any entry."),
}


def wants_page(scope: Any) -> bool:
    """Whether a request is a person's page request, answered with an HTML page (a 404, 405, 429
    or 500 included), rather than the API's JSON: any path outside `/api/` and `/openapi.json` that
    is read (GET, HEAD) or posted by a browser form (one that accepts `text/html`)."""
    path = str(scope.get("path", ""))
    if path.startswith("/api/") or path in ("/api", "/openapi.json"):
        return False
    if scope.get("method") in ("GET", "HEAD"):
        return True
    accept = next((v for k, v in scope.get("headers", ()) if k == b"accept"), b"")
    return b"text/html" in accept


def error_page(status: int, retry_after: int | None = None) -> Response:
    """The site's error page for `status`: the layout, a plain message, a link home."""
    from assay.web.pages import render

    heading, message = _PAGE_WORDS.get(status, ("Refused", "The request could not be served."))
    if retry_after is not None:
        message += f" Try again in {retry_after} second{'s' if retry_after != 1 else ''}."
    response = render("error.html", status, title=heading, heading=heading, message=message,
                      kind="not-found" if status in (404, 405) else "failed")
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response
