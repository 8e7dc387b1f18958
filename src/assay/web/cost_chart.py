"""The board's cost chart: each entry's score against its cost per run, one SVG drawn on the server,
with the Pareto frontier (the entries no other entry beats on both: cheaper and as good, or as
cheap and better) marked and joined.

In the style of `web.chart`: geometry only, every figure read off the entries (`cost_per_run_usd`,
stored with the board's figures; the score is the `composite` of a trait suite, else the
`pass_rate`); an entry without a cost (unpriced usage) or without a score is not drawn, and the
description says so. Well-formed XML, scales to its container, with a `<title>` and `<desc>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from assay.stats.cost import pareto_front
from assay.web.chart import CAPABILITY, COMPOSITE, GRID, has_traits

WIDTH = 360
HEIGHT = 240
LEFT = 40
RIGHT = 12
TOP = 14
BOTTOM = 40
FRONT = "#b5562f"


def _score_key(entries: list[dict[str, Any]]) -> str:
    return "composite" if has_traits(entries) else "pass_rate"


def cost_points(board: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(the score's name, the drawable entries as {label, submission_id, cost, score, front}, the
    entries left out with why)."""
    entries: list[dict[str, Any]] = list(board.get("entries") or [])
    key = _score_key(entries)
    points: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for e in entries:
        cost, score = e.get("cost_per_run_usd"), e.get(key)
        if cost is None or score is None:
            usage = e.get("usage") or {}
            reason = ((usage.get("total") or {}).get("cost_reason") or "no usage recorded") if cost is None \
                else f"no {key}"
            left_out.append({"label": str(e.get("agent_label", "")), "reason": reason})
            continue
        points.append({"label": str(e.get("agent_label", "")), "submission_id": str(e.get("submission_id", "")),
                       "cost": float(cost), "score": float(score), "front": False})
    for i in pareto_front([(float(p["cost"]), float(p["score"])) for p in points]):
        points[i]["front"] = True
    return key, points, left_out


def any_usage(board: Mapping[str, Any]) -> bool:
    """Whether any entry of the board recorded a model call (else there is no cost to show)."""
    return any(((e.get("usage") or {}).get("total") or {}).get("calls") for e in board.get("entries") or [])


def cost_chart(board: Mapping[str, Any]) -> str | None:
    """The SVG, or None when no entry has both a cost and a score, or no entry called a model."""
    key, points, left_out = cost_points(board)
    if not points or not any_usage(board):
        return None
    suite = board["suite"]
    top_cost = max(p["cost"] for p in points) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(cost: float) -> float:
        return round(LEFT + plot_w * cost / top_cost, 2)

    def y(score: float) -> float:
        return round(TOP + plot_h * (1 - score), 2)

    parts = ['<g class="axis" font-size="10" fill="#555">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" y1="{y(tick)}" x2="{WIDTH - RIGHT}" y2="{y(tick)}" stroke="{GRID}"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y(tick) + 3}" text-anchor="end">{tick:g}</text>')
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{x(top_cost * tick)}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">'
                     f'${top_cost * tick:.4g}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">cost per run (USD)</text>')
    parts.append(f'<text x="10" y="{TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 10 {TOP + plot_h / 2})">{escape(key)}</text></g>')
    front = sorted((p for p in points if p["front"]), key=lambda p: p["cost"])
    if len(front) > 1:
        path = " ".join(f"{x(p['cost'])},{y(p['score'])}" for p in front)
        parts.append(f'<polyline class="pareto-frontier" points="{path}" fill="none" stroke="{FRONT}" '
                     f'stroke-width="1.5" stroke-dasharray="4 3"/>')
    for p in points:
        colour = FRONT if p["front"] else CAPABILITY
        parts.append(
            f'<g class="point{" pareto" if p["front"] else ""}" data-submission={quoteattr(p["submission_id"])} '
            f'data-cost="{p["cost"]:.10g}" data-score="{p["score"]:.4f}" data-front="{str(p["front"]).lower()}">'
            f'<title>{escape(p["label"])}: {escape(key)} {p["score"]:.4f} at ${p["cost"]:.6g} a run'
            f'{" (Pareto frontier)" if p["front"] else ""}</title>'
            f'<circle cx="{x(p["cost"])}" cy="{y(p["score"])}" r="4" fill="{colour}" stroke="{COMPOSITE}"/></g>')
    words = [f"{p['label']}: {key} {p['score']:.4f} at ${p['cost']:.6g} a run"
             + (" (on the Pareto frontier)" if p["front"] else "") for p in points]
    words += [f"{o['label']}: not drawn ({o['reason']})" for o in left_out]
    title = f"{suite['key']} {suite['version']}: {key} against cost per run, Pareto frontier marked"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="cost-chart" role="img" '
        f'aria-labelledby="cost-title cost-desc" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'preserveAspectRatio="xMinYMin meet" font-family="system-ui, sans-serif">'
        f'<title id="cost-title">{escape(title)}</title><desc id="cost-desc">{escape("; ".join(words))}</desc>'
        + "".join(parts) + "</svg>"
    )


def cost_rows(board: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The board's cost table: per entry, tokens and cost by role and the cost per run (None: no
    number); empty when no entry called a model."""
    rows: list[dict[str, Any]] = []
    if not any_usage(board):
        return rows
    for e in board.get("entries") or []:
        usage = e.get("usage")
        if not usage:
            continue
        rows.append({"label": str(e.get("agent_label", "")), "submission_id": str(e.get("submission_id", "")),
                     "agent": usage["agent"], "judge": usage["judge"], "total": usage["total"],
                     "cost_per_run_usd": e.get("cost_per_run_usd")})
    return rows
