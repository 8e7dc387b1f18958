"""Admin sessions over HTTP: login and logout, the cookie, CSRF, and the admin pages.

- `POST /admin/login` (JSON or a urlencoded form: `email`, `password`) answers 200
  `{"csrf_token", "email", "expires_at"}` and sets the session cookie; a browser's form post
  (`Accept: text/html`) is sent on to `/admin` instead (303). Every failed login is the same 401
  `wrong email or password`, and logins are rate limited per client address and email together,
  and more loosely per address (429 with `Retry-After`), on top of the app's own limit: never per
  email alone, so guessing an admin's password elsewhere cannot lock that admin out.
- The cookie `assay_admin` holds the session token signed with itsdangerous (HMAC-SHA256 under the
  server secret, with a timestamp checked against the session's lifetime): HttpOnly, Secure,
  SameSite=Strict, Path=/. Behind it is the server-side session row (`service.admins`), re-read on
  every request: a tampered, expired or ended cookie is the one 401.
- `admin_session` (a dependency) is the cookie and nothing else: an API or agent key is never
  looked at here, just as the key routes never look at the cookie. `admin_change` adds the CSRF
  check every cookie-authenticated POST of the JSON API makes: the session's token in
  `X-CSRF-Token`, else 403. The admin pages' plain forms (no script) carry it as the hidden field
  `csrf_token` instead, the one place a header cannot be set; it is checked the same way.
- `POST /admin/logout` ends the session (an appended end row) and clears the cookie.
- Pages: `/admin` (home, or the login form), `/admin/login`, `/admin/applications` (decide them),
  `/admin/ingest` (every ingest step the API takes, as a form: register a model or an environment,
  create a run, record a scorecard or a preference, each by an approved panelist chosen from a
  list, finalise a run). Without a valid session a page sends the browser
  to the login form (303).

The session stands for the service's `ADMIN` actor: every decision about what it may do is made by
`service/`, which is handed that actor (and which admin it is, for the record).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.security import APIKeyCookie, APIKeyHeader
from pydantic import Field
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from starlette.concurrency import run_in_threadpool

from assay.errors import BadInput, DomainError, Invalid, Unauthenticated, http_status
from assay.service import admins, panel
from assay.service.admins import AdminSession
from assay.store.db import Store
from assay.web.deps import get_secret, get_store
from assay.web.guards import TokenBuckets
from assay.web.panel_pages import form_fields, render
from assay.web.schemas import Closed, error_responses

COOKIE = "assay_admin"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
_SALT = "assay.admin-session"
#: Logins per client address and email together: a burst of `LOGIN_BURST`, then one every
#: `1/LOGIN_RATE` s; one address may try `ADDRESS_SHARE` times that over all emails.
LOGIN_BURST = 10
LOGIN_RATE = 1 / 6
ADDRESS_SHARE = 3

cookie_scheme = APIKeyCookie(name=COOKIE, scheme_name="AdminSession", auto_error=False,
                             description="The admin session cookie set by `POST /admin/login`.")
csrf_scheme = APIKeyHeader(name=CSRF_HEADER, scheme_name="CsrfToken", auto_error=False,
                           description="The session's CSRF token (`csrf_token` of the login answer).")

router = APIRouter(tags=["admin"], responses=error_responses(429, 500))


# -- the cookie ---------------------------------------------------------------------------------


def _serializer(secret: bytes) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=_SALT, signer_kwargs={"digest_method": hashlib.sha256})


def seal(secret: bytes, token: str) -> str:
    """The cookie value for a session token: the token, timestamped and signed."""
    return _serializer(secret).dumps(token)


def unseal(secret: bytes, cookie: str | None) -> str | None:
    """The session token a cookie carries, or None when it is missing, tampered or too old."""
    if not cookie or len(cookie) > 512:
        return None
    try:
        token = _serializer(secret).loads(cookie, max_age=int(admins.SESSION_TTL.total_seconds()))
    except (BadSignature, SignatureExpired):
        return None
    return token if isinstance(token, str) else None


def set_session_cookie(response: Response, secret: bytes, token: str) -> None:
    response.set_cookie(COOKIE, seal(secret, token), max_age=int(admins.SESSION_TTL.total_seconds()), path="/",
                        secure=True, httponly=True, samesite="strict")


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")


# -- dependencies -------------------------------------------------------------------------------


def admin_session(request: Request, cookie: str | None = Depends(cookie_scheme)) -> AdminSession:
    """The open admin session the cookie names; anything else (a key included) is 401."""
    secret = get_secret(request)
    return admins.authenticate(get_store(request), secret, unseal(secret, cookie))


def admin_change(request: Request, session: AdminSession = Depends(admin_session),
                 csrf: str | None = Depends(csrf_scheme)) -> AdminSession:
    """An admin session making a change: the session's CSRF token must come as `X-CSRF-Token`."""
    admins.check_csrf(get_secret(request), session, csrf)
    return session


