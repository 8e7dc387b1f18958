"""One rule, one place (issue 8, item 5): the scorer writes a verdict row with every run it records,
the board and the results JSON only read and sum those rows, over one denominator — the planned
runs minus the participation-gated ones — and a store upgraded to verdict rows shows the numbers it
showed before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command

from assay.score.oracle import SCORER_VERSION, run_verdict
from assay.service import board as boards
from assay.service import platform_config, results, submissions
from assay.service.actors import OPERATOR
from assay.service.board import board, round_rate
from assay.store import Store
from assay.store import db as store_db
from assay.store.rows import StoredVerdict
from assay.store.views import board_0002, board_0011, board_0013
from assay.store.runs_repo import RunsRepo

from ._support import flaky, submit

WAVERING = f"python:{Path(__file__).resolve().parent / 'agents' / 'wavering.py'}:Wavering"
#: The figures the results JSON and the board share: (results JSON summary key, board key).
SHARED = (("pass_rate", "pass_rate"), ("consistency", "consistency"),
          ("false_success_rate", "false_success_rate"), ("trials", "n_runs"), ("cases", "n_cases"))


def _verdicts(store: Store) -> dict[str, dict[str, Any]]:
    with store.engine.connect() as conn:
        return {r.run_id: dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM run_verdicts"))}


FACTS = ("n_planned", "n_recorded", "n_scored", "n_gated", "n_runs", "n_passed", "n_false_successes", "n_cases",
         "n_consistent_cases", "win_total", "win_met", "pass_rate", "consistency", "false_success_rate",
         "objective_met_rate", "status", "leaderboard_class")


def _figures(store: Store) -> dict[str, dict[str, Any]]:
    """Every submission's figures as the board computes them now (`stats.board`, over the run facts)."""
    with store.engine.connect() as conn:
        ids = list(conn.execute(sa.text("SELECT id FROM submissions ORDER BY id")).scalars())
    return {sid: {k: boards.submission_facts(store, sid)[k] for k in FACTS} for sid in ids}


