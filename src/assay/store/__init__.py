"""Storage: SQLAlchemy Core schema, Alembic migrations, append-only triggers; SQLite and PostgreSQL.

`open_store()` is the way in: it finds the database (`--db`, `ASSAY_DB`, or the user data dir),
migrates it to head when needed, and returns a `Store`, the handle (`store/handle.py`); the reads
and appends the rest of Assay makes are its repositories' (`RunsRepo(store)`, `BoardRepo(store)`…).
"""

from __future__ import annotations

from assay.store import board_schema  # noqa: F401 - the board's tables join the shared metadata
from assay.store import judge_schema  # noqa: F401 - so do the judge's
from assay.store import keys_schema  # noqa: F401 - and the keys'
from assay.store import remote_schema  # noqa: F401 - and remote play's
from assay.store import panel_schema  # noqa: F401 - and the human panel's and the admins'
from assay.store import digest_schema  # noqa: F401 - and the submissions' digests
from assay.store import usage_schema  # noqa: F401 - and the runs' model usage
from assay.store.db import default_url, mask_url, open_store
from assay.store.handle import Store

__all__ = ["Store", "default_url", "mask_url", "open_store"]
