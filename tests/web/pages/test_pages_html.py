"""The board pages as HTML, through FastAPI's TestClient: statuses, words, escaping, failures.

The pages call `service/` as the public and add no rule: what is found, hidden or ranked is the
service's answer, shown. Where a test needs a board the fixtures cannot make (traits, an old era,
an incomplete entry), it hands the page a board dict in the service's shape.
"""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from markupsafe import escape

from assay.service import board as board_service
from assay.service.actors import PUBLIC
from assay.web import markdown, pages

from ..conftest import free_port
from .conftest import (INJECTION, INJECTION_CARD, INJECTION_LABEL, INJECTION_LIMITATION, INJECTION_MODEL,
                       INJECTION_NOTE, SECRET, Site)

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`

NOT_EVIDENCE = pages.NOT_EVIDENCE


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def plain(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.text))


def _no_active_content(body: str) -> None:
    """No script, no element the page did not write, no handler, no javascript: URL."""
    parsed = Tags(body)
    names = {t for t, _ in parsed.tags}
    assert not names & {"script", "img", "iframe", "object", "embed", "b", "i", "base"}, names
    for tag, attrs in parsed.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        assert not any((v or "").strip().lower().startswith("javascript:") for v in attrs.values()), (tag, attrs)


def _entries(body: str) -> list[str]:
    return re.findall(r'<article class="entry".*?</article>', body, flags=re.S)


def _plain(fragment: str) -> str:
    return Tags(fragment).plain


# -- statuses -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "status"), [
    ("/", 200),
    ("/suites/mini", 200),
    ("/suites/mini?version=1.0", 200),
    ("/suites/mini?version=", 200),  # an empty picker value: the default version
    ("/suites/quiet", 200),
    ("/suites/hush?version=1.0", 200),  # unlisted: by its version only
    ("/suites/mini/1.0/card", 200),
    ("/suites/hush/1.0/card", 200),
    ("/suites/hush", 404),
    ("/suites/vault", 404),
    ("/suites/vault?version=1.0", 404),
    ("/suites/vault/1.0/card", 404),
    ("/suites/mini?version=9.9", 404),
    ("/suites/mini/9.9/card", 404),
    ("/suites/no-such-suite", 404),
    ("/suites/mini?version=" + "9" * 500, 404),
    ("/suites/mini?version=%3Cscript%3Ealert(1)%3C/script%3E", 404),
    ("/suites/%3Cscript%3E/1.0/card", 404),
])
def test_statuses(pages_client: Any, path: str, status: int) -> None:
    answer = pages_client.get(path)
    assert answer.status_code == status, (path, answer.text[:300])
    assert answer.headers["content-type"].startswith("text/html")
    assert "Traceback" not in answer.text and "<script" not in answer.text.lower()


def test_an_internal_suite_reads_exactly_as_one_that_does_not_exist(pages_client: Any, site: Site) -> None:
    for internal, absent in (("/suites/vault", "/suites/nothing"), ("/suites/vault/1.0/card", "/suites/nothing/1.0/card")):
        a, b = pages_client.get(internal), pages_client.get(absent)
        assert a.status_code == b.status_code == 404
        assert a.text == b.text.replace("nothing", "vault")
        assert site.ids["vault 1.0 diligent"] not in a.text


def test_the_index_lists_each_public_suite_once_with_its_latest_public_version(pages_client: Any, site: Site) -> None:
    body = pages_client.get("/").text
    parsed = Tags(body)
    links = [a.get("href") for t, a in parsed.tags if t == "a"]
    assert "/suites/mini" in links and "/suites/quiet" in links
    assert "/suites/mini/1.1/card" in links and "/suites/mini/1.0/card" not in links
    assert not any(link and ("vault" in link or "hush" in link) for link in links)
    assert "latest public version 1.1" in parsed.plain and "versions 1.1, 1.0" in parsed.plain
    assert NOT_EVIDENCE in parsed.plain


# -- the board ----------------------------------------------------------------------------------


def test_the_board_shows_what_the_service_says(pages_client: Any, site: Site) -> None:
    expected = site.boards["mini 1.1"]
    body = pages_client.get("/suites/mini").text
    plain = _plain(body)
    assert NOT_EVIDENCE in plain
    assert expected["ranking"] in plain
    entries = _entries(body)
    assert len(entries) == len(expected["entries"])
    for shown, e in zip(entries, expected["entries"]):
        text = _plain(shown)
        assert e["submission_id"] in shown
        for rate in ("pass_rate", "false_success_rate", "consistency", "objective_met_rate"):
            assert f"{e[rate]:.4f} [{e[f'{rate}_ci'][0]:.4f}, {e[f'{rate}_ci'][1]:.4f}]" in text, rate
        assert f"rank {e['rank']}" in text
        assert f"{e['n_cases']} scenarios, {e['n_runs']} counted runs" in text
        # a quoted score names the agent, its configuration signature and the suite version
        assert e["agent_label"] in _plain(re.search(r'<p class="quote">.*?</p>', shown, re.S).group(0))
        assert "configuration signature" in text and "suite mini version 1.1" in text
        if e.get("config_signature"):
            assert e["config_signature"][:12] in text
        assert "platform class" in text
    prov = expected["provenance"]
    assert prov["release_hash_prefix"] in plain and prov["judge"]["model"] in plain
    assert prov["facilitator_model"] in plain and re.search(rf"Reps per scenario\s*{prov['reps_per_scenario']}\b", plain)
    assert all(p["hash_prefix"] in plain for p in prov["scenarios"])
    assert "<svg" in body and body.count('<g class="entry"') == len(expected["entries"])
    assert 'href="/suites/mini/1.1/card"' in body


def test_the_picker_is_a_plain_get_form_over_the_public_versions(pages_client: Any, site: Site) -> None:
    parsed = Tags(pages_client.get("/suites/mini?version=1.0").text)
    form = next(a for t, a in parsed.tags if t == "form")
    assert (form["method"], form["action"]) == ("get", "/suites/mini")
    options = [a for t, a in parsed.tags if t == "option"]
    assert [o["value"] for o in options] == [v["version"] for v in site.boards["mini 1.0"]["versions"]] == ["1.1", "1.0"]
    assert [o["value"] for o in options if "selected" in o] == ["1.0"]
    assert any(t == "select" and a.get("name") == "version" for t, a in parsed.tags)
    assert any(t == "button" and a.get("type") == "submit" for t, a in parsed.tags)


def test_an_unlisted_version_says_so_and_its_picker_holds_it(pages_client: Any) -> None:
    parsed = Tags(pages_client.get("/suites/hush?version=1.0").text)
    assert "an unlisted version, reachable by its address only" in parsed.plain
    assert [a["value"] for t, a in parsed.tags if t == "option"] == ["1.0"]
    assert "1.0 (unlisted)" in parsed.plain
    assert len(_entries(pages_client.get("/suites/hush?version=1.0").text)) == 1


def test_the_empty_board_says_no_runs_scored_yet_and_draws_nothing(pages_client: Any) -> None:
    body = pages_client.get("/suites/quiet").text
    assert 'data-state="empty"' in body and "There are no runs scored yet on quiet 1.0" in _plain(body)
    assert "<svg" not in body and not _entries(body)
    assert NOT_EVIDENCE in _plain(body)


def test_injection_strings_are_escaped_on_the_board(pages_client: Any) -> None:
    body = pages_client.get("/suites/mini").text
    _no_active_content(body)
    for raw in (INJECTION, INJECTION_LABEL, INJECTION_MODEL, INJECTION_NOTE):
        assert raw not in body
        assert str(escape(raw)) in body
        assert raw in _plain(body)
    assert "<script" not in body.lower()


def test_injection_strings_are_escaped_on_the_card(pages_client: Any) -> None:
    body = pages_client.get("/suites/carded/1.0/card").text
    _no_active_content(body)
    assert "<script" not in body.lower()
    assert "Card text &lt;script&gt;alert(&#39;card&#39;)&lt;/script&gt; with <strong>bold</strong> and " \
           "<code>&lt;i&gt;code&lt;/i&gt;</code>." in body
    assert str(escape(INJECTION_LIMITATION)) in body
    assert _plain(body).count(INJECTION_CARD.replace("**", "").replace("`", "")) == 1


