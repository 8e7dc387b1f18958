"""The panel pipeline in Debian's Chromium with JavaScript off, against a real `assay serve` on
127.0.0.1 (issue 11): `/benchmark` says "no runs scored yet" before anything is scored; panelists
apply with the `/panel` form, an admin logs in with the login form (the Secure cookie is kept over
http://127.0.0.1, which Chromium treats as a potentially trustworthy origin), approves them and
ingests through the admin forms; afterwards `/benchmark` shows the ranked model with its median,
the provisional model only as a count, and no email anywhere in the page.

The browser is `tests/web/conftest.py`'s (in the "browser" xdist group with the board pages' tests:
one worker, one Chromium for them all).
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Server

pytestmark = pytest.mark.xdist_group("browser")


def _submit(page: Any, form: Any) -> None:
    with page.expect_navigation():
        form.locator("button[type=submit]").first.click()


def _log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login")
    form = page.locator("form.admin-login")
    form.locator("input[name=email]").fill(ADMIN_EMAIL)
    form.locator("input[name=password]").fill(ADMIN_PASSWORD)
    _submit(page, form)
    assert page.url == f"{base}/admin", page.url
    assert ADMIN_EMAIL in page.locator("nav.admin-nav").inner_text()


def _apply(page: Any, base: str, email: str, specialty: str, years: int) -> None:
    page.goto(f"{base}/panel")
    form = page.locator("form.panel-apply")
    form.locator("input[name=email]").fill(email)
    form.locator("input[name=specialty]").fill(specialty)
    form.locator("input[name=years_experience]").fill(str(years))
    form.locator("textarea[name=statement]").fill("I have shipped on-call tooling for a decade.")
    _submit(page, form)
    assert "Application received" in page.locator("h1").inner_text()


def _ingest(page: Any, action: str, **fields: str) -> None:
    form = page.locator(f"form:has(input[name=action][value={action}])")
    for name, value in fields.items():
        field = form.locator(f"[name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    _submit(page, form)
    notice = page.locator("section.notice").first
    assert notice.get_attribute("data-state") == "empty", notice.inner_text()  # a success, not a refusal


def _runs(page: Any) -> dict[str, str]:
    rows = page.locator("table.runs tbody tr")
    return {rows.nth(i).locator("td").nth(1).inner_text(): rows.nth(i).get_attribute("data-run") or ""
            for i in range(rows.count())}


def test_the_session_cookie_is_kept_by_chromium_over_http_127_0_0_1(page: Any, panel_server: Server) -> None:
    _log_in(page, panel_server.base)
    cookies = {c["name"]: c for c in page.context.cookies()}
    cookie = cookies["assay_admin"]
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    page.goto(f"{panel_server.base}/admin/ingest")
    assert page.locator("h1").inner_text() == "Ingest"
    with page.expect_navigation():
        page.locator("form.logout button").click()
    assert page.url.endswith("/admin/login")
    page.goto(f"{panel_server.base}/admin/ingest")
    assert page.url.endswith("/admin/login")  # the session ended; the page sends us to log in


def test_the_board_before_and_after_scoring_without_javascript(page: Any, panel_server: Server) -> None:
    base = panel_server.base
    answer = page.goto(f"{base}/benchmark")
    assert answer is not None and answer.status == 200
    assert "no runs scored yet" in page.locator("[data-state=empty]").inner_text()
    assert page.locator("article.entry").count() == 0

    panelists = [(f"rater{i}@example.org", specialty, years) for i, (specialty, years) in
                 enumerate((("game designer", 12), ("SRE", 7), ("security engineer", 15)))]
    for email, specialty, years in panelists:
        _apply(page, base, email, specialty, years)

    _log_in(page, base)
    page.goto(f"{base}/admin/applications")
    for email, _, _ in panelists:
        row = page.locator(f"table.applications tr:has(td:text-is('{email}'))")
        _submit(page, row.locator("form[action$='/approve']"))
        assert f"{email} is approved" in page.locator("section.notice").inner_text()

    page.goto(f"{base}/admin/ingest")
    _ingest(page, "register-model", slug="ranked-model", name="Ranked Model", vendor="Acme")
    _ingest(page, "register-model", slug="thin-model", name="Thin Model", vendor="Thin Inc")
    _ingest(page, "register-environment", slug="outage", name="Outage", spec="Restore the service.")
    _ingest(page, "create-run", model="ranked-model", environment="outage", artifact_url="https://a.example.org/1")
    _ingest(page, "create-run", model="thin-model", environment="outage", artifact_url="https://a.example.org/2")
    runs = _runs(page)
    for (email, _, _), rating in zip(panelists, (7, 7, 1)):
        _ingest(page, "record-score", run=runs["ranked-model"], panelist_email=email, rating_safety=str(rating),
                comment="played it through")
    for email, _, _ in panelists[:2]:
        _ingest(page, "record-score", run=runs["thin-model"], panelist_email=email, rating_safety="9")
    _ingest(page, "finalize-run", run=runs["ranked-model"])
    _ingest(page, "finalize-run", run=runs["thin-model"])

    answer = page.goto(f"{base}/benchmark")
    assert answer is not None and answer.status == 200
    assert page.locator("[data-state=empty]").count() == 0
    entries = page.locator("article.entry")
    assert entries.count() == 1 and entries.first.get_attribute("data-model") == "ranked-model"
    entry = entries.first
    assert "Ranked Model" in entry.locator("h3").inner_text() and "rank 1" in entry.locator("h3").inner_text()
    assert entry.locator("tr[data-category=safety] td").inner_text() == "7.00"  # median of 7, 7 and 1
    assert entry.locator("[data-figure=overall] .value").inner_text() == "7.00"
    assert "3 panelists" in entry.locator(".facts").inner_text()
    provisional = page.locator("[data-state=provisional]")
    assert provisional.locator(".count").inner_text() == "1"
    body = page.locator("body").inner_text()
    assert "Thin Model" not in body and "thin-model" not in body and "9.00" not in body
    assert "@" not in body and "@" not in page.content()  # no email anywhere, not even in the markup
    assert "game designer, 12 years" in body and "played it through" not in body
