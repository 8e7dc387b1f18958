"""Tokens and cost on every run (issue 28, item 2): a local OpenAI-compatible endpoint that reports
`usage`, driven through the real `openai` client by `assay run`; the results JSON shows tokens and
cost equal to the sum over the calls × the configured prices, and `--max-cost` stops in time."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_main
from tests.support.fake_openai import FakeOpenAI, tool_call

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "src" / "assay" / "suites" / "forge" / "second-host.yaml"
PRICE = {"prompt": 2.5, "completion": 10.0, "cached": 1.25}  # USD per million tokens


def _usage_for(request: dict[str, Any]) -> dict[str, Any]:
    """Distinct, deterministic counts per call: they grow with the conversation."""
    n = len(request["messages"])
    return {"prompt_tokens": 1000 + 37 * n, "completion_tokens": 50 + 11 * n, "total_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": 100 * n}}


def _agent(request: dict[str, Any]) -> dict[str, Any]:
    said = sum(1 for m in request["messages"] if m["role"] == "assistant")
    call = (tool_call("list_alerts", {}) if said == 0 else
            tool_call("finish", {"claimed_success": True, "summary": "looked, contained"}))
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": _usage_for(request)}


def _cost(usage: dict[str, Any]) -> float:
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    return ((usage["prompt_tokens"] - cached) * PRICE["prompt"] + cached * PRICE["cached"]
            + usage["completion_tokens"] * PRICE["completion"]) / 1e6


def assay(tmp_path: Path, *args: Any) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASSAY_"))}
    return run_main([str(a) for a in args], cwd=REPO, env=env)


def _run(tmp_path: Path, db: str, server: FakeOpenAI, *extra: Any) -> tuple[int, dict[str, Any], str]:
    code, out, err = assay(tmp_path, "run", CASE, "--agent", "openai:priced-model", "--base-url", server.base_url,
                           "--json", "--db", db, *extra)
    return code, json.loads(out) if out.strip() else {}, err


def test_results_json_shows_tokens_and_cost_summed_over_the_calls(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    code, out, err = assay(tmp_path, "config", "price", "priced-model", "--prompt", PRICE["prompt"],
                           "--completion", PRICE["completion"], "--cached", PRICE["cached"], "--db", db)
    assert code == 0, err
    assert json.loads(out)["price"]["prompt"] == PRICE["prompt"]
    with FakeOpenAI(_agent) as server:
        code, results, err = _run(tmp_path, db, server, "--trials", "2")
        served = [c["usage"] for c in server.completions]
    assert code == 0, err
    assert len(served) == 4  # two calls a run, two runs
    total = results["usage"]["total"]
    assert total["calls"] == 4
    assert total["prompt_tokens"] == sum(u["prompt_tokens"] for u in served)
    assert total["completion_tokens"] == sum(u["completion_tokens"] for u in served)
    assert total["cached_tokens"] == sum(u["prompt_tokens_details"]["cached_tokens"] for u in served)
    assert total["cost_usd"] == pytest.approx(sum(_cost(u) for u in served), abs=1e-9)
    assert results["usage"]["agent"]["cost_usd"] == total["cost_usd"]
    assert results["usage"]["judge"]["calls"] == 0 and results["usage"]["judge"]["cost_usd"] == 0
    assert results["usage"]["agent"]["self_reported"] is False
    assert results["usage"]["agent"]["models"] == ["priced-model"]
    assert results["usage"]["cost_per_run_usd"] == pytest.approx(total["cost_usd"] / 2, abs=1e-9)
    trials = results["cases"][0]["trials"]
    assert sum(t["usage"]["total"]["cost_usd"] for t in trials) == pytest.approx(total["cost_usd"], abs=1e-9)
    # the same figures read back by `assay results`
    code, again, err = assay(tmp_path, "results", results["batch_id"], "--json", "--db", db)
    assert code == 0, err
    assert json.loads(again)["usage"] == results["usage"]


def test_unpriced_usage_has_no_cost_and_says_why(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    with FakeOpenAI(_agent) as server:
        code, results, err = _run(tmp_path, db, server, "--trials", "1")
    assert code == 0, err
    total = results["usage"]["total"]
    assert total["prompt_tokens"] > 0 and total["cost_usd"] is None
    assert total["cost_reason"] == "no price for model priced-model"
    assert results["usage"]["cost_per_run_usd"] is None


def test_max_cost_stops_within_one_run_of_the_cap_and_resume_goes_on(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    assay(tmp_path, "config", "price", "priced-model", "--prompt", PRICE["prompt"],
          "--completion", PRICE["completion"], "--cached", PRICE["cached"], "--db", db)
    with FakeOpenAI(_agent) as server:
        one_run = _cost(_usage_for({"messages": [0] * 2})) + _cost(_usage_for({"messages": [0] * 4}))
        cap = 2.5 * one_run
        code, results, err = _run(tmp_path, db, server, "--trials", "6", "--max-cost", cap, "--workers", 1)
        assert code == 0, err
        assert "--max-cost" in err and "assay resume" in err, err
        spent = results["usage"]["total"]["cost_usd"]
        recorded = [t for t in results["cases"][0]["trials"] if t["recorded"]]
        assert 0 < len(recorded) < 6
        assert spent <= cap + one_run  # within one run's cost of the cap
        assert spent + one_run > cap  # and it did not stop early
        # the rest stay pending; a resume with a larger cap plays them
        code, out, err = assay(tmp_path, "resume", results["batch_id"], "--max-cost", 100, "--json", "--db", db)
        assert code == 0, err
        assert json.loads(out)["complete"] is True


def test_a_price_needs_both_rates_and_a_bad_one_stores_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    code, _, err = assay(tmp_path, "config", "price", "m", "--prompt", 1, "--db", db)
    assert code == 2 and "--completion" in err
    code, _, err = assay(tmp_path, "config", "price", "m", "--prompt", 1, "--completion", 1e9, "--db", db)
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, out, _ = assay(tmp_path, "config", "price", "m", "--db", db)
    assert code == 0 and json.loads(out)["history"] == []


# -- the board, the entry, the card, the page -----------------------------------------------------


def test_board_entry_card_and_page_show_tokens_and_cost(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from fastapi.testclient import TestClient

    from assay.store import open_store
    from assay.web.app import Settings, create_app
    from tests.board._support import mini_suite

    db = f"sqlite:///{tmp_path / 'assay.db'}"
    root = mini_suite(tmp_path / "mini", reps=1)

    def ok(*args: Any) -> str:
        code, out, err = assay(tmp_path, *args, "--db", db)
        assert code == 0, err
        return out

    ok("suite", "release", root)
    ok("account", "create", "alice", "--public-handle", "Alice")
    ok("config", "price", "priced-model", "--prompt", PRICE["prompt"], "--completion", PRICE["completion"],
       "--cached", PRICE["cached"])
    with FakeOpenAI(_agent) as server:
        owner = json.loads(ok("submit", "mini", "--agent", "openai:priced-model", "--base-url", server.base_url,
                              "--account", "alice", "--label", "priced", "--publish", "--json", "--quiet"))
        served = [c["usage"] for c in server.completions]
    expected = sum(_cost(u) for u in served)
    board = json.loads(ok("board", "mini", "--json"))
    (entry,) = board["entries"]
    # the board shows the total (tokens, calls, cost); the entry by its id the whole block, by role
    assert list(entry["usage"]) == ["total"]
    assert entry["usage"]["total"]["calls"] == len(served)
    assert entry["usage"]["total"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in served)
    assert entry["usage"]["total"]["cost_usd"] == pytest.approx(expected, abs=1e-9)
    assert entry["cost_per_run_usd"] == pytest.approx(expected / entry["n_runs"], abs=1e-9)
    # the entry, by its id, on the command line and through the API
    shown = ok("entry", owner["id"])
    assert f"${entry['cost_per_run_usd']:.6f}" in shown and "tokens agent" in shown
    whole = json.loads(ok("entry", owner["id"], "--json"))["entry"]["usage"]
    assert whole["agent"]["calls"] == len(served) and whole["judge"]["calls"] == 0
    assert whole["agent"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in served)
    assert whole["agent"]["models"] == ["priced-model"]
    assert {k: whole["total"][k] for k in entry["usage"]["total"]} == entry["usage"]["total"]
    # the card
    card = ok("card", "mini")
    assert "## Tokens and cost" in card and f"${entry['cost_per_run_usd']:.6f}" in card
    # the board page: the cost table and the score-against-cost chart, its one entry on the frontier
    store = open_store(db)
    try:
        with TestClient(create_app(Settings(db_url=None, secret=b"s" * 32), store=store)) as client:
            api = client.get(f"/api/entries/{owner['id']}").json()
            assert api["entry"]["cost_per_run_usd"] == entry["cost_per_run_usd"]
            assert api["entry"]["usage"] == whole
            listed = client.get("/api/leaderboard/mini").json()["entries"]
            assert [e["usage"] for e in listed] == [entry["usage"]]
            page = client.get("/suites/mini").text
    finally:
        store.close()
    assert "Tokens and cost on" in page and f"${entry['cost_per_run_usd']:.6f}" in page
    svg = page[page.index('<svg xmlns="http://www.w3.org/2000/svg" class="cost-chart"'):]
    svg = svg[: svg.index("</svg>") + len("</svg>")]
    tree = ET.fromstring(svg)
    points = [g for g in tree.iter("{http://www.w3.org/2000/svg}g") if "point" in (g.get("class") or "")]
    assert len(points) == 1 and points[0].get("data-front") == "true"
    assert float(points[0].get("data-cost") or 0) == pytest.approx(entry["cost_per_run_usd"], rel=1e-6)


@pytest.mark.heavy  # a python: agent plays in its sandbox (a process)
def test_an_agent_may_report_its_own_usage_which_is_validated_and_marked_self_reported(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    assay(tmp_path, "config", "price", "own-model", "--prompt", 1, "--completion", 2, "--db", db)
    code, out, err = assay(tmp_path, "run", CASE, "--agent", "python:tests/fixtures/agents/reports_usage.py:agent",
                           "--trials", 1, "--json", "--db", db)
    assert code == 0, err
    usage = json.loads(out)["usage"]
    agent = usage["agent"]
    # the refused report (negative tokens) counts nothing; the others count, marked self-reported
    assert (agent["prompt_tokens"], agent["completion_tokens"], agent["cached_tokens"], agent["calls"]) == (
        810, 105, 100, 4)
    assert agent["self_reported"] is True and agent["models"] == ["helper-model", "own-model"]
    assert agent["cost_usd"] is None and agent["cost_reason"] == "no price for model helper-model"
    code, out, err = assay(tmp_path, "debrief", json.loads(out)["cases"][0]["trials"][0]["run_id"], "--json",
                           "--db", db)
    assert code == 0, err
    assert "usage_refused" in out and "prompt_tokens must be an integer" in out
