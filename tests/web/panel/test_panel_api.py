"""The human panel through its API, on SQLite and PostgreSQL: applications, the ingest state machine,
the fourteen categories, and the panel board with its medians and quorum (issue 11, items 2-4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.service import panel, platform_config
from assay.service.actors import OPERATOR
from assay.scenario.yamlsafe import load_yaml_file

from .conftest import Panel, Session

TAXONOMY = Path(panel.__file__).resolve().parent / "panel_categories.yaml"
INJECTION_COMMENT = "'; drop table scores; --"


def _count(store: Any, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def _counts(store: Any) -> dict[str, int]:
    return {t: _count(store, t) for t in ("panel_models", "panel_environments", "panel_runs", "panel_scorecards",
                                          "panel_ratings", "panel_run_finalizations", "panel_applications",
                                          "panel_reviews")}


def _board(client: TestClient) -> dict[str, Any]:
    answer = client.get("/api/benchmark/leaderboard")
    assert answer.status_code == 200
    return answer.json()


# -- categories -----------------------------------------------------------------------------------


def test_fourteen_categories_are_listed_from_the_one_taxonomy_file(anon: TestClient, web_store: Any) -> None:
    answer = anon.get("/api/benchmark/categories")
    assert answer.status_code == 200
    listed = answer.json()
    in_file = load_yaml_file(TAXONOMY)["categories"]
    assert len(listed) == 14 == len(in_file)
    assert listed == [{"slug": c["slug"], "name": c["name"], "description": c["description"]} for c in in_file]
    assert _count(web_store, "eval_categories") == 14
    assert panel.seed_categories(web_store) == 0  # seeded once; seeding again adds nothing
    assert anon.get("/api/benchmark/categories").json() == listed


# -- applications ---------------------------------------------------------------------------------


def test_an_application_is_201_with_its_id_and_a_second_one_from_the_same_email_reads_the_same(
        anon: TestClient, session: Session, web_store: Any) -> None:
    body = {"email": "Ada@Example.org", "specialty": "SRE", "years_experience": 12, "statement": "On call since 2014."}
    first = anon.post("/api/panel/applications", json=body)
    second = anon.post("/api/panel/applications", json={**body, "email": "ada@example.org", "statement": "again"})
    assert first.status_code == second.status_code == 201
    assert set(first.json()) == set(second.json()) == {"id"} and first.json()["id"] != second.json()["id"]
    assert first.headers.get("content-length") == second.headers.get("content-length")
    assert _count(web_store, "panel_applications") == 1
    listed = session.client.get("/api/panel/applications").json()
    assert [(a["id"], a["email"], a["status"], a["statement"]) for a in listed] == [
        (first.json()["id"], "ada@example.org", "pending", "On call since 2014.")]
    assert anon.get("/api/panel/applications").status_code == 401  # applicants are the staff's to see


@pytest.mark.parametrize("bad", [
    {"email": "not-an-email", "specialty": "x", "years_experience": 1, "statement": "s"},
    {"email": "a@b.org", "specialty": "x", "years_experience": -1, "statement": "s"},
    {"email": "a@b.org", "specialty": "x", "years_experience": "3", "statement": "s"},
    {"email": "a@b.org", "specialty": "", "years_experience": 3, "statement": "s"},
    {"email": "a@b.org", "specialty": "x", "years_experience": 3},
    {"email": "a@b.org", "specialty": "x", "years_experience": 3, "statement": "s", "extra": 1},
    {"email": "a@b.org", "specialty": "x\u0000", "years_experience": 3, "statement": "s"},
])
def test_a_malformed_application_is_422_with_a_one_line_detail(anon: TestClient, web_store: Any,
                                                               bad: dict[str, Any]) -> None:
    answer = anon.post("/api/panel/applications", json=bad)
    assert answer.status_code == 422 and isinstance(answer.json()["detail"], str)
    assert _count(web_store, "panel_applications") == 0


def test_admins_approve_and_reject_with_a_review_timestamp_and_the_reviewing_admin(
        pipeline: Panel, session: Session, web_store: Any) -> None:
    a, b = pipeline.apply("a@example.org"), pipeline.apply("b@example.org")
    approved, rejected = session.decide(a, "approve"), session.decide(b, "reject")
    assert approved.status_code == rejected.status_code == 200
    for answer, status in ((approved, "approved"), (rejected, "rejected")):
        view = answer.json()
        assert view["status"] == status and view["reviewed_by"] == "root@example.org" and view["reviewed_at"]
    assert session.decide("nosuchapplication", "approve").status_code == 404
    assert session.client.post(f"/api/panel/applications/{a}/maybe", headers=session.headers()).status_code == 404
    listed = {x["email"]: x["status"] for x in session.client.get("/api/panel/applications").json()}
    assert listed == {"a@example.org": "approved", "b@example.org": "rejected"}


# -- ingest ---------------------------------------------------------------------------------------


def test_models_environments_and_runs_are_registered(pipeline: Panel, session: Session, web_store: Any) -> None:
    pipeline.model("m1", "Model One", "Acme")
    pipeline.environment("outage", "Restore the payments service after a bad deploy.")
    run = pipeline.run("m1")
    runs = session.client.get("/api/benchmark/runs").json()
    assert [(r["run"], r["model"], r["environment"], r["status"], r["n_scorecards"]) for r in runs] == [
        (run, "m1", "outage", "pending", 0)]
    assert session.ingest(action="register-model", slug="m1", name="again", vendor="x").status_code == 409
    assert session.ingest(action="create-run", model="nosuch", environment="outage",
                          artifact_url="https://x.example.org/a").status_code == 404
    assert session.ingest(action="create-run", model="m1", environment="nosuch",
                          artifact_url="https://x.example.org/a").status_code == 404
    assert session.ingest(action="create-run", model="m1", environment="outage",
                          artifact_url="javascript:alert(1)").status_code == 422
    assert _counts(web_store)["panel_runs"] == 1 and _counts(web_store)["panel_models"] == 1


@pytest.mark.parametrize("step", [
    {},
    {"action": "drop-everything"},
    {"action": "register-model", "slug": "Bad Slug", "name": "x", "vendor": "y"},
    {"action": "register-model", "slug": "ok", "name": "x"},
    {"action": "register-model", "slug": "ok", "name": "x", "vendor": "y", "rank": 1},
    {"action": "register-environment", "slug": "ok", "name": "x", "spec": 5},
    {"action": "finalize-run"},
    {"action": "record-score", "run": "r", "panelist_email": "a@b.org", "ratings": "7"},
])
def test_a_malformed_step_is_422_and_changes_nothing(session: Session, web_store: Any, step: dict[str, Any]) -> None:
    before = _counts(web_store)
    answer = session.ingest(**step)
    assert answer.status_code == 422 and isinstance(answer.json()["detail"], str)
    assert _counts(web_store) == before
    assert session.client.post("/api/benchmark/ingest", content=b"[1, 2]", headers={
        **session.headers(), "Content-Type": "application/json"}).status_code == 422
    assert session.client.post("/api/benchmark/ingest", content=b"{not json", headers={
        **session.headers(), "Content-Type": "application/json"}).status_code == 422


def test_finalizing_a_run_without_scorecards_is_refused(pipeline: Panel, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    run = pipeline.run("m1")
    refused = pipeline.finalize(run)
    assert refused.status_code == 409 and "no scorecards" in refused.json()["detail"]
    assert _count(web_store, "panel_run_finalizations") == 0
    assert pipeline.finalize("nosuchrun").status_code == 404


def test_a_pending_panelist_a_rejected_one_a_stranger_and_a_rating_of_11_are_refused(
        pipeline: Panel, session: Session, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    run = pipeline.run("m1")
    pipeline.apply("pending@example.org")
    rejected = pipeline.apply("rejected@example.org")
    assert session.decide(rejected, "reject").status_code == 200
    pipeline.panelist("ok@example.org")
    before = _counts(web_store)
    refusals = [pipeline.score(run, email, {"safety": 7})
                for email in ("pending@example.org", "rejected@example.org", "stranger@example.org", "not an email")]
    assert {r.status_code for r in refusals} == {403}
    assert len({r.text for r in refusals}) == 1  # one and the same refusal for all of them
    for ratings in ({"safety": 11}, {"safety": -1}, {"safety": 10.5}, {"safety": True}, {"nosuch": 5}, {},
                    {"safety": "7"}, {"safety": None}):
        answer = pipeline.score(run, "ok@example.org", ratings)
        assert answer.status_code == 422 and answer.json()["field"] == "ratings", ratings
    assert pipeline.score("nosuchrun", "ok@example.org", {"safety": 7}).status_code == 404
    assert _counts(web_store) == before
    ok = pipeline.score(run, "ok@example.org", {"safety": 10, "diagnosis": 0, "honesty": 7.5})
    assert ok.status_code == 200 and ok.json()["ratings"] == {"safety": 10.0, "diagnosis": 0.0, "honesty": 7.5}


def test_three_approved_panelists_scoring_7_7_and_1_give_the_model_7_in_that_category(
        pipeline: Panel, anon: TestClient) -> None:
    pipeline.model("m1", "Model One", "Acme")
    pipeline.environment()
    run = pipeline.run("m1")
    for i, rating in enumerate((7, 7, 1)):
        pipeline.panelist(f"p{i}@example.org", specialty=f"specialty {i}", years=10 + i)
        assert pipeline.score(run, f"p{i}@example.org", {"safety": rating}).status_code == 200
    pending = _board(anon)
    assert (pending["ranked"], pending["provisional"]) == ([], {"count": 0})  # a pending run is not on the board
    assert pipeline.finalize(run).json() == {"run": run, "status": "scored"}
    board = _board(anon)
    assert board["provisional"] == {"count": 0}
    (entry,) = board["ranked"]
    assert entry["category_scores"] == {"safety": 7.0} and entry["overall_score"] == 7.0
    assert (entry["slug"], entry["name"], entry["vendor"], entry["n_runs"], entry["n_panelists"], entry["rank"]) == (
        "m1", "Model One", "Acme", 1, 3, 1)
    assert entry["panelists"] == [{"specialty": f"specialty {i}", "years_experience": 10 + i} for i in range(3)]


def test_a_model_scored_by_two_panelists_is_not_ranked_and_counts_as_provisional(
        pipeline: Panel, anon: TestClient) -> None:
    for slug in ("ranked-model", "thin-model"):
        pipeline.model(slug)
    pipeline.environment()
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")
    wide, thin = pipeline.run("ranked-model"), pipeline.run("thin-model")
    for i in range(3):
        pipeline.score(wide, f"p{i}@example.org", {"safety": 6, "tool-use": 4 + i})
    for i in range(2):
        pipeline.score(thin, f"p{i}@example.org", {"safety": 9 + i})
    for run in (wide, thin):
        assert pipeline.finalize(run).status_code == 200
    board = _board(anon)
    assert [e["slug"] for e in board["ranked"]] == ["ranked-model"]
    assert board["provisional"] == {"count": 1}
    assert board["ranked"][0]["category_scores"] == {"tool-use": 5.0, "safety": 6.0}
    assert board["ranked"][0]["overall_score"] == 5.5
    text = json.dumps(board)
    assert "thin-model" not in text and "9.5" not in text  # provisional: a count, never a name or a number


def test_the_quorum_comes_from_platform_config(pipeline: Panel, anon: TestClient, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    pipeline.panelist("p0@example.org")
    run = pipeline.run("m1")
    pipeline.score(run, "p0@example.org", {"safety": 3})
    pipeline.finalize(run)
    assert _board(anon)["provisional"] == {"count": 1}
    platform_config.set_value(web_store, platform_config.PANEL_QUORUM, {"min_panelists": 1}, actor=OPERATOR)
    board = _board(anon)
    assert board["quorum"] == 1 and [e["overall_score"] for e in board["ranked"]] == [3.0]
    with pytest.raises(Exception, match="min_panelists"):
        platform_config.set_value(web_store, platform_config.PANEL_QUORUM, {"min_panelists": 0}, actor=OPERATOR)


def test_per_model_figures_are_means_of_run_medians_and_an_even_count_takes_the_two_middle_ones(
        pipeline: Panel, anon: TestClient) -> None:
    pipeline.model("m1")
    pipeline.environment()
    for i in range(4):
        pipeline.panelist(f"p{i}@example.org")
    first, second = pipeline.run("m1"), pipeline.run("m1")
    for i, rating in enumerate((2, 9, 4, 10)):  # four ratings: the median is (4 + 9) / 2
        pipeline.score(first, f"p{i}@example.org", {"safety": rating, "planning": 5})
    for i, rating in enumerate((8, 8, 0)):
        pipeline.score(second, f"p{i}@example.org", {"safety": rating})
    for run in (first, second):
        pipeline.finalize(run)
    (entry,) = _board(anon)["ranked"]
    assert entry["category_scores"] == {"planning": 5.0, "safety": round((6.5 + 8) / 2, 2)}
    assert entry["overall_score"] == round((5.0 + 7.25) / 2, 2)
    assert (entry["n_runs"], entry["n_panelists"]) == (2, 4)


def test_a_resubmitted_scorecard_replaces_the_earlier_one_which_stays_as_history(
        pipeline: Panel, session: Session, anon: TestClient) -> None:
    pipeline.model("m1")
    pipeline.environment()
    for i in range(3):
        pipeline.panelist(f"p{i}@example.org")
    run = pipeline.run("m1")
    pipeline.score(run, "p0@example.org", {"safety": 1, "honesty": 2}, comment="first look")
    pipeline.score(run, "p0@example.org", {"safety": 9}, comment="replayed it")  # partial: honesty not rated now
    for i in (1, 2):
        pipeline.score(run, f"p{i}@example.org", {"safety": 8})
    pipeline.finalize(run)
    (entry,) = _board(anon)["ranked"]
    assert entry["category_scores"] == {"safety": 8.0} and entry["n_panelists"] == 3
    cards = session.client.get(f"/api/benchmark/runs/{run}/scorecards").json()
    assert [(c["panelist_email"], c["ratings"], c["comment"]) for c in cards[:2]] == [
        ("p0@example.org", {"safety": 1.0, "honesty": 2.0}, "first look"),
        ("p0@example.org", {"safety": 9.0}, "replayed it")]


def test_a_scored_run_takes_no_more_scorecards_and_is_not_finalized_twice(pipeline: Panel, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    pipeline.panelist("p0@example.org")
    run = pipeline.run("m1")
    pipeline.score(run, "p0@example.org", {"safety": 5})
    assert pipeline.finalize(run).status_code == 200
    before = _counts(web_store)
    late = pipeline.score(run, "p0@example.org", {"safety": 10})
    assert late.status_code == 409 and "scored already" in late.json()["detail"]
    assert pipeline.finalize(run).status_code == 409
    assert _counts(web_store) == before


def test_a_panelist_rejected_later_stops_counting(pipeline: Panel, session: Session, anon: TestClient) -> None:
    pipeline.model("m1")
    pipeline.environment()
    ids = [pipeline.panelist(f"p{i}@example.org") for i in range(3)]
    run = pipeline.run("m1")
    for i in range(3):
        pipeline.score(run, f"p{i}@example.org", {"safety": 5})
    pipeline.finalize(run)
    assert len(_board(anon)["ranked"]) == 1
    session.decide(ids[2], "reject")
    assert _board(anon)["ranked"] == [] and _board(anon)["provisional"] == {"count": 1}


def test_no_panelist_email_or_comment_appears_on_the_public_board_or_page(pipeline: Panel, anon: TestClient) -> None:
    pipeline.model("m1")
    pipeline.environment()
    emails = [f"secret.person{i}@example.org" for i in range(3)]
    for email in emails:
        pipeline.panelist(email, specialty="game designer", years=7)
    run = pipeline.run("m1")
    for email in emails:
        pipeline.score(run, email, {"safety": 7}, comment="private remark")
    pipeline.finalize(run)
    for text in (anon.get("/api/benchmark/leaderboard").text, anon.get("/benchmark").text):
        assert "@" not in text and "secret.person" not in text and "private remark" not in text
        assert "game designer" in text


def test_a_comment_like_sql_is_stored_literally(pipeline: Panel, session: Session, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    pipeline.panelist("p0@example.org")
    run = pipeline.run("m1")
    assert pipeline.score(run, "p0@example.org", {"safety": 6}, comment=INJECTION_COMMENT).status_code == 200
    with web_store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT comment FROM panel_scorecards")).scalar_one() == INJECTION_COMMENT
        assert conn.execute(sa.text("SELECT COUNT(*) FROM panel_ratings")).scalar_one() == 1
    cards = session.client.get(f"/api/benchmark/runs/{run}/scorecards").json()
    assert cards[0]["comment"] == INJECTION_COMMENT


def test_the_public_may_not_ingest_or_decide(anon: TestClient, pipeline: Panel, web_store: Any) -> None:
    application = pipeline.apply("p@example.org")
    assert anon.post("/api/benchmark/ingest", json={"action": "register-model", "slug": "m", "name": "n",
                                                    "vendor": "v"}).status_code == 401
    assert anon.post(f"/api/panel/applications/{application}/approve").status_code == 401
    assert anon.get("/api/benchmark/runs").status_code == 401
    assert _counts(web_store)["panel_models"] == 0 and _counts(web_store)["panel_reviews"] == 0


def test_the_panel_tables_are_append_only(pipeline: Panel, web_store: Any) -> None:
    pipeline.model("m1")
    pipeline.environment()
    pipeline.panelist("p0@example.org")
    run = pipeline.run("m1")
    pipeline.score(run, "p0@example.org", {"safety": 6})
    for statement in ("UPDATE panel_ratings SET rating = 10", "DELETE FROM panel_scorecards",
                      "UPDATE panel_reviews SET decision = 'rejected'", "UPDATE eval_categories SET name = 'x'",
                      "DELETE FROM panel_runs", "UPDATE panel_applications SET email = 'x@y.org'"):
        with pytest.raises(sa.exc.IntegrityError, match="append-only"):
            with web_store.engine.begin() as conn:
                conn.execute(sa.text(statement))


def test_approving_the_id_a_second_application_got_is_refused_clearly(pipeline: Any, session: Any) -> None:
    first = pipeline.apply("again@example.org")
    second = pipeline.apply("again@example.org")
    assert first != second
    refused = session.decide(second, "approve")
    assert refused.status_code == 404
    body = refused.json()
    assert body["field"] == "application" and "applies again" in body["detail"] and "first application" in body["detail"]
    assert session.decide(first, "approve").json()["status"] == "approved"


def test_register_environment_documents_its_spec(anon: Any) -> None:
    document = anon.get("/openapi.json").json()
    body = document["paths"]["/api/benchmark/ingest"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    variants = body.get("oneOf") or body.get("anyOf")
    spec = next(v for v in variants if v["properties"]["action"].get("const") == "register-environment")
    assert "what the panelists are told" in spec["properties"]["spec"]["description"]
