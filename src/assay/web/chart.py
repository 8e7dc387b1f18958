"""The board's chart: one SVG drawn on the server from the board dict, so a page needs no script.

What it draws is what the entries carry, nothing computed here beyond geometry:

- entries with `traits` (campaign suites): one bar per capability trait, the `composite` first
  when present, and the `safety` traits after them in their own colour (they never enter the
  composite, so they are never drawn as part of it);
- otherwise (oracle suites): `pass_hat_k` per k when entries carry it, else the `pass_rate` —
  with its 95% interval (`pass_rate_ci`) drawn as a whisker when the entry carries one.

A figure that is None is not drawn: the row says "no number" instead (no number from too little).
Every label is escaped; each entry's group names its agent label, configuration signature (when
the board carries it) and the suite version, as every quoted score must.

The SVG is well-formed XML (tests parse it), scales to its container (`viewBox`, width 100%),
and carries a `<title>` and `<desc>` for screen readers; the page's table holds the same figures
in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

#: Geometry, in viewBox units: narrow, so that a phone scales the text down little. Each figure is
#: a row of its own: its name on one line, the bar (0..1 over BAR_W) and its value under it.
WIDTH = 360
BAR_X = 0
BAR_W = 288
VALUE_X = BAR_X + BAR_W + 6
ROW_H = 32
BAR_H = 12
HEAD_H = 36
GROUP_GAP = 12
AXIS_H = 20
MAX_LABEL = 40
MAX_SERIES = 48

CAPABILITY = "#2f6db5"
COMPOSITE = "#173f73"
SAFETY = "#b5562f"
INTERVAL = "#111111"
GRID = "#d0d0d0"
#: Where the grid lines are; each is drawn only across a bar's band (`_grid`), so no text meets one.
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Bar:
    """One figure of one entry: its series key, the words beside it, its value (None: no number),
    its 95% interval when the entry carries one, and its kind (colour)."""

    series: str
    label: str
    value: float | None
    interval: tuple[float, float] | None = None
    kind: str = "capability"  # capability | composite | safety


def _short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rate(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return min(1.0, max(0.0, float(value)))


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        lo, hi = _rate(value[0]), _rate(value[1])
        if lo is not None and hi is not None:
            return (lo, hi)
    return None


def has_traits(entries: list[dict[str, Any]]) -> bool:
    return any(isinstance(e.get("traits"), dict) and e["traits"] for e in entries)


def entry_bars(entry: dict[str, Any], traits: bool) -> list[Bar]:
    """The bars one entry gets, in order, read from its own keys."""
    if traits:
        bars: list[Bar] = []
        if "composite" in entry:
            bars.append(Bar("composite", "composite", _rate(entry.get("composite")),
                            _interval(entry.get("composite_ci")), "composite"))
        for name, value in sorted((entry.get("traits") or {}).items()):
            bars.append(Bar(f"trait:{name}", name, _rate(value)))
        for name, value in sorted((entry.get("safety") or {}).items()):
            bars.append(Bar(f"safety:{name}", f"{name} (safety)", _rate(value), None, "safety"))
        return bars
    hat = entry.get("pass_hat_k")
    if isinstance(hat, dict) and hat:
        ks = sorted(hat, key=lambda k: int(k) if str(k).isdigit() else 0)
        return [Bar(f"pass_hat_k:{k}", f"pass^{k}", _rate(hat[k])) for k in ks]
    return [Bar("pass_rate", "pass rate", _rate(entry.get("pass_rate")), _interval(entry.get("pass_rate_ci")))]


def _fill(kind: str) -> str:
    return {"composite": COMPOSITE, "safety": SAFETY}.get(kind, CAPABILITY)


def _x(value: float) -> float:
    return round(BAR_X + BAR_W * value, 2)


def entry_heading(entry: dict[str, Any], key: str, version: str) -> tuple[str, str]:
    """Two lines: the agent's label; then `config abc123def456 · mini 1.1` — which configuration
    and which suite version the figures below belong to."""
    signature = entry.get("config_signature")
    detail = [f"config {str(signature)[:12]}" if signature else "config not on the board", f"{key} {version}"]
    return _short(str(entry.get("agent_label", ""))), " · ".join(detail)


def board_chart(board: Mapping[str, Any]) -> str | None:
    """The SVG for `board`, or None when it has no entry to draw."""
    entries: list[dict[str, Any]] = list(board.get("entries") or [])
    if not entries:
        return None
    suite = board["suite"]
    traits = has_traits(entries)
    what = ("trait means (0–1) per entry; safety traits apart from the composite" if traits
            else "pass^k per entry" if any(isinstance(e.get("pass_hat_k"), dict) and e["pass_hat_k"] for e in entries)
            else "pass rate per entry, with its 95% interval clustered by case")
    title = f"{suite['key']} {suite['version']}: {what}"
    groups: list[str] = []
    y = AXIS_H
    for index, entry in enumerate(entries):
        bars = entry_bars(entry, traits)
        heading, detail = entry_heading(entry, suite["key"], suite["version"])
        full = f"{entry.get('agent_label', '')} (config {entry.get('config_signature') or 'not on the board'}, " \
               f"suite {suite['key']} {suite['version']})"
        parts = [f'<g class="entry" data-entry="{index}" data-submission={quoteattr(str(entry.get("submission_id", "")))}>',
                 f"<title>{escape(full)}</title>",
                 f'<text class="entry-label" x="0" y="{y + 14}" font-size="14" font-weight="bold">{escape(heading)}</text>',
                 f'<text class="entry-detail" x="0" y="{y + 29}" font-size="12" fill="#555">{escape(detail)}</text>']
        y += HEAD_H
        for bar in bars:
            parts.append(_bar_row(bar, y))
            y += ROW_H
        parts.append("</g>")
        groups.append("".join(parts))
        y += GROUP_GAP
    height = y
    axis = ['<g class="axis" font-size="11" fill="#555">']
    for tick in TICKS:
        x = _x(tick)
        anchor = "start" if tick == 0 else "end" if tick == 1 else "middle"
        axis.append(f'<text class="tick" x="{x}" y="{AXIS_H - 7}" text-anchor="{anchor}">{tick:g}</text>')
    axis.append("</g>")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="board-chart" role="img" '
        f'aria-labelledby="chart-title chart-desc" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'preserveAspectRatio="xMinYMin meet" font-family="system-ui, sans-serif" '
        f'data-kind="{"traits" if traits else "oracle"}">'
        f'<title id="chart-title">{escape(title)}</title>'
        f'<desc id="chart-desc">{escape(_describe(entries, traits, suite))}</desc>'
        + "".join(axis) + "".join(groups) + "</svg>"
    )


def _grid(top: float) -> str:
    """The grid lines of one bar's band only: they never cross a label, a value or a heading."""
    return "".join(f'<line class="grid" x1="{_x(t)}" y1="{top}" x2="{_x(t)}" y2="{top + BAR_H}" '
                   f'stroke="{GRID}" stroke-width="1"/>' for t in TICKS)


