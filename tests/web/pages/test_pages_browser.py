"""The board pages in Debian's Chromium with JavaScript off, against the real server on 127.0.0.1.

Each test saves a screenshot (see conftest `page`/`phone`). All of them share one browser and run
in one xdist group, so a split run still starts Chromium once (a second worker starting it fails).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import INJECTION, INJECTION_LABEL, INJECTION_MODEL, INJECTION_NOTE, Site

pytestmark = pytest.mark.xdist_group("browser")

NOT_EVIDENCE = "not evidence that an agent is safe to run in production"


def _entry_labels(page: Any) -> list[str]:
    return page.locator("article.entry h3 .label").all_inner_texts()


def test_empty_board_says_no_runs_scored_yet(page: Any, server: str) -> None:
    answer = page.goto(f"{server}/suites/quiet")
    assert answer is not None and answer.status == 200
    assert "no runs scored yet" in page.locator("[data-state=empty]").inner_text()
    assert page.locator("article.entry").count() == 0 and page.locator("svg.board-chart").count() == 0
    assert NOT_EVIDENCE in page.locator("body").inner_text()


def test_populated_board_shows_the_latest_versions_entries_figures_and_an_svg_chart(
        page: Any, server: str, site: Site) -> None:
    expected = site.boards["mini 1.1"]
    answer = page.goto(f"{server}/suites/mini")
    assert answer is not None and answer.status == 200
    assert "version 1.1" in page.locator("h1").inner_text()
    assert _entry_labels(page) == [e["agent_label"] for e in expected["entries"]]
    for e in expected["entries"]:
        card = page.locator(f"article.entry[data-submission='{e['submission_id']}']")
        pass_rate = card.locator("[data-figure=pass_rate]").inner_text()
        assert f"{e['pass_rate']:.4f}" in pass_rate
        assert f"[{e['pass_rate_ci'][0]:.4f}, {e['pass_rate_ci'][1]:.4f}]" in pass_rate
        assert f"rank {e['rank']}" in card.locator("h3").inner_text()
        quote = card.locator(".quote").inner_text()
        assert e["agent_label"] in quote and "configuration signature" in quote and "mini version 1.1" in quote
    chart = page.locator("svg.board-chart")
    assert chart.count() == 1 and chart.is_visible()
    assert chart.locator("g.entry").count() == len(expected["entries"])
    bars = chart.locator("rect.bar")
    values = [float(bars.nth(i).get_attribute("data-value") or "nan") for i in range(bars.count())]
    assert values == [e["pass_rate"] for e in expected["entries"]]
    text = page.locator("body").inner_text()
    assert NOT_EVIDENCE in text
    assert page.locator(f"[data-submission='{site.ids['mini 1.0 diligent']}']").count() == 0  # 1.0's entry
    for pin in expected["provenance"]["scenarios"]:
        assert pin["hash_prefix"] in page.locator("table.pins").inner_text()


def test_the_version_picker_leads_to_version_1_with_its_own_entries(page: Any, server: str, site: Site) -> None:
    page.goto(f"{server}/suites/mini")
    assert page.locator("select[name=version] option[selected]").get_attribute("value") == "1.1"
    page.locator("select[name=version]").select_option("1.0")
    with page.expect_navigation():
        page.locator("form.picker button[type=submit]").click()  # a plain GET form: no script involved
    assert re.search(r"/suites/mini\?version=1\.0$", page.url), page.url
    assert "version 1.0" in page.locator("h1").inner_text()
    old = site.boards["mini 1.0"]
    entries = page.locator("article.entry")
    shown = [entries.nth(i).get_attribute("data-submission") for i in range(entries.count())]
    assert shown == [e["submission_id"] for e in old["entries"]] == [site.ids["mini 1.0 diligent"]]
    assert "an earlier public version" in page.locator(".suite-meta").inner_text()
    pins = page.locator("table.pins").inner_text()
    assert all(p["hash_prefix"] in pins for p in old["provenance"]["scenarios"])
    assert old["provenance"]["scenarios"][0]["hash_prefix"] != site.boards["mini 1.1"]["provenance"]["scenarios"][0]["hash_prefix"]
    assert page.locator("select[name=version] option[selected]").get_attribute("value") == "1.0"


def test_an_internal_suite_is_a_404_page_like_a_suite_that_does_not_exist(page: Any, server: str, site: Site) -> None:
    answer = page.goto(f"{server}/suites/vault")
    assert answer is not None and answer.status == 404
    internal = page.locator("main").inner_text()
    assert "Not found" in internal and site.ids["vault 1.0 diligent"] not in page.content()
    card = page.goto(f"{server}/suites/vault/1.0/card")
    assert card is not None and card.status == 404
    absent = page.goto(f"{server}/suites/no-such-suite")
    assert absent is not None and absent.status == 404
    assert page.locator("main").inner_text().replace("no-such-suite", "vault") == internal
    page.goto(f"{server}/suites/vault")  # the screenshot shows the internal suite's page


def test_the_card_shows_the_pinned_hashes(page: Any, server: str, site: Site) -> None:
    for version in ("1.0", "1.1"):
        answer = page.goto(f"{server}/suites/mini/{version}/card")
        assert answer is not None and answer.status == 200
        text = page.locator("article.card").inner_text()
        assert text.startswith("Eval card") and "Pinned scenarios" in text
        for pin in site.boards[f"mini {version}"]["provenance"]["scenarios"]:
            assert pin["hash_prefix"] in page.locator("article.card table").first.inner_text()
        assert site.boards[f"mini {version}"]["provenance"]["release_hash_prefix"] in text
        assert NOT_EVIDENCE in page.locator("body").inner_text()
    other = site.boards["mini 1.0"]["provenance"]["scenarios"][0]["hash_prefix"]
    assert other not in page.locator("article.card").inner_text()  # 1.1's card pins 1.1's documents


def test_injection_strings_are_shown_literally(page: Any, server: str, site: Site) -> None:
    page.goto(f"{server}/suites/mini")
    entry = page.locator(f"article.entry[data-submission='{site.ids['mini 1.1 mallory']}']")
    assert entry.locator("h3 .label").inner_text() == INJECTION_LABEL
    assert INJECTION_MODEL in entry.locator(".facts").inner_text()
    assert INJECTION_NOTE in entry.locator(".note").inner_text()
    assert page.locator("script").count() == 0 and page.locator("img").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    bob = page.locator(f"article.entry[data-submission='{site.ids['mini 1.1 idle']}']")
    assert bob.locator("h3 .label").inner_text() == INJECTION  # SQL, template and shell syntax too
    chart_labels = page.locator("svg.board-chart text.entry-label").all_text_contents()
    assert any(t.startswith(INJECTION_LABEL[:30]) for t in chart_labels), chart_labels
    card = page.goto(f"{server}/suites/carded/1.0/card")
    assert card is not None and card.status == 200
    assert "Card text <script>alert('card')</script> with bold and <i>code</i>." in page.locator("article.card").inner_text()
    assert page.locator("script").count() == 0 and page.locator("article.card img").count() == 0


def test_the_index_lists_public_suites_only(page: Any, server: str) -> None:
    answer = page.goto(f"{server}/")
    assert answer is not None and answer.status == 200
    keys = page.locator("ul.suites li .meta code").all_inner_texts()
    assert {"mini", "quiet"} <= set(keys)
    assert "vault" not in keys and "hush" not in keys
    page.locator("ul.suites li", has_text="Mini mini").locator("a", has_text="board").click()
    assert page.url.endswith("/suites/mini") and "version 1.1" in page.locator("h1").inner_text()


def test_the_board_reads_on_a_phone(phone: Any, server: str) -> None:
    """At 390 CSS px nothing overflows sideways: the chart scales, the figures wrap."""
    phone.goto(f"{server}/suites/mini")
    width = phone.viewport_size["width"]
    for selector in ("h1", ".disclaimer", "form.picker", "svg.board-chart", "article.entry", ".provenance dl"):
        box = phone.locator(selector).first.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box)
    assert phone.locator("svg.board-chart").bounding_box()["width"] > width * 0.7
