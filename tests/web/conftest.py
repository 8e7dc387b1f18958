"""Fixtures for the web app: an app over a store of each backend, keys, and one populated site.

Everything here runs on SQLite and on a real PostgreSQL (the root conftest's `db_url` and
`pg_server`). The app is `create_app` over a store the fixture opened, so `TestClient(app)` works
with or without `with` (no lifespan is needed to reach the store).

Per test (function scope, over `db_url`, so writes are private to the test):

- `web_store`: the store opened and bootstrapped (built-in suites released), closed afterwards.
- `web_app`: `make_app(web_store)` with the default limits.
- `client`: a `TestClient` on `web_app`.

Once per session and backend (`populated_site`, parametrised `sqlite` | `postgresql`; READ-ONLY:
a test that writes must use the function fixtures above, or the session's other tests see it):

- accounts `alice` (handle `alice-h`) and `bob` (handle `bob-h`);
- suites `mini` 1.0 and 1.1 (public; a scenario edited in between, so the pins differ), `hush` 1.0
  (unlisted), `vault` 1.0 (internal), besides the built-in ones;
- published submissions: alice `diligent` on mini 1.0, alice `diligent` and bob `idle` on mini 1.1
  (bob's label is `INJECTION`, stored and served literally), alice `diligent` on hush 1.0 and on
  vault 1.0; ids in `Site.submissions` (`"mini 1.0 diligent"`, …);
- keys in `Site.keys`: `alice_api`, `alice_agent`, `bob_api`, `bob_agent`, and `alice_revoked`
  (an API key revoked at once).

`site_client` is a `TestClient` on that site's app (rate limit off: the session shares it). Helpers: `SECRET` (the server secret every
app here uses), `make_app(store, **limits)`, `issue_key(store, account, kind)`, `bearer(key)`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.board._support import edit_scenario, mini_suite, set_version
from tests.support.databases import backend_url

SECRET = b"assay-web-tests-secret-" + b"s" * 32
#: Text that would do harm if any layer interpreted it: SQL, HTML, template, path and shell syntax.
INJECTION = "x'; DROP TABLE runs; -- <script>alert(1)</script> {{7*7}} ${7*7} ../../etc/passwd $(id) \" \\"


@pytest.fixture(autouse=True, scope="session")
def _argon2_at_test_cost() -> Iterator[None]:
    """Every web test hashes and verifies admin passwords with Argon2id at its cheapest parameters
    (`tests/support/passwords.py`: 0.2 s of CPU a hash or login at the production ones)."""
    from tests.support.passwords import cheap_argon2

    with cheap_argon2():
        yield


def make_app(store: Any, **limits: Any) -> FastAPI:
    """The service's app over `store`, hashing keys under `SECRET`; `limits` override `Settings`."""
    from assay.web.app import Settings, create_app

    return create_app(Settings(db_url=None, secret=SECRET, **limits), store=store)


def issue_key(store: Any, account: str, kind: str) -> str:
    """A new key of `kind` for `account`, issued by the operator; returns the key itself."""
    from assay.service import keys
    from assay.service.actors import OPERATOR

    return keys.create(store, account, kind, SECRET, actor=OPERATOR)[1]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _opened(db_url: str) -> Any:
    from assay.service.releases import bootstrap
    from assay.store import open_store

    store = open_store(db_url)
    bootstrap(store)
    return store


