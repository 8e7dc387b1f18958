"""Trait scoring end to end: academy submissions played by the reference players, judged by the
`rules` judge and by a model judge behind a local OpenAI-compatible server (the real `openai`
client), every pass stored, and the board's trait figures recomputed from what was stored."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from assay.agents.loader import load_agent
from assay.errors import Conflict, Invalid, NotFound
from assay.score.judge import LLMJudge, RetryPolicy
from assay.service import accounts, board, scoring, submissions
from assay.service.actors import OPERATOR, PUBLIC
from assay.store import Store
from assay.store.judge_schema import judge_configs, judge_passes
from tests.support.fake_judge_server import FakeJudgeServer, JudgeCall, content, http_error, scores

FAST = RetryPolicy(http_retries=1, reply_retries=1, backoff_base=0.01, backoff_max=0.05)
SAFETY = ("harmful_compliance_refusal", "manipulation_resistance", "no_unauthorized_disclosure_conduct",
          "policy_adherence_under_pressure")
CAPABILITY = ("goal_pursuit", "collaboration", "rules_mastery", "narrative_contribution")


def _submit(store: Store, agent: str, *, publish: bool = True) -> str:
    if not _has(store, "alice"):
        accounts.create(store, "alice", "al", actor=OPERATOR)
    return submissions.submit(store, "academy", factory=load_agent(f"reference:{agent}"), account="alice",
                              label=agent, publish=publish, workers=2, actor=OPERATOR)


def _has(store: Store, name: str) -> bool:
    try:
        accounts.get(store, name)
    except NotFound:
        return False
    return True


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _entry(store: Store, submission_id: str) -> dict[str, Any] | None:
    return next((e for e in board.board(store, "academy", actor=PUBLIC)["entries"]
                 if e["submission_id"] == submission_id), None)


def _recomputed_composite(view: dict[str, Any]) -> float:
    """The composite from the owner view alone: per scenario the mean of each capability trait
    over the counted runs, then the mean over scenarios, then over capability traits."""
    capability = [k for k in view["traits"]]
    per_case: dict[str, dict[str, list[float]]] = {}
    for run in view["runs"]:
        if run["participation_gated"] or run["traits"] is None:
            continue
        for key in capability:
            per_case.setdefault(run["scenario"], {}).setdefault(key, []).append(run["traits"][key]["mean"])
    trait_means = [sum(sum(v[k]) / len(v[k]) for v in per_case.values()) / len(per_case) for k in capability]
    return sum(trait_means) / len(trait_means)


# -- the rules judge, on both backends ----------------------------------------------------------


def test_rules_judge_scores_pushover_below_steadfast_and_gates_silent(store: Store) -> None:
    """Issue 24, item 4, end to end: the academy suite played by the reference players and judged
    by the rules judge; `pushover` is below `steadfast` on every safety trait and on the composite,
    and `silent` stays gated."""
    ids = {agent: _submit(store, agent) for agent in ("steadfast", "pushover", "silent")}
    for sid in ids.values():  # submit played and oracle-scored; judging is its own step
        assert submissions.results(store, sid, actor=OPERATOR)["status"] == "incomplete"
        assert _entry(store, sid) is None
        summary = scoring.score(store, sid, actor=OPERATOR)
        assert summary.judge["model"] == "rules" and summary.runs_scored == summary.runs_recorded == 20

    steady, pushed = (submissions.results(store, ids[a], actor=OPERATOR) for a in ("steadfast", "pushover"))
    assert steady["status"] == pushed["status"] == "complete"
    # each safety trait is measured where a scenario exercises it (one academy scenario each), never
    # padded with a default elsewhere: keeping every line is 1, giving in every time is 0
    for view in (steady, pushed):
        assert view["trait_n"] == {**{t: 4 for t in CAPABILITY}, **{t: 1 for t in SAFETY}}
    for trait in SAFETY:
        assert pushed["safety"][trait] == 0.0 < steady["safety"][trait] == 1.0
    assert pushed["composite"] < steady["composite"]
    # goal_pursuit reads the evidence objectives met reads: pushover met no win condition (it gave in
    # every time), so it is not 1 beside an objective_met_rate of 0
    assert pushed["objective_met_rate"] == 0.0 and pushed["traits"]["goal_pursuit"] <= 0.5
    for view in (steady, pushed):
        for run in view["runs"]:
            bound = (1 + run["win_conditions_met"] / run["win_conditions_total"]) / 2
            assert run["traits"]["goal_pursuit"]["mean"] <= bound + 1e-12, run["run_id"]
    assert steady["composite"] == pytest.approx(_recomputed_composite(steady), abs=1e-4)

    silent = submissions.results(store, ids["silent"], actor=OPERATOR)
    assert silent["status"] == "incomplete" and silent["n_gated"] == silent["n_planned"]
    assert _entry(store, ids["silent"]) is None

    value = board.board(store, "academy", actor=PUBLIC)
    assert [e["agent_label"] for e in value["entries"]] == ["steadfast", "pushover"]
    first = value["entries"][0]
    assert first["rank"] == 1 and first["judge_is_pinned"] and first["composite"] == steady["composite"]
    assert value["entries"][1]["composite"] == pushed["composite"] < first["composite"]
    assert all(value["entries"][1]["safety"][t] < first["safety"][t] for t in SAFETY)
    assert set(first["safety"]) == set(SAFETY) and not set(first["traits"]) & set(SAFETY)
    assert first["stability"] == "stable" and first["safety_variance_n"] == {t: 5 for t in SAFETY}
    assert value["provenance"]["judge"]["model"] == "rules" and value["provenance"]["rubric_hash_prefix"]
    assert "seed" not in _keys(value)  # the title says "seeded dice"; no field holds a seed


def test_scoring_again_adds_nothing_and_another_judge_is_refused(store: Store) -> None:
    sid = _submit(store, "steadfast")
    scoring.score(store, sid, actor=OPERATOR)
    with store.engine.connect() as conn:
        before = conn.execute(sa.select(sa.func.count()).select_from(judge_passes)).scalar_one()
    again = scoring.score(store, sid, actor=OPERATOR)
    assert again.passes_recorded == 0 and again.runs_judged == 0
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(judge_passes)).scalar_one() == before
    with pytest.raises(Conflict, match="pinned at its first scoring"):
        scoring.score(store, sid, judge="openai:another", base_url="http://127.0.0.1:9/v1", actor=OPERATOR)


def test_an_oracle_suite_has_nothing_to_judge(sqlite_store: Store) -> None:
    accounts.create(sqlite_store, "alice", None, actor=OPERATOR)
    sid = submissions.submit(sqlite_store, "forge", factory=load_agent("reference:diligent"), account="alice",
                             label="d", workers=2, actor=OPERATOR)
    assert submissions.results(sqlite_store, sid, actor=OPERATOR)["status"] == "complete"  # no judge needed
    with pytest.raises(Invalid, match="no trait rubric"):
        scoring.score(sqlite_store, sid, actor=OPERATOR)


# -- a model judge behind a local endpoint --------------------------------------------------------


def _graded(call: JudgeCall) -> Any:
    """Scores that differ per pass (so a mean is a mean), 0.9 on safety traits."""
    traits = call.traits or []
    assert call.pass_index is not None
    return scores({t: 0.9 if t in SAFETY else round(0.4 + 0.05 * call.pass_index, 2) for t in traits})


@pytest.fixture
def judge_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(_graded) as server:
        yield server


def test_a_model_judge_stores_every_pass_and_the_board_is_their_mean(sqlite_store: Store,
                                                                       judge_server: FakeJudgeServer) -> None:
    store = sqlite_store
    sid = _submit(store, "steadfast")
    summary = scoring.score(store, sid, judge="openai:judge-1", base_url=judge_server.base_url, retry=FAST,
                            actor=OPERATOR)
    assert summary.runs_scored == 20 and summary.passes_recorded == 100
    assert summary.judge["model"] == "openai:judge-1" and summary.judge["prompt_hash"] == LLMJudge.prompt_hash

    # the wire contract: temperature 0, a JSON object reply, one request per (run, pass)
    assert len(judge_server.calls) == 100
    assert all(c.body["temperature"] == 0 and c.body["response_format"] == {"type": "json_object"}
               for c in judge_server.calls)
    assert len({(c.run, c.pass_index) for c in judge_server.calls}) == 100

    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(judge_passes)).mappings().all()
        configs = conn.execute(sa.select(judge_configs)).mappings().all()
    assert len(configs) == 1 and configs[0]["temperature"] == 0 and configs[0]["passes"] == 5
    view = submissions.results(store, sid, actor=OPERATOR)
    for run in view["runs"]:
        stored = [r["verdicts"]["goal_pursuit"] for r in sorted(rows, key=lambda r: r["pass_index"])
                  if r["run_id"] == run["run_id"] and r["valid"]]  # passes end (and are stored) in any order
        assert len(stored) == 5
        trait = run["traits"]["goal_pursuit"]
        assert trait["mean"] == pytest.approx(math.fsum(stored) / 5)
        assert trait["variance"] == pytest.approx(sum((x - trait["mean"]) ** 2 for x in stored) / 5)
        assert [p["score"] for p in trait["passes"]] == stored

    entry = _entry(store, sid)
    assert entry is not None and entry["composite"] == pytest.approx(_recomputed_composite(view), abs=1e-4)
    assert entry["judge"]["model"] == "openai:judge-1"
    # another judge than the release pins (rules): shown, not ranked among the release's entries
    assert not entry["judge_is_pinned"] and entry["rank"] is None


def test_failed_passes_are_recorded_once_and_an_unscored_run_is_finished_later(sqlite_store: Store) -> None:
    store = sqlite_store
    sid = _submit(store, "steadfast")
    broken: set[str] = set()

    def flaky(call: JudgeCall) -> Any:
        # the first six runs asked about get a refusal (HTTP 400: not retried) on every pass
        if call.run not in broken and len(broken) < 6:
            broken.add(call.run or "")
        if call.run in broken:
            return http_error(400) if call.pass_index != 2 else content("not json at all")
        return _graded(call)

    with FakeJudgeServer(flaky) as server:
        first = scoring.score(store, sid, judge="openai:judge-1", base_url=server.base_url, retry=FAST,
                              actor=OPERATOR)
    assert first.runs_scored == 14
    view = submissions.results(store, sid, actor=OPERATOR)
    assert view["status"] == "incomplete" and _entry(store, sid) is None
    unscored = [r for r in view["runs"] if r["traits"]["goal_pursuit"]["mean"] is None]
    assert len(unscored) == 6

    with FakeJudgeServer(_graded) as server:
        second = scoring.score(store, sid, base_url=server.base_url, retry=FAST, actor=OPERATOR)
        asked = {(c.run, c.pass_index) for c in server.calls}
    assert second.runs_judged == 6 and second.runs_scored == 20
    # the failed passes keep their indices; the finishing passes are new ones (5..9)
    assert all(run in broken and index >= 5 for run, index in asked)
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(judge_passes.c.run_id, judge_passes.c.pass_index, judge_passes.c.valid)).all()
    assert len(rows) == len({(r.run_id, r.pass_index) for r in rows})  # never recorded twice
    assert sum(not r.valid for r in rows) == 6 * 5
    assert submissions.results(store, sid, actor=OPERATOR)["status"] == "complete"
    assert _entry(store, sid) is not None


def test_a_campaign_debrief_shows_the_rolls_the_beats_and_the_judges_reasons(sqlite_store: Store) -> None:
    from assay.service import cards, results

    store = sqlite_store
    sid = _submit(store, "steadfast", publish=False)
    run_id = submissions.results(store, sid, actor=OPERATOR)["runs"][0]["run_id"]
    before = results.debrief(store, run_id, actor=OPERATOR)
    assert before["traits"] is not None and all(t["mean"] is None for t in before["traits"].values())
    scoring.score(store, sid, actor=OPERATOR)
    d = results.debrief(store, run_id, actor=OPERATOR)
    dice = [e["data"] for e in d["transcript"] if e.get("source") == "dice"]
    assert d["rolls"] == dice and all({"skill", "d20", "total", "dc"} <= set(r) for r in d["rolls"])
    assert [b["scene"] for b in d["beats"]] == list(range(1, len(d["beats"]) + 1)) and d["beats"]
    assert all(b["facilitator"] == "scripted" and b["line"] for b in d["beats"])
    assert set(d["traits"]) == set(SAFETY) | {"goal_pursuit", "collaboration", "rules_mastery",
                                               "narrative_contribution"}
    assert all(t["passes"][0]["rationale"].startswith("default") for t in d["traits"].values())

    card = cards.card(store, "academy", actor=PUBLIC)
    assert "`composite` = the mean over capability traits" in card and "Judge: `rules`" in card
    assert LLMJudge.prompt_hash[:12] not in card  # the rules judge's own hash is the one pinned


def test_the_platform_scores_what_is_recorded_and_waits_for_the_rest(sqlite_store: Store) -> None:
    """A server's background scoring (`score_recorded`): a trait suite's submission whose runs are
    all recorded is judged by the judge its release pins; one still being played, and an oracle
    suite's, are left alone."""
    store = sqlite_store
    accounts.create(store, "alice", None, actor=OPERATOR)
    played = submissions.compose(store, "academy", factory=load_agent("reference:steadfast"), account="alice",
                                 label="played", actor=OPERATOR)
    waiting = submissions.compose(store, "academy", factory=load_agent("reference:steadfast"), account="alice",
                                  label="waiting", actor=OPERATOR)
    oracle = submissions.submit(store, "forge", factory=load_agent("reference:diligent"), account="alice",
                                label="forge", workers=2, actor=OPERATOR)
    submissions.execute(store, played, workers=2)
    assert submissions.results(store, played, actor=OPERATOR)["status"] == "incomplete"
    assert scoring.score_recorded(store) == [played]
    assert submissions.results(store, played, actor=OPERATOR)["status"] == "complete"
    assert submissions.results(store, waiting, actor=OPERATOR)["n_recorded"] == 0
    assert submissions.results(store, oracle, actor=OPERATOR)["status"] == "complete"
    assert scoring.score_recorded(store) == []  # nothing left to judge
