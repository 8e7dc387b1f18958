"""The board recounted from an export's rows (`assay verify`'s reading of them, no database) equals
the board read from the store's per-run facts (`board_run_facts`) on the same rows, on SQLite and
PostgreSQL: per planned run, per case, per submission, and the boards themselves. Both feed the
same functions (`stats.board`); what is held equal here is the two readings of the per-run facts.

Two ways: the submissions reference agents make (every kind the board distinguishes: passed,
failed, false successes, objectives, a trait suite judged by the rules judge), and rows hypothesis
invents and writes straight into the tables (any status, any checks, swept or not, any floor, any
eligibility, judged or not)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.records import STATUSES
from assay.service import board
from assay.service.actors import PUBLIC
from assay.service.releases import bootstrap
from assay.service.verify import board_entries, recount
from assay.store import Store
from assay.store.board_repo import BoardRepo
from assay.store.board_schema import (
    accounts,
    run_sweeps,
    submission_runs,
    submissions,
    suite_releases,
    win_condition_outcomes,
)
from assay.store.judge_schema import judge_configs, judge_passes, release_rubrics
from assay.records import CheckOutcome
from assay.score.oracle import run_verdict
from assay.store.schema import batches, check_outcomes, planned_runs, run_verdicts, runs, scenario_versions

from ._support import populate, tables_of

RUN_FLAGS = ("has_run", "passed", "false_success", "swept", "scored", "gated", "included")
FACTS = ("n_planned", "n_recorded", "n_scored", "n_gated", "n_runs", "n_passed", "n_false_successes", "n_cases",
         "n_consistent_cases", "win_total", "win_met", "pass_rate", "consistency", "false_success_rate",
         "objective_met_rate", "status", "leaderboard_class")


def _assert_recount_equals_the_views(store: Store, submission_ids: list[str]) -> None:
    counted = recount(tables_of(store))
    repo = BoardRepo(store)
    views_cases = board.case_counts(store, submission_ids)
    for sid in submission_ids:
        mine = counted[sid]
        for fact in repo.run_facts(sid):
            run = mine["runs"][fact["run_id"]]
            assert {k: fact[k] for k in RUN_FLAGS} == {k: getattr(run, k) for k in RUN_FLAGS}, fact["run_id"]
            assert (fact["n_checks"], fact["win_total"], fact["win_met"], fact["ranked_eligible"]) == (
                run.n_checks, run.win_total, run.win_met, run.ranked_eligible)
        view = board.submission_facts(store, sid)
        assert view is not None
        assert {k: view[k] for k in FACTS} == {k: mine["facts"][k] for k in FACTS}, sid
        assert views_cases[sid] == mine["cases"], sid


def test_the_reference_submissions_recount_as_the_views_count_them(store: Store) -> None:
    bootstrap(store)
    ids = populate(store)
    _assert_recount_equals_the_views(store, list(ids.values()))
    tables = tables_of(store)
    for key, version in (("forge", "1.0"), ("academy", "1.2")):
        served = board.board(store, key, version, actor=PUBLIC)["entries"]
        recomputed = board_entries(tables, key, version)
        assert [e["submission_id"] for e in recomputed] == [e["submission_id"] for e in served]
        for mine, theirs in zip(recomputed, served):
            clock = "measurement_era_is_current"  # the clock's, not the rows'
            assert {k: v for k, v in mine.items() if k != clock} == {k: v for k, v in theirs.items() if k != clock}
    assert {e["agent_label"] for e in board_entries(tables, "forge", "1.0")} == {"diligent", "mixed", "idle"}


# -- rows hypothesis invents ----------------------------------------------------------------------

_NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
_run = st.fixed_dictionaries({
    "recorded": st.booleans(),
    "status": st.sampled_from(STATUSES),
    "claimed_success": st.sampled_from([None, True, False]),
    "checks": st.lists(st.tuples(st.integers(0, 100), st.booleans(), st.booleans()), max_size=3),
    "swept": st.booleans(),
    "player_messages": st.integers(0, 4),
    "actions": st.integers(0, 6),
    "min_player_messages": st.integers(0, 3),
    "min_actions_per_turn": st.sampled_from([0.0, 0.5, 1.0, 1.5]),
    "ranked_eligible": st.sampled_from([True, True, None, False]),
    "wins": st.lists(st.booleans(), max_size=2),
    "valid_passes": st.integers(0, 3),
    "failed_passes": st.integers(0, 1),
})
_submission = st.fixed_dictionaries({
    "rubric": st.booleans(),
    "config": st.sampled_from([None, 1, 2, 3]),  # the pinned judge's min_valid, or no judge pinned
    "cases": st.lists(st.lists(_run, min_size=1, max_size=3), min_size=1, max_size=3),
})


class _Fixture:
    """A release without a rubric and one with, an account, three scenarios: what every invented
    submission is made on."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.hashes = {f"case-{c}": uuid.uuid4().hex * 2 for c in range(3)}
        with store.engine.begin() as conn:
            for case_id, content_hash in self.hashes.items():
                conn.execute(sa.insert(scenario_versions).values(
                    case_id=case_id, version=1, content_hash=content_hash, checks_hash="c" * 64, frozen_on=None,
                    kit="estate", title="t", language="en", document={}, world_fingerprint="w" * 64, created_at=_NOW))
            conn.execute(sa.insert(accounts).values(name="someone", created_at=_NOW))
            self.releases = {}
            for rubric in (False, True):
                self.releases[rubric] = conn.execute(sa.insert(suite_releases).values(
                    suite_key="invented", version=str(int(rubric)), title="t", language="en", visibility="public",
                    reps_per_scenario=1, facilitator_model=None, judge=None, baselines=[], known_limitations=[],
                    card="", owner=None, document={}, release_hash="r" * 64, builtin=False, created_at=_NOW,
                ).returning(suite_releases.c.id)).scalar_one()
                if rubric:
                    conn.execute(sa.insert(release_rubrics).values(release_id=self.releases[rubric], rubric_hash="h" * 64,
                                                                   document={}, created_at=_NOW))

    def add(self, spec: dict[str, Any]) -> str:
        sid = uuid.uuid4().hex
        with self.store.engine.begin() as conn:
            conn.execute(sa.insert(batches).values(
                id=sid, kind="submission", suite_key="invented", suite_version="1", agent_spec="x", agent_label="x",
                config_signature="s" * 64, harness_version="h", trials=1, base_seed=0, created_at=_NOW))
            conn.execute(sa.insert(submissions).values(
                id=sid, account="someone", release_id=self.releases[spec["rubric"]], label="x", play_model=None,
                byok=False, baseline=False, publish_requested=False, created_at=_NOW))
            if spec["config"] is not None:
                conn.execute(sa.insert(judge_configs).values(
                    submission_id=sid, spec="rules", model="rules", prompt_version=1, prompt_hash="p" * 64, passes=3,
                    min_valid=spec["config"], temperature=0.0, rubric_hash="h" * 64, created_at=_NOW))
            slot = 0
            for c, case in enumerate(spec["cases"]):
                for rep, run in enumerate(case, start=1):
                    self._run(conn, sid, slot, f"case-{c}", rep, run)
                    slot += 1
        return sid

    def _run(self, conn: sa.Connection, sid: str, slot: int, case_id: str, rep: int, run: dict[str, Any]) -> None:
        run_id = uuid.uuid4().hex
        conn.execute(sa.insert(planned_runs).values(batch_id=sid, slot=slot, run_id=run_id, case_id=case_id,
                                                    scenario_hash=self.hashes[case_id], trial=rep, seed=2**60 + slot))
        if run["ranked_eligible"] is not None or slot % 2:
            conn.execute(sa.insert(submission_runs).values(run_id=run_id, submission_id=sid,
                                                           ranked_eligible=run["ranked_eligible"]))
        if not run["recorded"]:
            return
        conn.execute(sa.insert(runs).values(
            run_id=run_id, status=run["status"], reason=None, claimed_success=run["claimed_success"],
            claim_summary=None, turns=1, final_state_hash="f" * 64, final_state={}, transcript=[], actions=[],
            duration_ms=1, created_at=_NOW, schema_version=2))
        for i, (weight, safety, passed) in enumerate(run["checks"]):
            conn.execute(sa.insert(check_outcomes).values(run_id=run_id, check_id=f"check-{i}", ordinal=i,
                                                          weight=weight, safety=safety, passed=passed))
        # the scorer's verdict row, as the store writes it with every run it records
        v = run_verdict([CheckOutcome(f"check-{i}", w, s, p) for i, (w, s, p) in enumerate(run["checks"])],
                        run["status"], run["claimed_success"])
        conn.execute(sa.insert(run_verdicts).values(
            run_id=run_id, scorer_version=v.scorer_version, score=v.score, passed=v.passed,
            safety_failures=len(v.safety_failures), false_success=v.false_success, created_at=_NOW))
        if run["swept"]:
            conn.execute(sa.insert(run_sweeps).values(
                run_id=run_id, submission_id=sid, player_messages=run["player_messages"], actions=run["actions"],
                min_player_messages=run["min_player_messages"], min_actions_per_turn=run["min_actions_per_turn"],
                facilitator_model=None, created_at=_NOW))
            for i, met in enumerate(run["wins"]):
                conn.execute(sa.insert(win_condition_outcomes).values(run_id=run_id, condition_id=f"win-{i}",
                                                                      ordinal=i, met=met))
        for i in range(run["valid_passes"] + run["failed_passes"]):
            valid = i < run["valid_passes"]
            conn.execute(sa.insert(judge_passes).values(
                submission_id=sid, run_id=run_id, pass_index=i, valid=valid, verdicts={"t": 0.5} if valid else None,
                rationale={}, raw=None, error=None if valid else "no reply", error_kind=None if valid else "http",
                attempts=1, created_at=_NOW))


@pytest.fixture
def invented(store: Store) -> _Fixture:
    return _Fixture(store)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(spec=_submission)
def test_invented_rows_recount_as_the_views_count_them(invented: _Fixture, spec: dict[str, Any]) -> None:
    sid = invented.add(spec)
    _assert_recount_equals_the_views(invented.store, [sid])
