"""An empty database of either backend, for fixtures parametrised over `["sqlite", "postgresql"]`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def backend_url(request: pytest.FixtureRequest, directory: Path, prefix: str = "t") -> Iterator[str]:
    """A URL to an empty database of the backend `request.param` names: a SQLite file in `directory`,
    or a scratch database on the session's PostgreSQL server (`PgServer.scratch`), dropped after."""
    if request.param == "sqlite":
        yield f"sqlite:///{directory / 'assay.db'}"
        return
    server = request.getfixturevalue("pg_server")
    with server.scratch(prefix) as name:
        yield server.url(name)
