"""Fixtures for the board pages: one populated store, the real server over it, one Chromium.

`site` is the web tests' populated site (`tests/web/conftest.py` `build_site`, on SQLite: `mini`
1.0 and 1.1 with published entries, `hush` unlisted, `vault` internal, bob's label an injection
string) built once per session (per xdist worker), plus what only the pages need:

- on mini 1.1 a third entry (account `mallory`) whose label and play model are HTML injection
  strings, and an operator's variance note that is one too;
- `quiet`, public, released with no submission: the empty board;
- `carded`, public, whose card text and known limitations are injection strings.

`server` is the real `assay serve` subprocess on 127.0.0.1 and a free port over that store. `browser` is ONE Debian Chromium
for the row of browser tests (`tests/web/conftest.py`), driven by Playwright; when it is missing the fixture fails, never skips. `page`
and `phone` are fresh JavaScript-off contexts per test whose screenshot is kept under the
artefacts dir (`$ASSAY_ARTIFACTS`, default `tests/web/pages/artifacts/`, git-ignored).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.board._support import mini_suite

from ..conftest import INJECTION, SECRET, assay_serve  # noqa: F401 - INJECTION is re-exported to the page tests
from ..conftest import build_site as build_web_site

HERE = Path(__file__).resolve().parent
INJECTION_LABEL = "<script>alert('label')</script><img src=x onerror=alert(1)>&amp;\"' {{7*7}} ${7*7}"
INJECTION_MODEL = "<b>model</b><script>alert('model')</script>"
INJECTION_NOTE = "</p><script>alert('note')</script><a href=javascript:alert(1)>note</a>"
INJECTION_CARD = "Card text <script>alert('card')</script> with **bold** and `<i>code</i>`."
INJECTION_LIMITATION = "<img src=x onerror=alert('limitation')>"


def artifacts_dir() -> Path:
    where = Path(os.environ.get("ASSAY_ARTIFACTS") or HERE / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@dataclass
class Site:
    """The populated store and what the tests compare the pages with (read via the service)."""

    db_url: str
    store: Any
    boards: dict[str, dict[str, Any]] = field(default_factory=dict)  # "key version" -> board dict
    ids: dict[str, str] = field(default_factory=dict)  # "key version name" -> submission id


def build_site(root: Path) -> Site:
    from assay.agents.loader import load_agent
    from assay.service import accounts, releases, submissions
    from assay.service.actors import OPERATOR, PUBLIC
    from assay.service.board import board

    web = build_web_site(f"sqlite:///{root / 'assay.db'}", root / "suites")
    store = web.store
    site = Site(web.db_url, store, ids=dict(web.submissions))
    accounts.create(store, "mallory", "mallory", actor=OPERATOR)
    site.ids["mini 1.1 mallory"] = submissions.submit(
        store, "mini", factory=load_agent("reference:idle"), account="mallory", label=INJECTION_LABEL,
        play_model=INJECTION_MODEL, publish=True, workers=2, actor=OPERATOR)
    submissions.note(store, site.ids["mini 1.1 mallory"], INJECTION_NOTE, actor=OPERATOR)
    releases.release_path(store, str(mini_suite(root / "quiet", key="quiet")), actor=OPERATOR)
    carded = mini_suite(root / "carded", key="carded", card=INJECTION_CARD,
                        known_limitations=["Two scenarios only.", INJECTION_LIMITATION])
    releases.release_path(store, str(carded), actor=OPERATOR)
    for key, version in (("mini", "1.0"), ("mini", "1.1"), ("quiet", "1.0"), ("hush", "1.0")):
        site.boards[f"{key} {version}"] = board(store, key, version, actor=PUBLIC)
    return site


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    built = build_site(tmp_path_factory.mktemp("pages-site"))
    try:
        yield built
    finally:
        built.store.close()


@pytest.fixture(scope="session")
def pages_client(site: Site) -> Iterator[Any]:
    """A TestClient over the app on the site's store (rate limit off: the tests are the only caller)."""
    from fastapi.testclient import TestClient

    from assay.web.app import Settings, create_app

    app = create_app(Settings(db_url=site.db_url, secret=SECRET, rate_limit=0), store=site.store)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(autouse=True)
def _fresh_reads(request: pytest.FixtureRequest) -> None:
    """Each test computes its pages afresh: some fabricate the service's answer (monkeypatch), which
    the read cache (`web.edge`, keyed by the store's last change) would otherwise keep for the next."""
    if "pages_client" in request.fixturenames:
        request.getfixturevalue("pages_client").app.state.edge.clear()


# -- the real server ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def server(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of the real `assay serve` over the site's store, on 127.0.0.1 and a free port."""
    with assay_serve(site.db_url, tmp_path_factory.mktemp("serve") / "serve.log", probe="/") as base:
        yield base


# -- the browser --------------------------------------------------------------------------------


DESKTOP = {"width": 1200, "height": 900}
PHONE = {"width": 390, "height": 844}


def _context_page(browser: Any, request: pytest.FixtureRequest, viewport: dict[str, int], suffix: str) -> Iterator[Any]:
    context = browser.new_context(java_script_enabled=False, viewport=viewport)
    opened = context.new_page()
    try:
        yield opened
    finally:
        name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
        try:
            opened.screenshot(path=str(artifacts_dir() / f"{name}{suffix}.png"), full_page=True)
        finally:
            context.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A JavaScript-off desktop page; its screenshot is saved when the test ends."""
    yield from _context_page(browser, request, DESKTOP, "")


@pytest.fixture
def phone(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A JavaScript-off phone-width page (390 CSS px); its screenshot is saved when the test ends."""
    yield from _context_page(browser, request, PHONE, "-phone")
