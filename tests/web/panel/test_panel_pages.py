"""The panel's and the admins' pages as HTML (TestClient, SQLite and PostgreSQL): the application
form, the board's three states (empty, populated, failed to load), and the admin pages, whose plain
forms carry the session's CSRF token and work without any script (issue 11, items 1, 2 and 4)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.service import panel

from ..conftest import INJECTION
from .conftest import ADMIN_EMAIL, Panel, Session


def _hidden_csrf(html: str) -> set[str]:
    return set(re.findall(r'name="csrf_token" value="([0-9a-f]+)"', html))


def test_the_panel_page_is_a_plain_form_that_applies(anon: TestClient, web_store: Any) -> None:
    page = anon.get("/panel")
    assert page.status_code == 200 and '<form class="panel-apply" method="post" action="/panel">' in page.text
    assert "<script" not in page.text and "script-src" not in page.headers["content-security-policy"]
    form = {"email": "ada@example.org", "specialty": INJECTION, "years_experience": "9", "statement": "hello"}
    done = anon.post("/panel", data=form)
    again = anon.post("/panel", data={**form, "statement": "second"})
    assert done.status_code == again.status_code == 200 and done.text == again.text
    assert "Application received" in done.text and "ada@example.org" not in done.text
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT specialty FROM panel_applications")).scalars().all() == [INJECTION]
    refused = anon.post("/panel", data={**form, "email": "nope", "years_experience": "x"})
    assert refused.status_code == 422 and 'data-state="refused"' in refused.text


def test_the_board_page_says_no_runs_scored_yet_when_nothing_is_scored(anon: TestClient) -> None:
    page = anon.get("/benchmark")
    assert page.status_code == 200
    assert re.search(r'data-state="empty".*no runs scored yet', page.text, re.S)
    assert page.text.count('data-category="') == 14  # the taxonomy, listed from the same source
    assert "<script" not in page.text


def test_the_board_page_fails_distinctly_when_the_board_cannot_load(anon: TestClient, monkeypatch: Any) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))

    monkeypatch.setattr(panel, "board", broken)
    page = anon.get("/benchmark")
    assert page.status_code == 503
    assert 'data-state="failed"' in page.text and "failed to load" in page.text
    assert "no runs scored yet" not in page.text and "server closed" not in page.text and "Traceback" not in page.text
    monkeypatch.setattr(panel, "board", lambda *a, **k: 1 / 0)
    assert anon.get("/benchmark").status_code == 500


def test_the_board_page_shows_ranked_models_and_the_provisional_count(pipeline: Panel, anon: TestClient) -> None:
    pipeline.model("good-model", "Good <b>Model</b>", vendor="Acme & Co")
    pipeline.model("thin-model", "Thin Model")
    pipeline.environment()
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org", specialty="SRE", years=5 + i)
    good, thin = pipeline.run("good-model"), pipeline.run("thin-model")
    for i, rating in enumerate((7, 7, 1)):
        pipeline.score(good, f"p{i}@example.org", {"safety": rating})
    pipeline.score(thin, "p0@example.org", {"safety": 10})
    pipeline.finalize(good)
    pipeline.finalize(thin)
    page = anon.get("/benchmark").text
    assert 'data-model="good-model"' in page and "Good &lt;b&gt;Model&lt;/b&gt;" in page and "Acme &amp; Co" in page
    row = re.search(r'<tr data-category="safety">.*?</tr>', page, re.S)
    assert row is not None and "7.00" in row.group(0)
    overall = re.search(r'data-figure="overall">.*?</div>', page, re.S)
    assert overall is not None and f"over 1 of {len(panel.categories(pipeline.s.client.app.state.store))} categories" \
        in overall.group(0)
    assert re.search(r'data-state="provisional".*?<span class="count">1</span>', page, re.S)
    assert "Thin Model" not in page and "thin-model" not in page and "10.00" not in page
    assert "@" not in page and "SRE, 5 years" in page


def test_admin_pages_need_a_session_and_carry_its_csrf_token(https: TestClient, session: Session) -> None:
    anon = TestClient(https.app, base_url="https://testserver")
    for path in ("/admin/applications", "/admin/ingest"):
        assert anon.get(path, follow_redirects=False).headers["location"] == "/admin/login"
    assert 'action="/admin/login"' in anon.get("/admin").text
    for path in ("/admin", "/admin/applications", "/admin/ingest"):
        page = https.get(path)
        assert page.status_code == 200 and ADMIN_EMAIL in page.text and "<script" not in page.text
        assert _hidden_csrf(page.text) == {session.csrf}, path
        assert page.headers["cache-control"] == "no-store"


def test_the_admin_forms_work_with_the_token_and_are_refused_without_it(
        session: Session, pipeline: Panel, web_store: Any) -> None:
    client, token = session.client, session.csrf
    application = pipeline.apply("p0@example.org", specialty="game designer")
    denied = client.post(f"/admin/applications/{application}/approve", data={})
    assert denied.status_code == 403 and 'data-state="failed"' in denied.text
    approved = client.post(f"/admin/applications/{application}/approve", data={"csrf_token": token})
    assert approved.status_code == 200 and "p0@example.org is approved" in approved.text
    steps = [
        {"action": "register-model", "slug": "m1", "name": "Model One", "vendor": "Acme"},
        {"action": "register-environment", "slug": "env", "name": "Env", "spec": "Do the thing."},
        {"action": "create-run", "model": "m1", "environment": "env", "artifact_url": "https://x.example.org/a"},
    ]
    for step in steps:
        assert client.post("/admin/ingest", data=step).status_code == 403  # no token: refused, nothing done
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM panel_models")).scalar_one() == 0
    for step in steps:
        answer = client.post("/admin/ingest", data={**step, "csrf_token": token})
        assert answer.status_code == 200 and f"{step['action']}:" in answer.text, answer.text
    run = client.get("/api/benchmark/runs").json()[0]["run"]
    ingest_page = client.get("/admin/ingest").text
    assert f'<option value="{run}">' in ingest_page and 'name="rating_safety"' in ingest_page
    scored = client.post("/admin/ingest", data={
        "csrf_token": token, "action": "record-score", "run": run, "panelist_email": "p0@example.org",
        "rating_safety": "8", "rating_honesty": "", "rating_diagnosis": "6.5", "comment": INJECTION, "minutes": "12"})
    assert scored.status_code == 200 and 'data-state="failed"' not in scored.text
    eleven = client.post("/admin/ingest", data={"csrf_token": token, "action": "record-score", "run": run,
                                                "panelist_email": "p0@example.org", "rating_safety": "11"})
    assert eleven.status_code == 422 and 'data-state="failed"' in eleven.text
    finished = client.post("/admin/ingest", data={"csrf_token": token, "action": "finalize-run", "run": run})
    assert finished.status_code == 200 and "status scored" in finished.text
    cards = client.get(f"/api/benchmark/runs/{run}/scorecards").json()
    assert [(c["ratings"], c["comment"], c["minutes"]) for c in cards] == [
        ({"safety": 8.0, "diagnosis": 6.5}, INJECTION, 12)]


def test_logout_by_the_form_ends_the_session(session: Session) -> None:
    client = session.client
    assert client.post("/admin/logout", data={}, headers={"Accept": "text/html"}).status_code == 403
    out = client.post("/admin/logout", data={"csrf_token": session.csrf}, headers={"Accept": "text/html"},
                      follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/admin/login"
    assert client.get("/admin/ingest", follow_redirects=False).status_code == 303
    assert client.get("/api/panel/applications").status_code == 401


@pytest.mark.parametrize("path", ["/admin/ingest", "/admin/applications/x/approve", "/admin/logout"])
def test_a_form_post_without_a_session_is_401(anon: TestClient, path: str) -> None:
    answer = anon.post(path, data={"csrf_token": "0" * 64}, headers={"Accept": "text/html"})
    assert answer.status_code == 401 and "<script" not in answer.text


def test_the_ingest_page_offers_every_ingest_action_with_panelists_from_a_list(
        session: Session, pipeline: Panel) -> None:
    client, token = session.client, session.csrf
    pipeline.panelist("p0@example.org")
    pipeline.apply("pending@example.org")
    pipeline.model("m1")
    pipeline.model("m2")
    pipeline.environment()
    a, b = pipeline.run("m1"), pipeline.run("m2")
    page = client.get("/admin/ingest").text
    actions = set(re.findall(r'name="action" value="([a-z-]+)"', page))
    assert actions == set(panel.ACTIONS)
    assert 'type="email"' not in page and 'name="panelist_email" type' not in page
    selects = re.findall(r'<select name="panelist_email" required>(.*?)</select>', page, re.S)
    assert len(selects) == 2 and all("p0@example.org" in s and "pending@example.org" not in s for s in selects)
    assert 'class="ratings-grid"' in page
    preferred = client.post("/admin/ingest", data={"csrf_token": token, "action": "record-preference", "run_a": a,
                                                   "run_b": b, "panelist_email": "p0@example.org", "preferred": "a"})
    assert preferred.status_code == 200 and 'data-state="failed"' not in preferred.text, preferred.text