def optional_session(request: Request) -> AdminSession | None:
    secret = get_secret(request)
    token = unseal(secret, request.cookies.get(COOKIE))
    if token is None:
        return None
    try:
        return admins.authenticate(get_store(request), secret, token)
    except Unauthenticated:
        return None


# -- the login limit ----------------------------------------------------------------------------


class LoginThrottle:
    """Token buckets for logins, by client address and email together (the email case-folded and
    digested), and by address alone with `ADDRESS_SHARE` times the allowance (for guessers who
    vary the email). Never by email alone: a guesser elsewhere could then lock the admin whose
    email it guesses out of their own login. One per app (`app.state`), per process."""

    def __init__(self, rate: float = LOGIN_RATE, burst: int = LOGIN_BURST) -> None:
        self.buckets = TokenBuckets(rate, burst)
        self.addresses = TokenBuckets(rate * ADDRESS_SHARE, burst * ADDRESS_SHARE)

    def wait(self, address: str, email: str) -> float:
        """0 when the attempt may go ahead, else the seconds until it may."""
        folded = hashlib.sha256(email.strip().lower().encode("utf-8", "replace")).hexdigest()
        by_pair = self.buckets.take(f"ip:{address} email:{folded}")
        by_address = self.addresses.take("ip:" + address)
        return max(by_pair, by_address)


def throttle_of(request: Request) -> LoginThrottle:
    state = request.app.state
    throttle = getattr(state, "login_throttle", None)
    if throttle is None:
        throttle = state.login_throttle = LoginThrottle()
    return throttle


def _too_many(wait: float) -> JSONResponse:
    seconds = max(1, math.ceil(wait))
    return JSONResponse({"detail": f"too many login attempts; retry after {seconds} s", "field": None}, status_code=429,
                        headers={"Retry-After": str(seconds)})


# -- login and logout ---------------------------------------------------------------------------


def _wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept.lower()