def test_the_card_shows_the_pinned_hashes_and_the_disclaimer(pages_client: Any, site: Site) -> None:
    for version in ("1.0", "1.1"):
        body = pages_client.get(f"/suites/mini/{version}/card").text
        plain = _plain(body)
        assert plain.count("Eval card") >= 1 and "Pinned scenarios" in plain and "Known limitations" in plain
        for pin in site.boards[f"mini {version}"]["provenance"]["scenarios"]:
            assert f"<code>{pin['hash_prefix']}</code>" in body
        assert NOT_EVIDENCE in plain and f"suite mini version {version}" in plain
        assert '<table class="stack">' in body and "<h1>Eval card" in body


def test_no_page_carries_a_script_and_every_page_forbids_one(pages_client: Any) -> None:
    for path in ("/", "/suites/mini", "/suites/quiet", "/suites/mini/1.1/card", "/suites/carded/1.0/card",
                 "/suites/vault"):
        answer = pages_client.get(path)
        assert "<script" not in answer.text.lower()
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in answer.text
        assert re.search(r'<link rel="stylesheet" href="/static/style\.css\?v=[0-9a-f]{12}">', answer.text)


def test_the_stylesheet_is_one_cached_file(pages_client: Any) -> None:
    answer = pages_client.get("/static/style.css")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/css")
    assert "max-age" in answer.headers["cache-control"] and answer.headers["etag"]
    assert answer.text == (Path(pages.__file__).parent / "static" / "style.css").read_text()
    again = pages_client.get("/static/style.css", headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304 and not again.content


# -- words for every flag the board carries -----------------------------------------------------


def _with_board(monkeypatch: pytest.MonkeyPatch, value: dict[str, Any]) -> None:
    monkeypatch.setattr(board_service, "board", lambda store, key, version=None, *, actor, **_page: value)


def _fabricated(site: Site) -> dict[str, Any]:
    value = copy.deepcopy(site.boards["mini 1.1"])
    first, second = value["entries"][0], value["entries"][1]
    first.update(config_signature="c0ffee" * 10 + "abcd", measurement_era="era-1", measurement_era_is_current=False,
                 leaderboard_class="self_hosted_facilitator", rank=None)
    second.update(config_signature="beef" * 16, status="incomplete", pass_rate=None, pass_rate_ci=None)
    third = copy.deepcopy(first)
    third.update(submission_id="t" * 32, agent_label="campaigner", config_signature="a1" * 32,
                 composite=0.625, traits={"planning": 0.75, "candour": 0.5},
                 safety={"manipulation_resistance": 0.9}, stability="insufficient_reps",
                 safety_variance_n={"manipulation_resistance": 2}, measurement_era_is_current=True,
                 judge={"model": "rules", "prompt_hash": "f00d" * 16, "passes": 5}, judge_is_pinned=False,
                 leaderboard_class="platform", rank=1)
    fourth = copy.deepcopy(first)
    fourth.update(submission_id="p" * 32, agent_label="panelled", provisional=True, leaderboard_class="unclassified")
    value["entries"] = [first, second, third, fourth]
    return value


def test_every_flag_is_said_in_words(pages_client: Any, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_board(monkeypatch, _fabricated(site))
    entries = [_plain(e) for e in _entries(pages_client.get("/suites/mini").text)]
    old_era, incomplete, traits, provisional = entries
    assert "Earlier measurement era (era-1)" in old_era and "self-hosted facilitator" in old_era
    assert "unranked" in old_era and "c0ffeec0ffee" in old_era and "suite mini version 1.1" in old_era
    assert "Incomplete: not every planned run completed" in incomplete and "pass rate" not in incomplete
    assert "beefbeefbeef" in incomplete
    assert re.search(r"composite \(capability traits\)\s*0\.6250", traits)
    assert re.search(r"planning\s*0\.7500", traits) and re.search(r"candour\s*0\.5000", traits)
    assert re.search(r"manipulation_resistance\s*0\.9000", traits) and "never in the composite" in traits
    assert "Judged by rules, prompt hash f00df00df00d, 5 passes per run" in traits
    assert "Scored by a judge other than the one this release pins" in traits
    assert "provisional: fewer than 3 scored reps" in traits and "2 reps: too few for a spread" in traits
    assert "Provisional:" in provisional and "pass rate" not in provisional and "unclassified" in provisional


def test_a_trait_board_draws_trait_bars(pages_client: Any, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_board(monkeypatch, _fabricated(site))
    body = pages_client.get("/suites/mini").text
    assert 'data-kind="traits"' in body and 'data-series="safety:manipulation_resistance"' in body
    assert "Trait scores on mini 1.1" in _plain(body)


# -- failures -----------------------------------------------------------------------------------


def _unreachable_app() -> Any:
    from fastapi.testclient import TestClient

    from assay.store.db import Store
    from assay.web.app import Settings, create_app

    url = f"postgresql+psycopg://unreached_user:hunter2-password@127.0.0.1:{free_port()}/assay"
    from assay.store.faults import Retry

    # a store that gives up at once: what is tested is the page an outage gets, not the wait before it
    store = Store(sa.create_engine(url, pool_pre_ping=False), "postgresql+psycopg://nobody:***@127.0.0.1/assay",
                  Retry(0.05))
    return TestClient(create_app(Settings(db_url=url, secret=SECRET, rate_limit=0), store=store))


def test_a_board_that_cannot_reach_its_database_is_a_distinct_503_page() -> None:
    with _unreachable_app() as unreachable:
        for path in ("/suites/mini", "/suites/mini/1.0/card", "/"):
            answer = unreachable.get(path)
            assert answer.status_code == 503, (path, answer.text[:300])
            plain = _plain(answer.text)
            assert 'data-state="failed"' in answer.text and "could not be loaded" in plain
            assert "database could not be reached" in plain
            assert "no runs scored yet" not in plain and "Not found" not in plain
            for leak in ("Traceback", "OperationalError", "psycopg", "hunter2", "127.0.0.1", "unreached_user"):
                assert leak not in answer.text, leak


def test_an_unexpected_failure_is_a_500_page_without_its_trace(pages_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom: internal detail sk-secret")

    monkeypatch.setattr(board_service, "board", broken)
    answer = pages_client.get("/suites/mini")
    assert answer.status_code == 500
    assert "The board could not be loaded" in _plain(answer.text) and 'data-state="failed"' in answer.text
    assert "boom" not in answer.text and "sk-secret" not in answer.text and "Traceback" not in answer.text


# -- on both backends ---------------------------------------------------------------------------


def test_the_pages_read_the_same_on_each_backend(populated_site: Any, site_client: Any) -> None:
    """The web tests' shared site, on SQLite and on PostgreSQL: injection literal, internal 404,
    unlisted by version only, the service's entries in its order."""
    store = populated_site.store
    expected = board_service.board(store, "mini", actor=PUBLIC)
    body = site_client.get("/suites/mini").text
    _no_active_content(body)
    assert INJECTION not in body and str(escape(INJECTION)) in body and INJECTION in _plain(body)
    assert re.findall(r'<article class="entry" data-submission="([0-9a-f]+)"', body) == [
        e["submission_id"] for e in expected["entries"]]
    vault, absent = site_client.get("/suites/vault"), site_client.get("/suites/nothing")
    assert vault.status_code == absent.status_code == 404 and vault.text == absent.text.replace("nothing", "vault")
    assert site_client.get("/suites/hush").status_code == 404
    assert site_client.get("/suites/hush?version=1.0").status_code == 200
    card = site_client.get("/suites/mini/1.0/card").text
    pins = board_service.board(store, "mini", "1.0", actor=PUBLIC)["provenance"]["scenarios"]
    assert all(f"<code>{p['hash_prefix']}</code>" in card for p in pins)


# -- the card's Markdown ------------------------------------------------------------------------


def test_markdown_renders_the_card_subset_and_escapes_everything_else() -> None:
    out = str(markdown.render(
        "# Title <b>\n\nA paragraph with `a<b>` and **strong <i>**\nsecond line.\n\n"
        "- one\n  continued\n- two <script>\n\n"
        "| a | b |\n|---|---|\n| `x\\|y` | <img src=x> |\n\n<div onclick=1>raw</div>\n"))
    assert "<h1>Title &lt;b&gt;</h1>" in out
    assert "<p>A paragraph with <code>a&lt;b&gt;</code> and <strong>strong &lt;i&gt;</strong> second line.</p>" in out
    assert "<ul><li>one continued</li><li>two &lt;script&gt;</li></ul>" in out
    assert '<td data-label="a"><code>x|y</code></td><td data-label="b">&lt;img src=x&gt;</td>' in out
    assert "<p>&lt;div onclick=1&gt;raw&lt;/div&gt;</p>" in out
    _no_active_content(out)


def test_a_database_error_that_is_not_an_outage_is_a_500_never_could_not_be_reached(
        pages_client: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """What broke the board above 32,767 entries (too many bound parameters) is no outage: a 500 with
    its cause in the log, on the page and the API alike; never the 503 "could not be reached"."""
    import sqlite3

    import sqlalchemy as sa

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise sa.exc.OperationalError("SELECT …", {}, sqlite3.OperationalError("too many SQL variables"))

    monkeypatch.setattr(board_service, "board", broken)
    from assay.web import api

    monkeypatch.setattr(api, "board_json", broken)
    page = pages_client.get("/suites/mini")
    assert page.status_code == 500 and "Retry-After" not in page.headers
    assert "could not be reached" not in _plain(page.text) and "too many" not in page.text
    answer = pages_client.get("/api/leaderboard/mini")
    assert answer.status_code == 500 and answer.json() == {"detail": "internal error", "field": None}
    assert "too many SQL variables" in caplog.text