@pytest.fixture
def web_store(db_url: str, templates: Any) -> Iterator[Any]:
    templates.copy_into(db_url, "bootstrapped")  # as `_opened` would leave it, made once per session
    store = _opened(db_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def web_app(web_store: Any) -> FastAPI:
    return make_app(web_store)


@pytest.fixture
def client(web_app: FastAPI) -> TestClient:
    return TestClient(web_app)


@dataclass
class Site:
    """The populated session store, its app, and the keys and ids tests compare with."""

    db_url: str
    store: Any
    app: FastAPI
    keys: dict[str, str] = field(default_factory=dict)
    submissions: dict[str, str] = field(default_factory=dict)


def build_site(db_url: str, root: Path) -> Site:
    """Release the site's suites and play its submissions (reference agents, as the operator)."""
    from assay.agents.loader import load_agent
    from assay.service import accounts, keys, releases, submissions
    from assay.service.actors import OPERATOR

    store = _opened(db_url)
    site = Site(db_url, store, make_app(store, rate_limit=0))  # shared by many tests: no limit
    accounts.create(store, "alice", "alice-h", actor=OPERATOR)
    accounts.create(store, "bob", "bob-h", actor=OPERATOR)

    mini = mini_suite(root / "mini", key="mini", version="1.0")
    releases.release_path(store, str(mini), actor=OPERATOR)
    edit_scenario(mini)
    set_version(mini, "1.1")
    releases.release_path(store, str(mini), actor=OPERATOR)
    for key, visibility in (("hush", "unlisted"), ("vault", "internal")):
        releases.release_path(store, str(mini_suite(root / key, key=key, visibility=visibility)), actor=OPERATOR)

    def submit(key: str, version: str, agent: str, account: str = "alice", label: str | None = None) -> None:
        name = agent.rsplit(":", 1)[-1]
        site.submissions[f"{key} {version} {name}"] = submissions.submit(
            store, key, factory=load_agent(agent), account=account, label=label or name, version=version,
            publish=True, workers=2, actor=OPERATOR)

    submit("mini", "1.0", "reference:diligent")
    submit("mini", "1.1", "reference:diligent")
    submit("mini", "1.1", "reference:idle", account="bob", label=INJECTION)
    submit("hush", "1.0", "reference:diligent")
    submit("vault", "1.0", "reference:diligent")

    for account in ("alice", "bob"):
        for kind in ("api", "agent"):
            site.keys[f"{account}_{kind}"] = issue_key(store, account, kind)
    view, site.keys["alice_revoked"] = keys.create(store, "alice", "api", SECRET, actor=OPERATOR)
    keys.revoke(store, view["id"], actor=OPERATOR)
    return site


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def populated_site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp(f"site-{request.param}")
    with backend_url(request, root, "site") as db_url:
        site = build_site(db_url, root / "suites")
        try:
            yield site
        finally:
            site.store.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def site_client(populated_site: Site) -> TestClient:
    return TestClient(populated_site.app)


# -- the browser: ONE per row of browser tests, shared by the board pages and the panel pages -----

CHROMIUM = Path("/usr/bin/chromium")


class _Chromium:
    """One headless Debian Chromium under Playwright's sync API, started by the first browser test
    and stopped after the last of a row of them (`pytest_runtest_teardown` below).

    Playwright's sync API keeps its event loop registered as running on the main thread while it
    lives, so an `asyncio.run` in any test after it would fail: stopped when the next test wants
    no browser, it is never alive under another test, whatever order the tests run in. The browser
    tests are collected in one row and, under xdist, sent to one worker (`xdist_group("browser")`):
    one Chromium for the run."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self.browser: Any = None

    def start(self, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Any:
        if self.browser is not None:
            return self.browser
        if not CHROMIUM.exists():
            pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package "
                        "(apt-get install chromium) to run the browser tests", pytrace=False)
        from playwright.sync_api import sync_playwright

        from tests.support.groups import first_in_run

        first_in_run(config, tmp_path_factory, "chromium")
        self._playwright = sync_playwright()
        playwright = self._playwright.__enter__()
        try:
            self.browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        except Exception as exc:  # noqa: BLE001 - any reason is a failure, not a skip
            self.stop()
            pytest.fail(f"could not launch Chromium at {CHROMIUM}: {exc}", pytrace=False)
        return self.browser

    def stop(self) -> None:
        browser, playwright, self.browser, self._playwright = self.browser, self._playwright, None, None
        try:
            if browser is not None:
                browser.close()
        finally:
            if playwright is not None:
                playwright.__exit__(None, None, None)


_CHROMIUM = _Chromium()


@pytest.fixture
def browser(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The headless Debian Chromium (one for a row of browser tests, see `_Chromium`). Missing
    Chromium fails: an untested browser is not a passed browser test (browsers cannot be downloaded
    here; never `playwright install`)."""
    return _CHROMIUM.start(request.config, tmp_path_factory)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test's own teardown (its pages closed): stop the browser unless the next test wants it."""
    try:
        return (yield)
    finally:
        if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
            _CHROMIUM.stop()


# -- the real server: `assay serve` as a user starts it -------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assay_exe() -> Path:
    """The `assay` console script of the interpreter running the tests."""
    beside = Path(sys.executable).parent / "assay"
    return beside if beside.exists() else Path(shutil.which("assay") or "assay")


@contextmanager
def assay_serve(db_url: str | None, log: Path, *, env: Mapping[str, str] | None = None, workers: int = 1,
                probe: str = "/openapi.json", deadline: float = 60.0, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """The real `assay serve` on 127.0.0.1 and a free port, its output in `log`; yields its base URL
    once `probe` answers 200, and stops it (SIGTERM, then kill) however the block ends. `env`
    defaults to this process's, less `ASSAY_DB`, with the tests' `ASSAY_SECRET`; `extra`: more
    arguments (`--access-log`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    environ = dict(env) if env is not None else (
        {k: v for k, v in os.environ.items() if k != "ASSAY_DB"} | {"ASSAY_SECRET": SECRET.decode()})
    argv = [str(assay_exe()), "serve", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--db", db_url] if db_url is not None else []
    argv += ["--workers", str(workers)] if workers != 1 else []
    argv += list(extra)
    with log.open("w") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=environ)
    try:
        start = time.monotonic()
        while True:
            if proc.poll() is not None or time.monotonic() - start > deadline:
                pytest.fail(f"assay serve did not start: {log.read_text()[-2000:]}", pytrace=False)
            try:
                with urllib.request.urlopen(base + probe, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
