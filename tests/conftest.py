"""Shared database fixtures: every store test runs on SQLite and on a real PostgreSQL server.

The PostgreSQL server is started for real once per session from the machine's binaries. If
they are missing the fixture fails rather than skips: a skipped backend is an untested backend,
and "passed" must mean both were exercised.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment (a console the size
# of a default terminal); the CLI lays tables out for $COLUMNS, so a test would see 80 columns under
# `-n auto` and 120 (piped) without it. Every test starts piped; one that wants a width sets it.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

if TYPE_CHECKING:
    from assay.store import Store

# `pytest --hypothesis-profile thorough`: the property tests at their full example counts (see
# tests/support/strategies.py `examples`); the default profile runs the costliest at a quarter
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("thorough", _hypothesis_settings.get_profile("default"))


@dataclass(frozen=True)
class PgServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1, trusted for the `postgres` user."""

    port: int
    data_dir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    @contextlib.contextmanager
    def scratch(self, prefix: str = "t") -> Iterator[str]:
        """A new empty database on this server, named `prefix_…` (yielded), dropped afterwards."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield name
        finally:
            with psycopg.connect(self.dsn(), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_bindir() -> Path | None:
    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).resolve().parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    # initdb refuses to run as root; tests run as root in CI, as a normal user elsewhere.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = _pg_bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        pytest.fail(
            "PostgreSQL binaries not found (looked in /usr/lib/postgresql/*/bin and on PATH); "
            "install PostgreSQL (e.g. apt-get install postgresql) to run the store tests",
            pytrace=False,
        )
    data_dir = Path(tempfile.mkdtemp(prefix="assay-pg-"))
    if os.geteuid() == 0:
        shutil.chown(data_dir, user="postgres", group="postgres")
    log = data_dir.parent / f"{data_dir.name}.log"
    port = _free_port()
    try:
        subprocess.run(
            _as_postgres(
                [str(bindir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U", "postgres",
                 "--no-sync", "-E", "UTF8"]
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        if os.geteuid() == 0:
            log.touch()
            shutil.chown(log, user="postgres", group="postgres")
        subprocess.run(
            _as_postgres(
                [str(bindir / "pg_ctl"), "-D", str(data_dir), "-l", str(log),
                 "-o", f"-p {port} -h 127.0.0.1 -k {data_dir} -F", "-w", "start"]
            ),
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()[-5:]
        server_log = log.read_text().strip().splitlines()[-5:] if log.exists() else []
        shutil.rmtree(data_dir, ignore_errors=True)
        log.unlink(missing_ok=True)
        pytest.fail(
            f"could not start PostgreSQL from {bindir}: {' | '.join(detail + server_log)}",
            pytrace=False,
        )
    try:
        yield PgServer(port=port, data_dir=data_dir)
    finally:
        subprocess.run(
            _as_postgres([str(bindir / "pg_ctl"), "-D", str(data_dir), "stop", "-m", "immediate"]),
            capture_output=True,
        )
        shutil.rmtree(data_dir, ignore_errors=True)
        log.unlink(missing_ok=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty database of each backend, private to one test."""
    from tests.support.databases import backend_url

    with backend_url(request, tmp_path) as url:
        yield url


# -- templates: migrating a new database runs every revision, and releasing the built-in suites
# hashes every scenario and its world (seconds, together). A test that wants a migrated store (or
# a bootstrapped one) gets a copy of a database made so once per session instead: the same
# database the first open makes (tests/store/test_migrations.py still migrates for real).

TEMPLATE_KINDS = ("migrated", "bootstrapped")


class Templates:
    """Per session, per backend and kind, one database made lazily: `migrated` (open_store) or
    `bootstrapped` (open_store, then the built-in suites released, as every command does)."""

    def __init__(self, request: pytest.FixtureRequest, root: Path) -> None:
        self._request = request
        self._root = root
        self._made: dict[tuple[str, str], str] = {}

    @staticmethod
    def _make(url: str, kind: str) -> None:
        from assay.service.releases import bootstrap
        from assay.store import open_store

        store = open_store(url)
        try:
            if kind == "bootstrapped":
                bootstrap(store)
        finally:
            store.close()  # disposed: closed files, idle databases, ready to be copied

    def copy_into(self, db_url: str, kind: str) -> None:
        """Make the empty database at `db_url` (the `db_url` fixture's) a copy of template `kind`."""
        assert kind in TEMPLATE_KINDS, kind
        if db_url.startswith("sqlite:///"):
            if ("sqlite", kind) not in self._made:
                path = self._root / f"{kind}.db"
                self._make(f"sqlite:///{path}", kind)
                self._made["sqlite", kind] = str(path)
            shutil.copyfile(self._made["sqlite", kind], db_url.removeprefix("sqlite:///"))
            return
        import psycopg

        server: PgServer = self._request.getfixturevalue("pg_server")
        if ("postgresql", kind) not in self._made:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "template_{kind}"')
            self._make(server.url(f"template_{kind}"), kind)
            self._made["postgresql", kind] = f"template_{kind}"
        name = db_url.rsplit("/", 1)[1]
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}"')
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._made["postgresql", kind]}"')


