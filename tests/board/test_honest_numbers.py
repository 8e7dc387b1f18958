"""Honest numbers on the oracle board, through the real `assay` console script (issue 12, items 1–3).

On forge (5 cases × 3 reps), for a diligent, a mixed and two idle submissions:

- every entry's `…_ci` equals the rule recomputed here from the owner's runs (docs/statistics.md):
  per case (numerator, denominator), failures counting as 0; the figure p = Σnum/Σden; the
  score interval {π : (p − π)² ≤ c² π(1 − π) / n_eff} with c = t(0.975, K − 1) and the Kish
  n_eff = (Σden)²/Σden² — so 15/15 on 5 cases reads [0.3934, 1] and 0/15 [0, 0.6066];
- `rank` is 1 + the ranked entries whose pass_rate interval lies wholly above: on five cases none does;
- `assay compare` gives the mean per-case difference and the exact sign-flip p (0.0625 for
  diligent against idle: the smallest p five cases allow, which the output says cannot reach 0.05);
- an unknown submission, an unknown metric and two suite versions are one-line refusals.

The reference arithmetic below is written out from the formulas, not taken from `assay.stats`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from math import sqrt
from pathlib import Path
from typing import Any

import pytest

from ._support import AGENTS, mini_suite, recounted_ranks
from .test_cli_board import Cli

MIXED = f"python:{AGENTS.parent / 'mixed.py'}:Mixed"
T_975_4 = 2.7764451051977987  # Student t, 0.975 quantile, 4 degrees of freedom
Z = 1.959963984540054


def _score(p: float, n: float, c: float) -> tuple[float, float]:
    denom = 1 + c * c / n
    centre = (p + c * c / (2 * n)) / denom
    half = c / denom * sqrt(p * (1 - p) / n + c * c / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def expected_ci(parts: list[tuple[float, float]]) -> list[float]:
    assert len(parts) == 5, "the t quantile above is for 5 cases"
    total = sum(d for _, d in parts)
    p = sum(n for n, _ in parts) / total
    n_eff = total * total / sum(d * d for _, d in parts)
    lo, hi = _score(p, n_eff, T_975_4)
    return [round(lo, 4), round(hi, 4)]


def per_case(view: dict[str, Any], value: Any) -> list[float]:
    """Per-case means of `value(run)` over the owner's runs of a submission, in case order."""
    return [n / d for n, d in parts(view, value)]


def parts(view: dict[str, Any], value: Any, weight: Any = lambda run: 1) -> list[tuple[float, float]]:
    """Per case, in case order: (Σ value(run), Σ weight(run)) over the owner's runs of a submission."""
    cases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for run in view["runs"]:
        cases[run["scenario"]][0] += float(value(run))
        cases[run["scenario"]][1] += float(weight(run))
    return [(n, d) for n, d in cases.values()]


@pytest.fixture
def cli(db_url: str, tmp_path: Path, templates: Any) -> Cli:
    templates.copy_into(db_url, "bootstrapped")  # as the first command would leave it
    return Cli(db_url, tmp_path)


def _submit(cli: Cli, agent: str, account: str, label: str, key: str = "forge") -> dict[str, Any]:
    out = cli.cwd / f"{label}.json"
    cli("submit", key, "--agent", agent, "--account", account, "--label", label, "--publish", "--output", str(out))
    return json.loads(out.read_text(encoding="utf-8"))


