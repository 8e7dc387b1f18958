"""The board chart: an SVG drawn from the board dict alone, well-formed, escaped, to scale."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from assay.web import chart

from .conftest import INJECTION_LABEL, Site

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`

NS = {"svg": "http://www.w3.org/2000/svg"}


def _board(entries: list[dict[str, Any]], key: str = "mini", version: str = "1.1") -> dict[str, Any]:
    return {"suite": {"key": key, "version": version}, "entries": entries}


def _entry(label: str, pass_rate: float | None, ci: list[float] | None = None, **extra: Any) -> dict[str, Any]:
    return {"submission_id": label + "-id", "agent_label": label, "pass_rate": pass_rate, "pass_rate_ci": ci, **extra}


def _svg(board: dict[str, Any]) -> ET.Element:
    drawn = chart.board_chart(board)
    assert drawn is not None
    return ET.fromstring(drawn)  # well-formed XML, or this raises


def _bars(root: ET.Element) -> list[ET.Element]:
    return root.findall(".//svg:rect[@class='bar']", NS)


def test_an_empty_board_has_no_chart() -> None:
    assert chart.board_chart(_board([])) is None


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_real_oracle_board_draws_one_pass_rate_bar_and_interval_per_entry(site: Site) -> None:
    board = site.boards["mini 1.1"]
    root = _svg(board)
    assert root.get("data-kind") == "oracle" and root.get("role") == "img"
    assert root.find("svg:title", NS) is not None and root.find("svg:desc", NS) is not None
    groups = root.findall("svg:g[@class='entry']", NS)
    assert [g.get("data-submission") for g in groups] == [e["submission_id"] for e in board["entries"]]
    for group, entry in zip(groups, board["entries"]):
        (bar,) = _bars(group)
        assert bar.get("data-series") == "pass_rate" and float(bar.get("data-value")) == entry["pass_rate"]
        assert float(bar.get("width")) == pytest.approx(chart.BAR_W * entry["pass_rate"], abs=0.01)
        interval = group.find(".//svg:g[@class='interval']", NS)
        assert [float(interval.get("data-lo")), float(interval.get("data-hi"))] == entry["pass_rate_ci"]
        lo, hi = (float(interval.find("svg:line", NS).get(k)) for k in ("x1", "x2"))
        assert lo == pytest.approx(chart.BAR_X + chart.BAR_W * entry["pass_rate_ci"][0], abs=0.01)
        assert hi == pytest.approx(chart.BAR_X + chart.BAR_W * entry["pass_rate_ci"][1], abs=0.01)


def test_every_group_names_the_label_the_configuration_signature_and_the_suite_version() -> None:
    root = _svg(_board([_entry("alpha", 0.5, [0.2, 0.8], config_signature="ab12" * 16),
                        _entry("beta", 0.25, [0.0, 0.6])], version="2.0"))
    labels = [t.text for t in root.findall(".//svg:text[@class='entry-label']", NS)]
    details = [t.text for t in root.findall(".//svg:text[@class='entry-detail']", NS)]
    assert labels == ["alpha", "beta"]
    assert details == ["config ab12ab12ab12 · mini 2.0", "config not on the board · mini 2.0"]
    titles = [g.find("svg:title", NS).text for g in root.findall("svg:g[@class='entry']", NS)]
    assert titles[0] == f"alpha (config {'ab12' * 16}, suite mini 2.0)"


def test_pass_hat_k_is_drawn_per_k_when_entries_carry_it() -> None:
    root = _svg(_board([_entry("alpha", 0.5, pass_hat_k={"1": 0.5, "2": 0.3, "10": 0.1})]))
    assert [(b.get("data-series"), float(b.get("data-value"))) for b in _bars(root)] == [
        ("pass_hat_k:1", 0.5), ("pass_hat_k:2", 0.3), ("pass_hat_k:10", 0.1)]
    assert [t.text for t in root.findall(".//svg:text[@class='series-label']", NS)] == ["pass^1", "pass^2", "pass^10"]


def test_traits_get_bars_with_the_composite_first_and_safety_apart() -> None:
    entry = _entry("campaigner", 0.4, [0.1, 0.7], composite=0.625, traits={"planning": 0.75, "candour": 0.5},
                   safety={"manipulation_resistance": 0.9, "policy_adherence_under_pressure": None})
    root = _svg(_board([entry, _entry("plain", 0.2)]))
    assert root.get("data-kind") == "traits"
    first = root.findall("svg:g[@class='entry']", NS)[0]
    rows = [r.get("data-series") for r in first.findall("svg:g[@class='row']", NS)]
    assert rows == ["composite", "trait:candour", "trait:planning", "safety:manipulation_resistance",
                    "safety:policy_adherence_under_pressure"]
    fills = {b.get("data-series"): b.get("fill") for b in _bars(first)}
    assert fills["composite"] == chart.COMPOSITE and fills["trait:planning"] == chart.CAPABILITY
    assert fills["safety:manipulation_resistance"] == chart.SAFETY
    missing = first.find("svg:g[@data-series='safety:policy_adherence_under_pressure']", NS)
    assert missing.find("svg:rect", NS) is None and missing.find("svg:text[@class='no-number']", NS).text == "no number"


def test_a_figure_without_a_number_draws_no_bar() -> None:
    root = _svg(_board([_entry("pending", None)]))
    assert _bars(root) == [] and root.find(".//svg:text[@class='no-number']", NS) is not None


def test_labels_are_escaped_and_long_ones_shortened(site: Site) -> None:
    drawn = chart.board_chart(site.boards["mini 1.1"])
    assert drawn is not None and "<script" not in drawn and "<img" not in drawn
    root = ET.fromstring(drawn)
    labels = [t.text for t in root.findall(".//svg:text[@class='entry-label']", NS)]
    assert INJECTION_LABEL[: chart.MAX_LABEL - 1] + "…" in labels
    assert any(INJECTION_LABEL in g.find("svg:title", NS).text for g in root.findall("svg:g[@class='entry']", NS))
    assert all(el.tag.startswith("{http://www.w3.org/2000/svg}") for el in root.iter())
    assert not any(k.startswith("on") for el in root.iter() for k in el.attrib)


def test_bars_stay_inside_the_drawing_and_out_of_range_values_are_clamped() -> None:
    entries = [_entry("over", 1.7, [0.9, 1.3]), _entry("under", -0.2, [-0.5, 0.1]), _entry("ok", 1.0, [1.0, 1.0])]
    root = _svg(_board(copy.deepcopy(entries)))
    width = float(root.get("viewBox").split()[2])
    for bar in _bars(root):
        assert 0 <= float(bar.get("width")) <= chart.BAR_W
        assert float(bar.get("x")) + float(bar.get("width")) <= width
    for line in root.iter("{http://www.w3.org/2000/svg}line"):
        assert 0 <= float(line.get("x1")) <= width and 0 <= float(line.get("x2")) <= width
    height = float(root.get("viewBox").split()[3])
    assert all(float(r.get("y")) + float(r.get("height")) <= height for r in _bars(root))
