"""Reads and appends for admins and their sessions.

Like the rest of the store this only ever INSERTs: a session ends by an appended
`admin_session_ends` row, never by deleting or editing its row. The repository never sees a
password or a session token, only what `assay.service.admins` derived from them (an Argon2id hash,
a keyed digest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from assay.errors import Conflict
from assay.store.panel_schema import admin_session_ends, admin_sessions, admins
from assay.store.repo import Repository
from assay.store.schema import utcnow


@dataclass(frozen=True, slots=True)
class StoredAdmin:
    """An admin as listed: never its hash."""

    id: str
    email: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AdminCredentials(StoredAdmin):
    """An admin with its Argon2id password hash: what a login is checked against (`service.admins` only)."""

    password_hash: str = field(repr=False)  # never in a log line


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session with its admin's email; `ended_at` and `end_reason` None while it is open."""

    id: str
    admin_id: str
    created_at: datetime
    expires_at: datetime
    email: str
    ended_at: datetime | None
    end_reason: str | None


class AdminRepo(Repository):
    """The admins' half of the store, over the same engine."""

    LOCKS = "admin"

    def add_admin(self, *, admin_id: str, email: str, password_hash: str) -> StoredAdmin:
        """A new admin; an email that is an admin already is refused."""
        try:
            with self.write() as conn:
                if conn.execute(sa.select(admins.c.id).where(admins.c.email == email)).first() is not None:
                    raise Conflict("an admin with this email exists already", "email", value=email)
                conn.execute(sa.insert(admins).values(id=admin_id, email=email, password_hash=password_hash,
                                                      created_at=utcnow()))
        except sa.exc.IntegrityError:  # a concurrent creation of the same email won the race
            raise Conflict("an admin with this email exists already", "email", value=email) from None
        found = self.admin(admin_id)
        assert found is not None
        return found

    def admin(self, admin_id: str) -> StoredAdmin | None:
        with self.read() as conn:
            row = conn.execute(sa.select(admins.c.id, admins.c.email, admins.c.created_at)
                               .where(admins.c.id == admin_id)).first()
        return StoredAdmin(row.id, row.email, row.created_at) if row is not None else None

    def credentials(self, email: str) -> AdminCredentials | None:
        """The admin with this email, with its password hash: what a login is checked against."""
        with self.read() as conn:
            row = conn.execute(sa.select(admins).where(admins.c.email == email)).first()
        return AdminCredentials(row.id, row.email, row.created_at, row.password_hash) if row is not None else None

    def admins(self) -> list[StoredAdmin]:
        """Every admin, oldest first, without its hash."""
        with self.read() as conn:
            rows = conn.execute(sa.select(admins.c.id, admins.c.email, admins.c.created_at)
                                .order_by(admins.c.created_at, admins.c.id)).all()
        return [StoredAdmin(r.id, r.email, r.created_at) for r in rows]

    def open_session(self, *, session_id: str, admin_id: str, token_digest: str, expires_at: datetime,
                     rotate: str | None = None) -> None:
        """Record a new session; in the same transaction end `rotate` (the session the login came
        from, when there was one and it is still open), so a login always leaves one session."""
        with self.write() as conn:
            now = utcnow()
            if rotate is not None:
                self._end(conn, rotate, "rotated", now)
            conn.execute(sa.insert(admin_sessions).values(id=session_id, admin_id=admin_id,
                                                          token_digest=token_digest, created_at=now,
                                                          expires_at=expires_at))

    def session(self, token_digest: str) -> StoredSession | None:
        """The session with this token digest, its admin's email, and `ended_at` (None while open)."""
        query = (sa.select(admin_sessions.c.id, admin_sessions.c.admin_id, admin_sessions.c.created_at,
                           admin_sessions.c.expires_at, admins.c.email, admin_session_ends.c.ended_at,
                           admin_session_ends.c.reason.label("end_reason"))
                 .select_from(admin_sessions.join(admins, admins.c.id == admin_sessions.c.admin_id)
                              .outerjoin(admin_session_ends, admin_session_ends.c.session_id == admin_sessions.c.id))
                 .where(admin_sessions.c.token_digest == token_digest))
        with self.read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return StoredSession(row.id, row.admin_id, row.created_at, row.expires_at, row.email, row.ended_at,
                             row.end_reason)

    def end_session(self, session_id: str, reason: str) -> bool:
        """End a session; whether this call ended it (False: it had ended already)."""
        with self.write() as conn:
            return self._end(conn, session_id, reason, utcnow())

    @staticmethod
    def _end(conn: sa.Connection, session_id: str, reason: str, at: datetime) -> bool:
        AdminRepo.lock(conn, "session", session_id)  # serialise enders of one session
        if conn.execute(sa.select(admin_sessions.c.id).where(admin_sessions.c.id == session_id)).first() is None:
            return False
        if conn.execute(sa.select(admin_session_ends.c.session_id)
                        .where(admin_session_ends.c.session_id == session_id)).first() is not None:
            return False
        conn.execute(sa.insert(admin_session_ends).values(session_id=session_id, reason=reason, ended_at=at))
        return True