def test_forge_intervals_statistical_ranks_and_paired_comparison(cli: Cli, tmp_path: Path) -> None:
    for name in ("alice", "bob", "carol", "dave"):
        cli("account", "create", name, "--public-handle", name.title())
    views = {
        "diligent": _submit(cli, "reference:diligent", "alice", "diligent"),
        "mixed": _submit(cli, MIXED, "bob", "mixed"),
        "idle-1": _submit(cli, "reference:idle", "carol", "idle-1"),
        "idle-2": _submit(cli, "reference:idle", "dave", "idle-2"),
    }
    assert per_case(views["mixed"], lambda r: r["passed"]) == [1.0, 0.0, 0.0, 1.0, 1.0]

    board = cli("board", "forge", "--json").json()
    shown = {e["agent_label"]: e for e in board["entries"]}
    assert set(shown) == set(views)
    for label, entry in shown.items():
        view = views[label]
        assert (entry["n_cases"], entry["n_runs"]) == (5, 15)
        assert entry["pass_rate_ci"] == expected_ci(parts(view, lambda r: r["passed"])), label
        assert entry["false_success_rate_ci"] == expected_ci(parts(view, lambda r: r["false_success"])), label
        assert entry["objective_met_rate_ci"] == expected_ci(
            parts(view, lambda r: r["win_conditions_met"], lambda r: r["win_conditions_total"])), label
        assert entry["consistency_ci"] == expected_ci([(1.0, 1.0)] * 5), label  # every case agrees with itself
        for rate in ("pass_rate", "false_success_rate", "objective_met_rate", "consistency"):
            lo, hi = entry[f"{rate}_ci"]
            assert 0.0 <= lo <= entry[rate] <= hi <= 1.0
    assert shown["diligent"]["pass_rate_ci"] == [0.3934, 1.0]  # 15/15 on 5 cases, not [1, 1]
    assert shown["idle-1"]["pass_rate_ci"] == [0.0, 0.6066]

    # Ranks: only what the intervals separate. On five cases even 15/15 (lower bound 0.3934) and
    # 0/15 (upper bound 0.6066) overlap: five cases cannot rank these agents apart at 95%, and the
    # board says so by giving every entry rank 1 (docs/statistics.md; forge needs more cases).
    assert [e["rank"] for e in board["entries"]] == recounted_ranks(board["entries"])
    assert {label: e["rank"] for label, e in shown.items()} == {"diligent": 1, "mixed": 1, "idle-1": 1, "idle-2": 1}
    assert [e["agent_label"] for e in board["entries"]][:2] == ["diligent", "mixed"]  # by point estimate
    assert "wholly above" in board["ranking"] and "interval" in board["ranking"]

    table = cli("board", "forge").stdout
    assert "0.3934" in table and "0.6066" in table and "95% interval" in table

    # A paired comparison, by unique id prefixes.
    dil, idle, mixed = views["diligent"]["id"], views["idle-1"]["id"], views["mixed"]["id"]
    found = cli("compare", dil[:10], idle[:10], "--json").json()
    assert (found["a"]["submission_id"], found["b"]["submission_id"]) == (dil, idle)
    assert (found["metric"], found["difference"], found["p_value"], found["n_cases"], found["min_p"]) == (
        "pass_rate", 1.0, 0.0625, 5, 0.0625)
    assert found["ci"] is None  # every case differs by exactly 1: no spread to build an interval on
    assert found["too_few_cases"] is True and "0.05" in found["note"] and "5 cases" in found["note"]
    assert [c["difference"] for c in found["cases"]] == [1.0] * 5

    reverse = cli("compare", idle, dil, "--json").json()
    assert (reverse["difference"], reverse["p_value"]) == (-1.0, 0.0625)

    # mixed − idle: d = 1, 0, 0, 1, 1; |sum| ≥ 3 needs the three 1s to share a sign: 2 × 4 of 32.
    mixed_idle = cli("compare", mixed, idle, "--json").json()
    assert (mixed_idle["difference"], mixed_idle["p_value"]) == (0.6, 0.25)
    half = T_975_4 * sqrt(0.3) / sqrt(5)
    assert mixed_idle["ci"] == [round(0.6 - half, 4), round(0.6 + half, 4)]

    same = cli("compare", views["idle-1"]["id"], views["idle-2"]["id"], "--json").json()
    assert (same["difference"], same["p_value"], same["ci"]) == (0.0, 1.0, None)

    fsr = cli("compare", dil, idle, "--metric", "false_success_rate", "--json").json()
    assert (fsr["metric"], fsr["difference"], fsr["p_value"]) == ("false_success_rate", 0.0, 1.0)

    text = cli("compare", dil, idle).stdout
    assert "+1.0000" in text and "p = 0.0625" in text and "no difference can reach p < 0.05" in text

    # Refusals: one line, exit 2.
    assert "no such submission" in cli.refused("compare", "f" * 32, idle)
    assert "--metric: unknown metric 'speed'" in cli.refused("compare", dil, idle, "--metric", "speed")
    cli("suite", "release", str(mini_suite(tmp_path / "mini")))
    other = _submit(cli, "reference:idle", "alice", "mini-idle", key="mini")
    message = cli.refused("compare", dil, other["id"])
    assert "different suite versions" in message and "forge 1.0" in message and "mini 1.0" in message
