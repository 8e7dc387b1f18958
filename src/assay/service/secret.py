"""The server's secret: what keys are hashed under (and, later, what cookies are signed with).

Where it comes from, first match wins:

1. `ASSAY_SECRET` in the environment (at least 32 characters): for several machines sharing one
   PostgreSQL database, which must all hash keys under the same secret;
2. a file named `secret` next to a SQLite database file (`…/assay.db` → `…/secret`), so a
   database and the secret its keys were issued under travel together;
3. a file named `secret` in the user data dir (`platformdirs.user_data_dir("assay")`), for any
   other database.

A missing file is created on first use with mode 0600 and 256 random bits, atomically (written
aside, then hard-linked into place), so two processes starting at once agree on one secret. A file
that others may read is refused rather than used. The secret is never logged or printed.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import platformdirs
import sqlalchemy as sa

from assay.errors import BadInput

ENV = "ASSAY_SECRET"
FILE_NAME = "secret"
MIN_LENGTH = 32


def secret_path(db_url: str | None) -> Path:
    """Where the secret file for the store at `db_url` lives (see the module docstring)."""
    if db_url:
        try:
            parsed = sa.make_url(db_url)
        except sa.exc.ArgumentError:
            parsed = None
        if parsed is not None and parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            return Path(parsed.database).expanduser().resolve().parent / FILE_NAME
    return Path(platformdirs.user_data_dir("assay")) / FILE_NAME


def server_secret(db_url: str | None) -> bytes:
    """The secret for the store at `db_url` (None: the default store), creating its file if needed."""
    env = os.environ.get(ENV)
    if env is not None:
        if len(env) < MIN_LENGTH:
            raise BadInput(f"{ENV} must be at least {MIN_LENGTH} characters")
        return env.encode("utf-8")
    return _from_file(secret_path(db_url if db_url is not None else os.environ.get("ASSAY_DB")))


def _from_file(path: Path) -> bytes:
    if not path.exists():
        _create(path)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadInput(f"the server secret may be read by others (mode {stat.S_IMODE(mode):o}); "
                       f"`chmod 600 {path}`", str(path))
    value = path.read_text(encoding="utf-8").strip()
    if len(value) < MIN_LENGTH:
        raise BadInput(f"the server secret file holds fewer than {MIN_LENGTH} characters", str(path))
    return value.encode("utf-8")


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(aside, path)  # atomic: fails if another process put its secret there first
        except FileExistsError:
            pass
    finally:
        aside.unlink(missing_ok=True)
