"""Fixtures for the human panel and admin sessions (issue 11), on SQLite and a real PostgreSQL.

Per test (over the web tests' `web_store`, so each test has its own database of each backend):

- `panel_app`: the app over that store (the web tests' `make_app`, rate limit off: the login limit
  is the one under test here);
- `https`: a `TestClient` on `https://testserver` — the session cookie is `Secure`, and a client
  keeps a Secure cookie only for https; `anon` is another client, never logged in;
- `admin`: an admin account (`ADMIN_EMAIL` / `ADMIN_PASSWORD`) created as the operator;
- `session`: `https` logged in as that admin, with its CSRF token (`Session.csrf`, `Session.ingest`);
- `Panel(session)`: helpers that drive the pipeline through the API as a person would.

For the browser test: `browser` is the headless Debian Chromium of `tests/web/conftest.py` (JavaScript
off per page), which fails, never skips, when Chromium is missing; session-scoped, `panel_server` starts a real
`assay serve` on 127.0.0.1 and a free port over a temporary SQLite store with an admin in it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ..conftest import SECRET, assay_serve, make_app
from tests.support.forkserver import assay_command

ADMIN_EMAIL = "root@example.org"
ADMIN_PASSWORD = "correct horse battery staple"
HERE = Path(__file__).resolve().parent


@pytest.fixture
def panel_app(web_store: Any) -> FastAPI:
    return make_app(web_store, rate_limit=0)


@pytest.fixture
def https(panel_app: FastAPI) -> TestClient:
    return TestClient(panel_app, base_url="https://testserver")


@pytest.fixture
def anon(panel_app: FastAPI) -> TestClient:
    return TestClient(panel_app, base_url="https://testserver")


@pytest.fixture
def admin(web_store: Any) -> dict[str, Any]:
    from assay.service import admins
    from assay.service.actors import OPERATOR

    return admins.create(web_store, ADMIN_EMAIL, ADMIN_PASSWORD, actor=OPERATOR)


@dataclass
class Session:
    """A client logged in as an admin: its CSRF token, and the calls the tests make with it."""

    client: TestClient
    csrf: str
    login: Any = None

    def headers(self) -> dict[str, str]:
        return {"X-CSRF-Token": self.csrf}

    def ingest(self, **step: Any) -> Any:
        return self.client.post("/api/benchmark/ingest", json=step, headers=self.headers())

    def decide(self, application_id: str, decision: str) -> Any:
        return self.client.post(f"/api/panel/applications/{application_id}/{decision}", headers=self.headers())


def log_in(client: TestClient, email: str = ADMIN_EMAIL, password: str = ADMIN_PASSWORD) -> Session:
    answer = client.post("/admin/login", json={"email": email, "password": password})
    assert answer.status_code == 200, answer.text
    return Session(client, answer.json()["csrf_token"], answer)


@pytest.fixture
def session(https: TestClient, admin: dict[str, Any]) -> Session:
    return log_in(https)


@dataclass
class Panel:
    """The pipeline driven through the API: applicants, decisions, models, runs, scorecards."""

    s: Session
    public: TestClient
    applications: dict[str, str] = field(default_factory=dict)  # email -> application id

    def apply(self, email: str, specialty: str = "incident response", years: int = 8,
              statement: str = "I run an on-call rota.") -> str:
        answer = self.public.post("/api/panel/applications", json={
            "email": email, "specialty": specialty, "years_experience": years, "statement": statement})
        assert answer.status_code == 201, answer.text
        self.applications[email] = answer.json()["id"]
        return answer.json()["id"]

    def panelist(self, email: str, specialty: str = "incident response", years: int = 8) -> str:
        """An applicant, approved."""
        application_id = self.apply(email, specialty, years)
        assert self.s.decide(application_id, "approve").status_code == 200
        return application_id

    def model(self, slug: str, name: str | None = None, vendor: str = "Acme") -> None:
        answer = self.s.ingest(action="register-model", slug=slug, name=name or slug.upper(), vendor=vendor)
        assert answer.status_code == 200, answer.text

    def environment(self, slug: str = "outage", spec: str = "Restore the service.") -> None:
        answer = self.s.ingest(action="register-environment", slug=slug, name=slug.title(), spec=spec)
        assert answer.status_code == 200, answer.text

    def run(self, model: str, environment: str = "outage") -> str:
        answer = self.s.ingest(action="create-run", model=model, environment=environment,
                               artifact_url=f"https://artifacts.example.org/{model}/{environment}.tar")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "pending"
        return str(answer.json()["run"])

    def score(self, run: str, email: str, ratings: dict[str, Any], comment: str = "", minutes: int = 30) -> Any:
        return self.s.ingest(action="record-score", run=run, panelist_email=email, ratings=ratings,
                             comment=comment, minutes=minutes)

    def finalize(self, run: str) -> Any:
        return self.s.ingest(action="finalize-run", run=run)


@pytest.fixture
def pipeline(session: Session, anon: TestClient) -> Panel:
    return Panel(session, anon)


# -- the real server and the browser -------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    base: str
    db_url: str
    env: dict[str, str]


@pytest.fixture(scope="session")
def panel_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real `assay serve` over a fresh SQLite store, with an admin created through the CLI."""
    root = tmp_path_factory.mktemp("panel-serve")
    db_url = f"sqlite:///{root / 'assay.db'}"
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"} | {"ASSAY_SECRET": SECRET.decode()}
    created = subprocess.run([*assay_command(), "admin", "create", ADMIN_EMAIL, "--password-stdin", "--db", db_url],
                             input=ADMIN_PASSWORD + "\n", capture_output=True, text=True, env=env, timeout=120)
    assert created.returncode == 0, created.stderr
    with assay_serve(db_url, root / "serve.log", env=env, probe="/benchmark") as base:
        yield Server(base, db_url, env)


def artifacts_dir() -> Path:
    where = Path(os.environ.get("ASSAY_ARTIFACTS") or HERE / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh JavaScript-off context and page; its screenshot is kept when the test ends."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    try:
        yield opened
    finally:
        name = "panel-" + request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
        try:
            opened.screenshot(path=str(artifacts_dir() / f"{name}.png"), full_page=True)
        finally:
            context.close()