@pytest.fixture(scope="session")
def templates(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(request, tmp_path_factory.mktemp("templates"))


@pytest.fixture
def store(db_url: str, templates: Templates) -> Iterator[Store]:
    """The store opened on `db_url`, migrated (a copy of the session's migrated template)."""
    from assay.store import open_store  # imported here so other packages' tests never need it

    templates.copy_into(db_url, "migrated")
    opened = open_store(db_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, templates: Templates) -> Iterator[Store]:
    """A fresh embedded store for tests that need one store, not both backends."""
    from assay.store import open_store  # imported here so other packages' tests never need it

    path = tmp_path / "assay.db"
    url = f"sqlite:///{path}"
    templates.copy_into(url, "migrated")
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def ray_address(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ONE local Ray for the whole session (2 CPUs, no dashboard, no usage reporting), started in
    this process: the ray executor finds it connected and plays on it, and `assay` subprocesses join
    it by the address yielded (`--ray-address`). Shut down at the end of the session. Fails, never
    skips, when Ray cannot be imported or started: the ray executor is part of the contract. Under
    `--dist loadgroup` its tests are one group (`xdist_group("ray")`): a second worker starting a
    Ray fails (`tests/support/groups.py`)."""
    from tests.support.groups import first_in_run

    first_in_run(request.config, tmp_path_factory, "ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import logging

        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, _node_ip_address="127.0.0.1")  # Ray may still name the routable IP
        address = ray.get_runtime_context().gcs_address
    except Exception as exc:  # noqa: BLE001 - any reason at all is a failure, not a skip
        pytest.fail(f"could not start a local Ray: {type(exc).__name__}: {exc}", pytrace=False)
    try:
        yield address
    finally:
        ray.shutdown()


# -- the fast loop: `make check` runs `pytest --pure`, the tests that start no process -------------
#
# A test is pure by default. It is heavy when it uses a fixture that opens a store, or starts a
# database server, a browser, Ray or a console script (HEAVY_FIXTURES), runs on PostgreSQL, or is
# marked `@pytest.mark.heavy` (a test that starts a process itself: a subprocess, a sandboxed agent,
# an executor's worker processes). Under --pure the heavy tests are deselected, and a test that still
# starts a process fails, saying to mark it: so a new test lands on the right side without a list.
# A pure test that takes seconds (a property test with many examples, a whole export built) is marked
# `@pytest.mark.slow` and is left out of --pure too, to keep `make check` near a minute.

HEAVY_FIXTURES = frozenset({
    "pg_server", "login_role", "ray_address",  # a PostgreSQL server, Ray
    "browser", "page", "phone", "server", "panel_server",  # Chromium, and the servers it browses
    "real_cli",  # the console script, in subprocesses
    "db_url", "store", "sqlite_store", "templates",  # a migrated store: batches played into a database
})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--pure", action="store_true",
                     help="run only the tests that start no process (no database server, browser, sandbox, "
                          "Ray or subprocess): the fast loop of `make check`")


def left_out_of_pure(item: pytest.Item) -> bool:
    if item.get_closest_marker("heavy") is not None or item.get_closest_marker("slow") is not None:
        return True
    if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --pure, only the pure tests are kept (see above).

    Under `--dist loadgroup` each test's `xdist_group` is put into its node id, where xdist's
    scheduler reads it (xdist 3.8 writes it where pytest 9 no longer looks; `tests/support/groups.py`):
    one worker runs the browser tests on one Chromium, one the Ray tests on one Ray. The browser
    tests are collected together (last), so a run without xdist starts Chromium once too: the
    browser is stopped after the last of a row of browser tests (`tests/web/conftest.py`)."""
    if config.getoption("pure"):
        left_out = [item for item in items if left_out_of_pure(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not left_out_of_pure(item)]

    from tests.support.groups import group_of, with_group

    items.sort(key=lambda item: group_of(item) == "browser")  # stable: every other order is kept
    if getattr(config.option, "loadgroup", False):
        for item in items:
            with_group(item)


@pytest.fixture(autouse=True)
def _no_loop_left_running(request: pytest.FixtureRequest) -> None:
    """A test that wants no browser starts with no event loop running on its thread: one left so (by
    Playwright's sync API, which keeps its loop registered as running while the browser lives) makes
    every `asyncio.run` in the test fail. Said here once, by name, rather than by each such test."""
    if "browser" in request.fixturenames:
        return
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    pytest.fail(f"an event loop ({loop!r}) is still running on this thread as the test starts: a browser "
                "left alive after its tests? (tests/web/conftest.py stops it after the last of a row)", pytrace=False)


@pytest.fixture(autouse=True)
def _no_process_when_pure(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Under --pure, starting a process (fork, spawn, subprocess, multiprocessing) fails the test."""
    if not request.config.getoption("pure"):
        yield
        return
    import _posixsubprocess
    import platform
    import subprocess as sp

    # the standard library runs `uname -p` once per process (then caches it) for the processor name,
    # which the openai client's headers read: asked here, it is the library's process, not the test's
    _ = platform.uname().processor
    started: list[str] = []

    def refuse(name: str) -> Any:
        def start(*_args: Any, **_kwargs: Any) -> Any:
            started.append(name)
            raise RuntimeError(f"{name}: this test starts a process; mark it @pytest.mark.heavy "
                               f"(pytest --pure runs only tests that start none)")
        return start

    for owner, name in ((os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp"),
                        (_posixsubprocess, "fork_exec"), (sp, "_fork_exec")):
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, refuse(f"{owner.__name__}.{name}"))
    yield
    if started:  # a process refused in a thread may have been swallowed there
        pytest.fail(f"this test starts a process ({started[0]}); mark it @pytest.mark.heavy "
                    "(pytest --pure runs only tests that start none)", pytrace=False)


@pytest.fixture
def login_role(pg_server: PgServer) -> Iterator[Any]:
    """`make(member_of, prefix="login")`: a fresh LOGIN role in `member_of` (trust auth on the test
    server), as production serves; dropped after, with anything it came to own."""
    from psycopg import sql

    import psycopg

    made: list[str] = []

    def make(member_of: str, prefix: str = "login") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name),
                                                                            sql.Identifier(member_of)))
        made.append(name)
        return name

    yield make
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
