"""Admin accounts and their sessions: Argon2id passwords, server-side sessions with an expiry.

An admin session stands for the service's `ADMIN` actor (`service.actors`): whatever an admin may
do is decided by the service functions that take that actor, exactly as for the CLI's operator;
the session only says *which* admin it is (`AdminSession.admin_id`), so reviews, runs and
scorecards can name who recorded them.

- **Passwords** are hashed with Argon2id (argon2-cffi, explicit parameters) and never stored,
  logged or echoed; `create` refuses one shorter than `MIN_PASSWORD` characters.
- **Login** checks the email and password and answers one and the same `Unauthenticated` for an
  unknown email and a wrong password; an unknown email is verified against a fixed dummy hash so
  both take about as long. Each login opens a fresh session (a new random token, rotated: the
  session the request came with, if any, is ended), valid for `SESSION_TTL`.
- **The session token** is random (256 bits) and handed to the caller once; the store keeps only
  HMAC-SHA256(server secret, token), so a copy of the database opens no session. A token is valid
  while its row exists, has no end row, and has not expired; every request re-reads it.
- **CSRF**: the token a session's forms and cookie-authenticated POSTs must carry is derived from
  the session token under the server secret (`csrf_token`), so nothing extra is stored and a
  token from one session is worthless in another. `check_csrf` compares in constant time.

The web layer seals the session token into a signed cookie (`web.admin`); nothing here knows
about cookies or headers.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypedDict

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

from assay.errors import Forbidden, Invalid, Unauthenticated
from assay.service.actors import ADMIN, Actor, require_staff
from assay.store.admin_repo import AdminRepo, StoredAdmin
from assay.store.db import Store
from assay.store.schema import utcnow

#: How long a session stays valid after its login.
SESSION_TTL = timedelta(hours=12)
MIN_PASSWORD = 12
#: Longer passwords are refused before any hashing (Argon2 over megabytes is a denial of service).
MAX_PASSWORD = 1024
#: Longer than any token we issue; a longer presented value is refused before any work.
MAX_TOKEN = 256
#: local@domain.tld, no white space, no control character (the text is stored and shown as given)
EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+$")

#: Argon2id, the RFC 9106 second recommendation (64 MiB, 3 passes, 4 lanes).
_HASHER = PasswordHasher(time_cost=3, memory_cost=65536, parallelism=4, hash_len=32, salt_len=16, type=Type.ID)
#: A hash of a random password nobody knows, with the same parameters: what an unknown email is
#: verified against, so it costs what a known one does.
_DUMMY_HASH = "$argon2id$v=19$m=65536,t=3,p=4$70fQzxHxRLx4uktiZffS7w$QGjh2K4c2hWNWojkMb3cgjwgg/MNU4g4FAKH1cxT/3Y"


@dataclass(frozen=True)
class AdminSession:
    """An open session: the actor it stands for, and which admin and session it is."""

    admin_id: str
    email: str
    session_id: str
    expires_at: datetime
    actor: Actor = ADMIN
    token: str = field(default="", repr=False)  # never in a log line


@dataclass(frozen=True)
class Login:
    """What a successful login hands the caller: the new session, its token (once) and CSRF token."""

    session: AdminSession
    token: str = field(repr=False)
    csrf_token: str = field(repr=False)


def check_email(email: str) -> str:
    """An email as stored and compared: trimmed and lower-cased; anything not shaped like one refused."""
    clean = email.strip().lower()
    if len(clean) > 254 or not EMAIL.match(clean) or not clean.isprintable():
        raise Invalid("not an email address", "email")
    return clean


def _check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise Invalid(f"a password needs at least {MIN_PASSWORD} characters", "password")
    if len(password) > MAX_PASSWORD:
        raise Invalid(f"a password has at most {MAX_PASSWORD} characters", "password")
    if "\x00" in password:
        raise Invalid("a password may not contain the NUL character", "password")
    return password


class AdminView(TypedDict):
    """An admin as the staff may see it (a TypedDict: printed as it is by `assay admin`, in this order)."""

    id: str
    email: str
    created_at: str


def view(row: StoredAdmin) -> AdminView:
    """An admin as the staff may see it: never its hash."""
    return {"id": row.id, "email": row.email, "created_at": row.created_at.isoformat()}


def create(store: Store, email: str, password: str, *, actor: Actor) -> AdminView:
    """A new admin with an Argon2id hash of `password` (the platform's staff only)."""
    require_staff(actor, "create admins", "email")
    clean = check_email(email)
    password_hash = _HASHER.hash(_check_password(password))
    return view(AdminRepo(store).add_admin(admin_id=secrets.token_hex(8), email=clean, password_hash=password_hash))


def list_admins(store: Store, *, actor: Actor) -> list[AdminView]:
    require_staff(actor, "list admins", "email")
    return [view(r) for r in AdminRepo(store).admins()]


def refusal() -> Unauthenticated:
    """The one answer to every failed login, whatever was wrong."""
    return Unauthenticated("wrong email or password", "credentials")


def session_refusal() -> Unauthenticated:
    """The one answer to every missing, tampered, expired or ended session."""
    return Unauthenticated("a valid admin session is required (log in at /admin/login)", "session")


def _digest(secret: bytes, token: str) -> str:
    return hmac.new(secret, b"assay:admin-session:" + token.encode("utf-8"), hashlib.sha256).hexdigest()


def csrf_token(secret: bytes, token: str) -> str:
    """The CSRF token of the session with this session token."""
    return hmac.new(secret, b"assay:csrf:" + token.encode("utf-8"), hashlib.sha256).hexdigest()


def check_csrf(secret: bytes, session: AdminSession, presented: str | None) -> None:
    """Refuse a cookie-authenticated change that does not carry its session's CSRF token."""
    if not presented or len(presented) > MAX_TOKEN or not hmac.compare_digest(
            presented.encode("utf-8", "replace"), csrf_token(secret, session.token).encode()):
        raise Forbidden("the request does not carry this session's CSRF token", "csrf_token")


def _verify(password_hash: str, password: str) -> bool:
    try:
        return bool(_HASHER.verify(password_hash, password))
    except (VerificationError, InvalidHashError):
        return False


def login(store: Store, secret: bytes, email: str, password: str, *, previous: str | None = None) -> Login:
    """Open a session for the admin with this email and password; `previous` is the session token
    the request came with, if any, which is ended (rotated) in the same transaction."""
    try:
        clean = check_email(email)
    except Invalid:
        clean = None
    if clean is None or not password or len(password) > MAX_PASSWORD:
        _verify(_DUMMY_HASH, password[:MAX_PASSWORD] or "x")
        raise refusal()
    repo = AdminRepo(store)
    found = repo.credentials(clean)
    if found is None:
        _verify(_DUMMY_HASH, password)
        raise refusal()
    if not _verify(found.password_hash, password):
        raise refusal()
    rotate = None
    if previous and len(previous) <= MAX_TOKEN:
        old = repo.session(_digest(secret, previous))
        rotate = old.id if old is not None else None
    token = secrets.token_urlsafe(32)
    session_id = secrets.token_hex(8)
    expires = utcnow() + SESSION_TTL
    repo.open_session(session_id=session_id, admin_id=found.id, token_digest=_digest(secret, token),
                      expires_at=expires, rotate=rotate)
    session = AdminSession(admin_id=found.id, email=found.email, session_id=session_id, expires_at=expires,
                           token=token)
    return Login(session=session, token=token, csrf_token=csrf_token(secret, token))


def authenticate(store: Store, secret: bytes, token: str | None) -> AdminSession:
    """The open session this token belongs to; anything else is the one `Unauthenticated`."""
    if not token or len(token) > MAX_TOKEN:
        raise session_refusal()
    row = AdminRepo(store).session(_digest(secret, token))
    if row is None or row.ended_at is not None or row.expires_at <= utcnow():
        raise session_refusal()
    return AdminSession(admin_id=row.admin_id, email=row.email, session_id=row.id,
                        expires_at=row.expires_at, token=token)


def logout(store: Store, session: AdminSession) -> None:
    """End the session (an appended end row): its cookie opens nothing from now on."""
    AdminRepo(store).end_session(session.session_id, "logout")
