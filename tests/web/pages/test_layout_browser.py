"""The board chart's labels never touch a grid line, and the title's "version 1.0" never breaks, at a
phone's width (390 CSS px) and a desktop's (1280): checked on the element boxes Chromium lays out
(Playwright's `bounding_box`), not on pixels; a screenshot of each is kept (issue 29 item 5)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import artifacts_dir

pytestmark = pytest.mark.xdist_group("browser")


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _boxes(locator: Any) -> list[dict[str, float]]:
    return [box for i in range(locator.count()) if (box := locator.nth(i).bounding_box()) is not None]


@pytest.mark.parametrize("width", [390, 1280])
def test_chart_labels_clear_the_grid_and_the_version_stays_whole(browser: Any, server: str, width: int) -> None:
    context = browser.new_context(java_script_enabled=False, viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{server}/suites/mini")
        chart = page.locator("svg.board-chart")
        texts = _boxes(chart.locator("text"))
        grid = _boxes(chart.locator("line.grid"))
        assert len(texts) >= 10 and len(grid) >= 5
        for text in texts:
            for line in grid:
                assert not _overlap(text, line), (width, text, line)
        title = page.locator("h1").bounding_box()
        version = page.locator("h1 .version")
        box = version.bounding_box()
        assert title is not None and box is not None and version.inner_text() == "version 1.1"
        line_height = 1.25 * 1.1 * 16  # the stylesheet's h1 line height at the version's font size (px)
        assert box["height"] < 1.5 * line_height, (width, box)  # one line: "version" and "1.1" together
        if width >= 1280:
            assert box["y"] < title["y"] + line_height, (title, box)  # beside the title, not under it
        page.screenshot(path=str(artifacts_dir() / f"layout-{width}.png"), full_page=True)
    finally:
        context.close()