def _figures_0012(store: Store) -> dict[str, dict[str, Any]]:
    """Every submission's figures as the views of a store at 0012 computed them (the rule in SQL)."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM board_submission_facts ORDER BY submission_id")).mappings().all()
    return {r["submission_id"]: {k: r[k] for k in FACTS} for r in rows}


def _shared(summary: dict[str, Any]) -> dict[str, Any]:
    return {board_key: round_rate(summary[key]) if "rate" in key or key == "consistency" else summary[key]
            for key, board_key in SHARED}


def test_generation_0013_reads_the_verdicts_and_decides_nothing() -> None:
    before, after = dict(board_0011.VIEWS), dict(board_0013.VIEWS)
    assert list(before) == list(after)
    assert sorted(name for name in before if before[name] != after[name]) == ["board_run_facts"]
    facts = after["board_run_facts"]
    assert "LEFT JOIN run_verdicts v" in facts and board_0002._PASSED not in facts
    assert "co.weight" not in facts and "75" not in facts


def test_every_recorded_run_is_stored_with_the_oracles_verdict(mini: Store) -> None:
    sid = submit(mini, agent=WAVERING)
    verdicts = _verdicts(mini)
    stored = RunsRepo(mini).runs_for_batch(sid)
    assert len(stored) == 4 and {r.run_id for r in stored} <= set(verdicts)
    for run in stored:
        assert run.status is not None
        v = run_verdict(run.checks, run.status, run.claimed_success)
        row = verdicts[run.run_id]
        assert row["scorer_version"] == SCORER_VERSION == v.scorer_version
        assert (row["score"], bool(row["passed"]), row["safety_failures"], bool(row["false_success"])) == (
            v.score, v.passed, len(v.safety_failures), v.false_success)
        assert run.verdict == StoredVerdict(SCORER_VERSION, v.score, v.passed, len(v.safety_failures), v.false_success)
    assert {bool(v["passed"]) for v in verdicts.values()} == {True, False}


def test_results_json_and_board_agree_on_a_mixed_agent(store: Store) -> None:
    """The done-when of issue 8, item 5: a mixed agent on forge — passes, failures, false
    successes, cases whose trials disagree — has the same figures in its results JSON, its owner
    view and its board entry."""
    from assay.service import accounts
    from assay.service.releases import bootstrap

    bootstrap(store)
    accounts.create(store, "bob", "Bob", actor=OPERATOR)
    sid = submissions.submit(store, "forge", factory=_load(WAVERING), account="bob", label="wavering",
                             publish=True, workers=2, actor=OPERATOR)
    summary = results.results_json(store, sid, actor=OPERATOR)["summary"]
    entry = next(e for e in board(store, "forge", actor=OPERATOR)["entries"] if e["submission_id"] == sid)
    owner = submissions.results(store, sid, actor=OPERATOR)
    assert 0 < summary["pass_rate"] < 1 and summary["false_success_rate"] > 0 and summary["consistency"] < 1
    assert summary["trials"] == owner["n_planned"] == 15  # complete: nothing gated, missing or unscored
    mine = _shared(summary)
    assert mine == {k: entry[k] for _, k in SHARED}
    assert {k: v for k, v in mine.items() if k != "n_cases"} == {k: owner[k] for _, k in SHARED if k != "n_cases"}
    # run by run: the owner view's verdicts are the results JSON's
    trials = {t["run_id"]: t for case in results.results_json(store, sid, actor=OPERATOR)["cases"]
              for t in case["trials"]}
    for run in owner["runs"]:
        t = trials[run["run_id"]]
        assert (run["score"], run["passed"], run["false_success"]) == (t["score"], t["passed"], t["false_success"])


def test_a_gated_run_leaves_the_results_json_as_it_leaves_the_board(mini: Store) -> None:
    """The denominator is the same sentence on both sides: planned runs minus participation-gated ones."""
    platform_config.set_value(mini, "academy_eval_participation",
                              {"min_player_messages": 2, "min_actions_per_turn": 0}, actor=OPERATOR)
    sid = submit(mini, agent=WAVERING)
    owner = submissions.results(mini, sid, actor=OPERATOR)
    assert owner["n_gated"] >= 1 and owner["status"] == "incomplete"
    summary = results.results_json(mini, sid, actor=OPERATOR)["summary"]
    assert summary["trials"] == owner["n_planned"] - owner["n_gated"] == owner["n_runs"]
    for key, board_key in SHARED:
        if board_key == "n_cases":
            continue  # the owner view has no n_cases; the board's facts do
        expected = round_rate(summary[key]) if board_key != "n_runs" else summary[key]
        assert owner[board_key] == (expected if summary["trials"] else None), key
    assert summary["cases"] == boards.submission_facts(mini, sid)["n_cases"]


def test_a_crash_stays_in_both_denominators(mini: Store) -> None:
    sid = submit(mini, agent=flaky("CrashOnce"))
    owner = submissions.results(mini, sid, actor=OPERATOR)
    summary = results.results_json(mini, sid, actor=OPERATOR)["summary"]
    assert [r["status"] for r in owner["runs"]].count("crashed") == 1  # each load runs the file afresh
    assert summary["trials"] == owner["n_runs"] == 4
    assert round_rate(summary["pass_rate"]) == owner["pass_rate"]


def test_an_upgraded_store_shows_the_numbers_it_showed_before(mini: Store) -> None:
    """A store at 0012 (no verdict rows; the views decide the rule) upgraded to 0013: every verdict
    row is backfilled from the stored check outcomes, stamped oracle/1, and every figure is the same."""
    platform_config.set_value(mini, "academy_eval_participation",
                              {"min_player_messages": 2, "min_actions_per_turn": 0}, actor=OPERATOR)
    submit(mini, agent=WAVERING)
    submit(mini, agent="reference:hasty")
    submit(mini, agent="reference:overclaimer")
    written = _verdicts(mini)
    figures = _figures(mini)
    with mini.engine.connect().execution_options(assay_write=True) as conn, conn.begin():
        command.downgrade(store_db._alembic_config(conn), "0012")
    assert "run_verdicts" not in sa.inspect(mini.engine).get_table_names()
    # 0011's views, deciding the rule themselves, gave what the verdict rows give
    assert _figures_0012(mini) == figures
    assert store_db.migrate(mini.engine) is True
    assert _figures(mini) == figures
    backfilled = _verdicts(mini)
    assert set(backfilled) == set(written) and len(written) == 12
    def strip(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {k: {c: (int(v) if isinstance(v, bool) else v) for c, v in r.items() if c != "created_at"}
                for k, r in rows.items()}

    assert strip(backfilled) == strip(written)
    assert {r["scorer_version"] for r in backfilled.values()} == {"oracle/1"}


def _load(spec: str) -> Any:
    from assay.agents.loader import load_agent

    return load_agent(spec)