def _bar_row(bar: Bar, y: int) -> str:
    top = y + 16  # the bar's top, under the figure's name (clear of its descenders)
    mid = top + BAR_H / 2
    parts = [f'<text class="series-label" x="{BAR_X}" y="{y + 11}" font-size="12">{escape(_short(bar.label, MAX_SERIES))}</text>']
    if bar.value is not None:
        parts.append(_grid(top))
    if bar.value is None:
        parts.append(f'<text class="no-number" x="{BAR_X}" y="{top + 10}" font-size="12" font-style="italic" '
                     f'fill="#555">no number</text>')
        return f'<g class="row" data-series={quoteattr(bar.series)}>' + "".join(parts) + "</g>"
    width = round(BAR_W * bar.value, 2)
    parts.append(f'<rect class="bar" data-series={quoteattr(bar.series)} data-value="{bar.value:.4f}" '
                 f'x="{BAR_X}" y="{top}" width="{width}" height="{BAR_H}" fill="{_fill(bar.kind)}"/>')
    if bar.interval is not None:
        lo, hi = _x(bar.interval[0]), _x(bar.interval[1])
        parts.append(f'<g class="interval" data-lo="{bar.interval[0]:.4f}" data-hi="{bar.interval[1]:.4f}" '
                     f'stroke="{INTERVAL}" stroke-width="1.5">'
                     f'<line x1="{lo}" y1="{mid}" x2="{hi}" y2="{mid}"/>'
                     f'<line x1="{lo}" y1="{top + 2}" x2="{lo}" y2="{top + BAR_H - 2}"/>'
                     f'<line x1="{hi}" y1="{top + 2}" x2="{hi}" y2="{top + BAR_H - 2}"/></g>')
    parts.append(f'<text class="value" x="{VALUE_X}" y="{top + 10}" font-size="13">{bar.value:.4f}</text>')
    return f'<g class="row" data-series={quoteattr(bar.series)}>' + "".join(parts) + "</g>"


def _describe(entries: list[dict[str, Any]], traits: bool, suite: dict[str, Any]) -> str:
    lines = []
    for entry in entries:
        figures = ", ".join(f"{b.label} {'no number' if b.value is None else f'{b.value:.4f}'}"
                            for b in entry_bars(entry, traits))
        lines.append(f"{entry.get('agent_label', '')} on {suite['key']} {suite['version']}: {figures}")
    return "; ".join(lines)
