"""The maintainer's command that rewrites the schema snapshot (`store/snapshot.py`) after a new
migration: it migrates a scratch SQLite file with `store/db.py` and captures what that leaves.

    python -m assay.store.refresh_snapshot

It lives apart from `store/snapshot.py` because `store/db.py` builds new stores from the snapshot:
the command needs `db`, and `db` needs the snapshot, so in one module they would import each other.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from assay.store.db import HEAD_REVISION, create_store_engine, migrate
from assay.store.snapshot import SNAPSHOT_PATH, capture


def main() -> int:  # pragma: no cover - a maintainer's command, its result held by the tests
    with tempfile.TemporaryDirectory() as scratch:
        engine = create_store_engine(f"sqlite:///{Path(scratch) / 'migrated.db'}")
        migrate(engine, snapshot=False)
        with engine.connect() as conn:
            snapshot = capture(conn)
        engine.dispose()
    if snapshot.revision != HEAD_REVISION:
        print(f"migrated to {snapshot.revision}, but HEAD_REVISION is {HEAD_REVISION}", file=sys.stderr)
        return 1
    SNAPSHOT_PATH.write_text(snapshot.as_json(), encoding="utf-8")
    print(f"wrote {SNAPSHOT_PATH} at revision {snapshot.revision} ({len(snapshot.statements)} statements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
