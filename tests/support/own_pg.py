"""A PostgreSQL server a test module owns, to restart, stop and kill connections on: never the
session's shared `pg_server`, which other tests are using at the same time."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PgServer, _as_postgres, _free_port, _pg_bindir


@dataclass(frozen=True)
class OwnPg(PgServer):
    bindir: Path = Path()
    log: Path = Path()

    def ctl(self, *args: str) -> None:
        done = subprocess.run(_as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l",
                                            str(self.log), *args]), capture_output=True, text=True)
        assert done.returncode == 0, f"pg_ctl {' '.join(args)}: {done.stderr or done.stdout}"

    def start(self) -> None:
        self.ctl("-o", f"-p {self.port} -h 127.0.0.1 -k {self.data_dir} -F", "-w", "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is cut, the server is back a moment later."""
        self.ctl("-m", "fast", "-o", f"-p {self.port} -h 127.0.0.1 -k {self.data_dir} -F", "-w", "restart")

    def terminate(self, database: str) -> int:
        """`pg_terminate_backend` every other connection to `database`; how many there were."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                 "AND pid <> pg_backend_pid()", (database,)).fetchall()
        return len(rows)


@contextlib.contextmanager
def own_pg() -> Iterator[OwnPg]:
    bindir = _pg_bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        pytest.fail("PostgreSQL binaries not found; install PostgreSQL to run the fault tests", pytrace=False)
    data_dir = Path(tempfile.mkdtemp(prefix="assay-own-pg-"))
    log = data_dir.parent / f"{data_dir.name}.log"
    import os

    if os.geteuid() == 0:
        shutil.chown(data_dir, user="postgres", group="postgres")
        log.touch()
        shutil.chown(log, user="postgres", group="postgres")
    server = OwnPg(port=_free_port(), data_dir=data_dir, bindir=bindir, log=log)
    subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U", "postgres",
                                 "--no-sync", "-E", "UTF8"]), check=True, capture_output=True)
    server.start()
    try:
        yield server
    finally:
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data_dir), "stop", "-m", "immediate"]),
                       capture_output=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        log.unlink(missing_ok=True)
