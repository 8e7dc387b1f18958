"""Several processes opening one fresh database and writing at once: one migration, no lost
versions. (Processes, not threads: Alembic's `op`/`context` proxies are process-global.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from assay.store import open_store
from assay.store.runs_repo import RunsRepo

WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from assay.store import open_store
    from assay.store.runs_repo import RunsRepo
    url, who = sys.argv[1], sys.argv[2]
    store = open_store(url)
    for i in range(10):
        body = f"{who}-{i}"
        RunsRepo(store).add_scenario_version(
            case_id="race", content_hash=hashlib.sha256(body.encode()).hexdigest(),
            checks_hash="c" * 64, frozen_on=None, kit="estate", title="t", language="en",
            document={"body": body}, world_fingerprint="w" * 64,
        )
    store.close()
    """
)


def test_concurrent_first_open_and_writes(db_url: str) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, db_url, str(n)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(3)
    ]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for _out, err, code in results:
        assert code == 0, err
    store = open_store(db_url)
    try:
        assert [r.version for r in RunsRepo(store).scenario_versions("race")] == list(range(1, 31))
    finally:
        store.close()
