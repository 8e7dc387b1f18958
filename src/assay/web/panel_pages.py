"""The human panel's public pages, and the rendering the admin pages share: server-rendered HTML,
complete without JavaScript (plain forms, no script).

- `GET /panel` the application form; `POST /panel` (a plain form) applies and answers the same
  "thank you" whether or not the email had applied already.
- `GET /benchmark` the panel board: the ranked models with their overall figure and per-category
  medians, the provisional models as a count only, panelists by specialty and years of experience
  only. Nothing scored yet says "no runs scored yet"; a board that fails to load says that instead,
  distinctly (503 when the database is unreachable, 500 otherwise), with no trace.

Every handler calls `service.panel` as the public and adds no rule of its own. The pages extend the
board pages' layout (`base.html`, read as is) and its stylesheet; the category names come from the
taxonomy file through the service, as the API's do. Templates autoescape: a comment, a name or a
specialty is shown literally.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from assay.errors import BadInput
from assay.service import panel
from assay.service.actors import Actor
from assay.store.db import Store
from assay.web.deps import get_store, public_actor
from assay.web.pages import ENV, SECURITY_HEADERS

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

#: The pages' security headers (`pages.SECURITY_HEADERS`), and never stored: a panelist's pages
#: are theirs alone.
PANEL_HEADERS = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
#: A form body larger than this is not a form of ours (the app's body limit still applies first).
MAX_FORM = 64 * 1024


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A panel page from the one template environment (`pages.ENV`), with `PANEL_HEADERS`."""
    return HTMLResponse(ENV.get_template(name).render(**context), status_code=status, headers=PANEL_HEADERS)


async def form_fields(request: Request) -> dict[str, str]:
    """A urlencoded form body as {name: last value}; anything else is refused (one line)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise BadInput("expected a form (application/x-www-form-urlencoded)", "body")
    body = await request.body()
    if len(body) > MAX_FORM:
        raise BadInput(f"a form has at most {MAX_FORM} bytes", "body")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          max_num_fields=200)
    except (UnicodeDecodeError, ValueError):
        raise BadInput("the form is not valid UTF-8 text", "body") from None
    return {key: values[-1] for key, values in parsed.items()}


def failed_page(what: str, exc: BaseException) -> HTMLResponse:
    """The distinct page for something that could not be loaded: no trace, the cause in words."""
    from assay.store.faults import describe, is_fault

    unreachable = is_fault(exc)  # unreachable, killed, locked, or still so after the retries
    if unreachable:  # an outage is one line in the log (as on every route); a bug, its traceback
        log.warning("%s could not be loaded: store unavailable: %s", what, describe(exc))
    else:
        log.exception("%s could not be loaded", what)
    page = render("panel_message.html", 503 if unreachable else 500, title=f"The {what} failed to load",
                  heading=f"The {what} failed to load", kind="failed",
                  message=("the database could not be reached" if unreachable
                           else "an unexpected error occurred on the server")
                  + ". This says nothing about any model; try again later.")
    if unreachable:
        page.headers["Retry-After"] = "5"  # as every store outage answers (`app._unavailable`)
    return page


@router.get("/benchmark", response_class=HTMLResponse)
def benchmark_page(store: Store = Depends(get_store), actor: Actor = Depends(public_actor)) -> Response:
    """The panel board, as `GET /api/benchmark/leaderboard` answers it."""
    try:
        found = panel.board(store, actor=actor)
        cats = panel.categories(store)
    except Exception as exc:  # noqa: BLE001 - any failure is a failed load, never a trace
        return failed_page("benchmark board", exc)
    return render("benchmark.html", title="Assay — human panel benchmark", board=found, ranked=found["ranked"],
                  provisional=found["provisional"]["count"], categories=cats)


@router.get("/panel", response_class=HTMLResponse)
def panel_form() -> Response:
    return render("panel_apply.html", title="Assay — apply to the human panel", values={}, error=None)


@router.post("/panel", response_class=HTMLResponse)
async def panel_apply(request: Request, store: Store = Depends(get_store),
                      actor: Actor = Depends(public_actor)) -> Response:
    """Apply with the form; the answer is the same for a new email and one that applied already."""
    from starlette.concurrency import run_in_threadpool

    fields: dict[str, str] = {}
    try:
        fields = await form_fields(request)
        years_text = fields.get("years_experience", "").strip()
        if not years_text.isdigit():
            raise BadInput("years of experience is a whole number", "years_experience")
        payload = {"email": fields.get("email", ""), "specialty": fields.get("specialty", ""),
                   "years_experience": int(years_text), "statement": fields.get("statement", "")}
        await run_in_threadpool(panel.apply, store, payload, actor=actor)
    except BadInput as exc:
        return render("panel_apply.html", 422, title="Assay — apply to the human panel", values=fields,
                      error=str(exc))
    return render("panel_message.html", 200, title="Application received", heading="Application received",
                  kind="received",
                  message="Thank you. If you have not applied before, your application is now with the admins; "
                          "approved panelists are told by email. Nothing more is shown here.")
