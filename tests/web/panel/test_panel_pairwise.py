"""The panel board's intervals and statistical ranks, and pairwise preferences with Bradley–Terry,
through the API on SQLite and PostgreSQL (issue 12, items 4 and 5)."""

from __future__ import annotations

from math import exp
from statistics import fmean
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.service import platform_config
from assay.service.actors import OPERATOR

from .conftest import Panel, Session


def _count(store: Any, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def _board(client: TestClient) -> dict[str, Any]:
    answer = client.get("/api/benchmark/leaderboard")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _scored(pipeline: Panel, model: str, ratings: list[list[int]]) -> list[str]:
    """One scored run of `model` per list, rated in safety by p0, p1, … in order."""
    runs = []
    for per_run in ratings:
        run = pipeline.run(model)
        for i, r in enumerate(per_run):
            assert pipeline.score(run, f"p{i}@example.org", {"safety": r, "honesty": min(10, r + 1)}).status_code == 200
        assert pipeline.finalize(run).status_code == 200
        runs.append(run)
    return runs


def test_intervals_contain_their_scores_repeat_on_every_read_and_widen_when_panelists_disagree(
        pipeline: Panel, anon: TestClient) -> None:
    pipeline.environment()
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")
    for slug in ("agree", "disagree", "low"):
        pipeline.model(slug)
    _scored(pipeline, "agree", [[7, 7, 8], [7, 8, 7]])
    _scored(pipeline, "disagree", [[1, 7, 10], [2, 9, 6]])
    _scored(pipeline, "low", [[1, 1, 1], [1, 2, 1]])
    board = _board(anon)
    assert board == _board(anon)  # seeded: the same intervals on every read
    by = {e["slug"]: e for e in board["ranked"]}
    for e in board["ranked"]:
        lo, hi = e["overall_ci"]
        assert lo <= e["overall_score"] <= hi
        assert set(e["category_ci"]) == set(e["category_scores"])
        for c, (clo, chi) in e["category_ci"].items():
            assert clo <= e["category_scores"][c] <= chi
    width = {s: e["overall_ci"][1] - e["overall_ci"][0] for s, e in by.items()}
    assert width["disagree"] > width["agree"]
    # ranks follow the intervals: 1 + the entries whose interval lies wholly above
    for e in board["ranked"]:
        assert e["rank"] == 1 + sum(1 for o in board["ranked"] if o["overall_ci"][0] > e["overall_ci"][1])
    assert by["agree"]["rank"] == 1 and by["low"]["rank"] > by["agree"]["rank"]
    assert "interval" in board["ranking"]


def test_one_panelists_cards_give_no_interval_and_no_rank_but_the_reason(
        pipeline: Panel, anon: TestClient, web_store: Any) -> None:
    """Issue 24: four runs rated alike by one panelist read a point interval, and the board ranked on it."""
    platform_config.set_value(web_store, platform_config.PANEL_QUORUM, {"min_panelists": 1}, actor=OPERATOR)
    pipeline.environment()
    for i in range(2):
        pipeline.panelist(f"p{i}@example.org")
    pipeline.model("alone")
    pipeline.model("pair")
    _scored(pipeline, "alone", [[5]] * 4)
    _scored(pipeline, "pair", [[4, 6], [5, 5]])
    by = {e["slug"]: e for e in _board(anon)["ranked"]}
    alone, pair = by["alone"], by["pair"]
    assert alone["overall_score"] == 5.5 and alone["overall_ci"] is None and alone["category_ci"] == {}
    assert "fewer than 2" in alone["ci_reason"] and alone["rank"] is None
    assert pair["overall_ci"] is not None and pair["ci_reason"] is None and pair["rank"] == 1
    page = anon.get("/benchmark")
    assert page.status_code == 200 and alone["ci_reason"] in page.text and "unranked" in page.text


def _mle(prefs: list[tuple[str, str, str]]) -> dict[str, float]:
    """A direct numeric fit: gradient ascent on the Bradley–Terry log-likelihood, centred."""
    names = sorted({m for a, b, _ in prefs for m in (a, b)})
    s = {n: 0.0 for n in names}
    for _ in range(20000):
        grad = {n: 0.0 for n in names}
        for a, b, o in prefs:
            wa = {"a": 1.0, "b": 0.0, "tie": 0.5}[o]
            pa = 1 / (1 + exp(s[b] - s[a]))
            grad[a] += wa - pa
            grad[b] -= wa - pa
        for n in names:
            s[n] += 0.05 * grad[n]
    centre = fmean(s.values())
    return {n: v - centre for n, v in s.items()}


def test_bradley_terry_strengths_equal_the_maximum_likelihood_fit(pipeline: Panel, anon: TestClient) -> None:
    pipeline.environment()
    for slug in ("x", "y", "z", "thin"):
        pipeline.model(slug, name=f"Model {slug}")
    runs = {m: pipeline.run(m) for m in ("x", "y", "z", "thin")}
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")
    plan = {0: [("x", "y", "a"), ("y", "z", "a"), ("x", "z", "b")],
            1: [("x", "y", "a"), ("y", "z", "tie"), ("x", "z", "a")],
            2: [("x", "y", "b"), ("y", "z", "a"), ("z", "x", "b")]}
    prefs = []
    for who, items in plan.items():
        for a, b, o in items:
            answer = pipeline.s.ingest(action="record-preference", run_a=runs[a], run_b=runs[b],
                                       panelist_email=f"p{who}@example.org", preferred=o)
            assert answer.status_code == 200, answer.text
            prefs.append((a, b, o))
    thin = pipeline.s.ingest(action="record-preference", run_a=runs["thin"], run_b=runs["x"],
                             panelist_email="p0@example.org", preferred="a")
    assert thin.status_code == 200
    board = _board(anon)
    pairwise = board["pairwise"]
    assert pairwise["provisional"] == {"count": 1}  # thin: one panelist
    got = {e["slug"]: e for e in pairwise["ranked"]}
    assert set(got) == {"x", "y", "z"} and "thin" not in str(pairwise)
    for slug, strength in _mle(prefs).items():
        assert abs(got[slug]["strength"] - strength) < 0.02
    assert abs(sum(e["strength"] for e in got.values())) < 0.01
    for e in pairwise["ranked"]:
        assert e["name"] == f"Model {e['slug']}" and e["n_comparisons"] == 6
        lo, hi = e["ci"]
        assert (lo is None or lo <= e["strength"]) and (hi is None or e["strength"] <= hi)
        assert e["rank"] == 1 + sum(1 for o in pairwise["ranked"]
                                    if o["ci"] and o["ci"][0] is not None and e["ci"][1] is not None
                                    and o["ci"][0] > e["ci"][1])
    assert board == _board(anon)


def test_cross_environment_self_and_unapproved_preferences_are_refused_and_store_nothing(
        pipeline: Panel, session: Session, web_store: Any) -> None:
    pipeline.environment("outage")
    pipeline.environment("migration")
    pipeline.model("x")
    pipeline.model("y")
    a, b, elsewhere = pipeline.run("x"), pipeline.run("y"), pipeline.run("y", "migration")
    pipeline.panelist("ok@example.org")
    pipeline.apply("pending@example.org")
    rejected = pipeline.apply("rejected@example.org")
    assert session.decide(rejected, "reject").status_code == 200

    def prefer(run_a: str, run_b: str, email: str = "ok@example.org", preferred: str = "a") -> Any:
        return session.ingest(action="record-preference", run_a=run_a, run_b=run_b, panelist_email=email,
                              preferred=preferred)

    cross = prefer(a, elsewhere)
    assert cross.status_code == 422 and "same environment" in cross.json()["detail"]
    same = prefer(a, a)
    assert same.status_code == 422 and cross.json()["field"] == "run_b"
    refusals = [prefer(a, b, email) for email in ("pending@example.org", "rejected@example.org",
                                                  "stranger@example.org", "not an email")]
    assert {r.status_code for r in refusals} == {403} and len({r.text for r in refusals}) == 1
    assert refusals[0].text == pipeline.score(a, "pending@example.org", {"safety": 5}).text  # record-score's refusal
    assert prefer(a, "nosuchrun").status_code == 404
    assert prefer(a, b, preferred="c").status_code == 422
    assert _count(web_store, "panel_preferences") == 0
    assert prefer(a, b).status_code == 200 and _count(web_store, "panel_preferences") == 1


def test_a_resubmitted_preference_replaces_the_earlier_and_history_stays(
        pipeline: Panel, anon: TestClient, web_store: Any) -> None:
    pipeline.environment()
    for slug in ("x", "y", "z"):
        pipeline.model(slug)
    runs = {m: pipeline.run(m) for m in ("x", "y", "z")}
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")

    def prefer(a: str, b: str, who: int, o: str) -> None:
        answer = pipeline.s.ingest(action="record-preference", run_a=runs[a], run_b=runs[b],
                                   panelist_email=f"p{who}@example.org", preferred=o)
        assert answer.status_code == 200, answer.text

    counted = []
    for who, (yz, zx) in enumerate((("a", "a"), ("b", "b"), ("tie", "a"))):
        prefer("x", "y", who, "a")  # first x over y ...
        prefer("y", "x", who, "a")  # ... then, the same pair reversed, y over x: this one counts
        prefer("y", "z", who, yz)
        prefer("z", "x", who, zx)
        counted += [("y", "x", "a"), ("y", "z", yz), ("z", "x", zx)]
    assert _count(web_store, "panel_preferences") == 12  # append-only: the history is kept
    got = {e["slug"]: e for e in _board(anon)["pairwise"]["ranked"]}
    assert all(e["n_comparisons"] == 6 for e in got.values())  # 3 panelists × 2 pairs, not 9
    for slug, strength in _mle(counted).items():
        assert abs(got[slug]["strength"] - strength) < 0.02
    assert got["y"]["strength"] > got["x"]["strength"]


def test_a_ranked_model_that_never_wins_is_reported_so_never_as_infinity(
        pipeline: Panel, anon: TestClient) -> None:
    pipeline.environment()
    for slug in ("x", "y", "z"):
        pipeline.model(slug)
    runs = {m: pipeline.run(m[0]) for m in ("x", "x2", "y", "z")}  # two runs of x: two distinct pairs with y
    for who in range(3):
        pipeline.panelist(f"p{who}@example.org")
        for a, b, o in (("x", "y", "a"), ("x2", "y", "b"), ("z", "x", "b"), ("z", "y", "b")):
            assert pipeline.s.ingest(action="record-preference", run_a=runs[a], run_b=runs[b],
                                     panelist_email=f"p{who}@example.org", preferred=o).status_code == 200
    answer = anon.get("/api/benchmark/leaderboard")
    assert "Infinity" not in answer.text and "inf" not in answer.text.lower().replace("information", "")
    ranked = answer.json()["pairwise"]["ranked"]
    assert [e["slug"] for e in ranked][-1] == "z", ranked
    z = ranked[-1]
    assert z["strength"] is None and z["ci"] is None and "never preferred" in z["note"] and z["rank"] == 3


def test_the_benchmark_page_shows_the_intervals_and_the_pairwise_ranking(pipeline: Panel, anon: TestClient) -> None:
    pipeline.environment()
    for slug in ("x", "y"):
        pipeline.model(slug, name=f"Model {slug}")
    runs = {m: pipeline.run(m) for m in ("x", "y")}
    for who in range(3):
        pipeline.panelist(f"p{who}@example.org")
    _scored(pipeline, "x", [[5, 6, 7]])
    for who, o in enumerate(("a", "b", "a")):
        assert pipeline.s.ingest(action="record-preference", run_a=runs["x"], run_b=runs["y"],
                                 panelist_email=f"p{who}@example.org", preferred=o).status_code == 200
    board = _board(anon)
    page = anon.get("/benchmark")
    assert page.status_code == 200
    lo, hi = board["ranked"][0]["overall_ci"]
    assert f"[{lo:.2f}, {hi:.2f}]" in page.text
    assert "Pairwise ranking" in page.text and 'data-model="y"' in page.text
    for e in board["pairwise"]["ranked"]:
        assert f"{e['strength']:.2f}" in page.text