async def _credentials(request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            raise Invalid("the body is not valid JSON", "body") from None
        if not isinstance(body, dict):
            raise Invalid("the body is a JSON object with email and password", "body")
        return body
    return dict(await form_fields(request))


def _text(fields: Mapping[str, object], name: str) -> str:
    """A credential as given: a string, else empty (which no account matches)."""
    value = fields.get(name)
    return value if isinstance(value, str) else ""


_LOGIN_BODY = {
    "required": True,
    "content": {
        media: {"schema": {"type": "object", "required": ["email", "password"], "additionalProperties": False,
                           "properties": {"email": {"type": "string"}, "password": {"type": "string"}}}}
        for media in ("application/json", "application/x-www-form-urlencoded")
    },
}


class LoggedIn(Closed):
    csrf_token: str = Field(description="Send it as `X-CSRF-Token` on every admin POST of this session.")
    email: str
    expires_at: str = Field(description="When the session ends (ISO 8601).")


class LoggedOut(Closed):
    ended: bool


@router.post("/admin/login", summary="Log in as an admin: sets the session cookie, answers the CSRF token",
             openapi_extra={"requestBody": _LOGIN_BODY},
             response_model=LoggedIn, responses={200: {"description": "Logged in."}, **error_responses(401, 422)})
async def login(request: Request) -> Response:
    html = _wants_html(request)
    try:
        fields = await _credentials(request)
    except BadInput as exc:
        if html:
            return render("admin_login.html", 422, title="Admin login", error=str(exc))
        raise
    email, password = _text(fields, "email"), _text(fields, "password")
    client = request.client
    wait = throttle_of(request).wait(client.host if client else "unknown", email)
    if wait > 0:
        if html:  # a browser's form post: the site's 429 page, not JSON
            from assay.web.answers import error_page

            return error_page(429, max(1, math.ceil(wait)))
        return _too_many(wait)
    secret = get_secret(request)
    previous = unseal(secret, request.cookies.get(COOKIE))
    try:
        done = await run_in_threadpool(admins.login, get_store(request), secret, email, password, previous=previous)
    except Unauthenticated as exc:
        if html:
            return render("admin_login.html", 401, title="Admin login", error=exc.message)
        raise
    if html:
        response: Response = RedirectResponse("/admin", status_code=303)
    else:
        response = JSONResponse({"csrf_token": done.csrf_token, "email": done.session.email,
                                 "expires_at": done.session.expires_at.isoformat()})
    response.headers["Cache-Control"] = "no-store"
    set_session_cookie(response, secret, done.token)
    return response


async def _form_change(request: Request) -> tuple[AdminSession, dict[str, str]]:
    """A cookie-authenticated form post: its session (401 without), its fields, and its CSRF token
    checked (the header, else the form's hidden field; 403 without)."""
    session = await run_in_threadpool(admin_session, request, request.cookies.get(COOKIE))
    fields = await form_fields(request) if "form" in request.headers.get("content-type", "") else {}
    presented = request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
    admins.check_csrf(get_secret(request), session, presented)
    return session, fields


@router.post("/admin/logout", summary="End the admin session and clear its cookie",
             response_model=LoggedOut, responses={200: {"description": "Ended."}, **error_responses(401, 403)},
             openapi_extra={"security": [{"AdminSession": [], "CsrfToken": []}]})
async def logout(request: Request) -> Response:
    try:
        session, _ = await _form_change(request)
    except DomainError as exc:
        if _wants_html(request):
            return _refused_page(exc)
        raise
    await run_in_threadpool(admins.logout, get_store(request), session)
    response: Response = (RedirectResponse("/admin/login", status_code=303) if _wants_html(request)
                          else JSONResponse({"ended": True}))
    clear_session_cookie(response)
    return response


# -- pages --------------------------------------------------------------------------------------


def _refused_page(exc: BadInput) -> Response:
    return render("panel_message.html", http_status(exc), title="Refused", heading="Refused", kind="failed",
                  message=str(exc))


def _page_context(request: Request, session: AdminSession) -> dict[str, Any]:
    return {"session": session, "csrf_token": admins.csrf_token(get_secret(request), session.token)}


def _login_redirect() -> Response:
    return RedirectResponse("/admin/login", status_code=303)


@router.get("/admin", include_in_schema=False)
def admin_home(request: Request, store: Store = Depends(get_store)) -> Response:
    session = optional_session(request)
    if session is None:
        return render("admin_login.html", title="Admin login", error=None)
    pending = sum(1 for a in panel.applications(store, actor=session.actor) if a["status"] == "pending")
    return render("admin_home.html", title="Assay — admin", pending=pending, **_page_context(request, session))


@router.get("/admin/login", include_in_schema=False)
def admin_login_page() -> Response:
    return render("admin_login.html", title="Admin login", error=None)


def _applications_page(request: Request, store: Store, session: AdminSession, message: str | None = None,
                       kind: str = "empty", status: int = 200) -> Response:
    return render("admin_applications.html", status, title="Assay — panel applications",
                  applications=panel.applications(store, actor=session.actor), message=message, message_kind=kind,
                  **_page_context(request, session))


@router.get("/admin/applications", include_in_schema=False)
def admin_applications(request: Request, store: Store = Depends(get_store)) -> Response:
    session = optional_session(request)
    if session is None:
        return _login_redirect()
    return _applications_page(request, store, session)


@router.post("/admin/applications/{application_id}/{decision}", include_in_schema=False)
async def admin_decide(application_id: str, decision: str, request: Request,
                       store: Store = Depends(get_store)) -> Response:
    try:
        session, _ = await _form_change(request)
    except BadInput as exc:
        return _refused_page(exc)
    try:
        done = await run_in_threadpool(panel.review, store, application_id, decision, actor=session.actor,
                                       by=session.admin_id)
    except BadInput as exc:
        return await run_in_threadpool(_applications_page, request, store, session, str(exc), "failed",
                                       http_status(exc))
    return await run_in_threadpool(_applications_page, request, store, session,
                                   f"{done['email']} is {done['status']}.", "empty")


def _ingest_page(request: Request, store: Store, session: AdminSession, message: str | None = None,
                 kind: str = "empty", status: int = 200) -> Response:
    from assay.store.panel_repo import PanelRepo

    repo = PanelRepo(store)
    panelists = sorted({a["email"] for a in panel.applications(store, actor=session.actor) if a["status"] == "approved"})
    return render("admin_ingest.html", status, title="Assay — ingest", message=message, message_kind=kind,
                  runs=panel.runs(store, actor=session.actor), models=repo.models(), environments=repo.environments(),
                  categories=panel.categories(store), panelists=panelists, **_page_context(request, session))


@router.get("/admin/ingest", include_in_schema=False)
def admin_ingest(request: Request, store: Store = Depends(get_store)) -> Response:
    session = optional_session(request)
    if session is None:
        return _login_redirect()
    return _ingest_page(request, store, session)


def ingest_payload(fields: dict[str, str]) -> dict[str, Any]:
    """The ingest page's form as the JSON step the service takes: ratings from `rating_<slug>`
    fields that are filled in, numbers where the step wants numbers."""
    payload: dict[str, Any] = {k: v for k, v in fields.items() if k != CSRF_FIELD and not k.startswith("rating_")}
    if payload.get("action") == "create-run" and not str(payload.get("assay_run", "")).strip():
        payload.pop("assay_run", None)  # the form's optional field, left empty
    if payload.get("action") == "record-score":
        ratings: dict[str, Any] = {}
        for key, value in fields.items():
            if key.startswith("rating_") and value.strip():
                try:
                    number = float(value)
                except ValueError:
                    raise Invalid("a rating is a number from 0 to 10", "ratings", value=key[7:]) from None
                ratings[key[7:]] = int(number) if number.is_integer() else number
        payload["ratings"] = ratings
        minutes = payload.get("minutes", "0").strip() or "0"
        if not minutes.isdigit():
            raise Invalid("minutes is a whole number of at least 0", "minutes")
        payload["minutes"] = int(minutes)
    return payload


@router.post("/admin/ingest", include_in_schema=False)
async def admin_ingest_post(request: Request, store: Store = Depends(get_store)) -> Response:
    try:
        session, fields = await _form_change(request)
    except BadInput as exc:
        return _refused_page(exc)
    try:
        done = await run_in_threadpool(panel.ingest, store, ingest_payload(fields), actor=session.actor,
                                       by=session.admin_id)
    except BadInput as exc:
        return await run_in_threadpool(_ingest_page, request, store, session, str(exc), "failed", http_status(exc))
    summary = ", ".join(f"{k} {v}" for k, v in done.items() if not isinstance(v, dict))
    return await run_in_threadpool(_ingest_page, request, store, session, f"{fields.get('action')}: {summary}",
                                   "empty")
