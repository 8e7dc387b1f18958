"""`create-run` may name the Assay run a panel run scored (`assay_run`, issue 12 item 7): through
the JSON API and the admin's ingest form, on SQLite and PostgreSQL. Refusals name the field."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tests.store import _factories
from tests.store._factories import CHECKS, record, seeded_batch

from .conftest import Panel, Session
from assay.store.runs_repo import RunsRepo


def _assay_run(web_store: Any) -> str:
    """One recorded Assay run (in whatever shape `Store.add_runs` takes its items: `scored` says)."""
    _, planned = seeded_batch(web_store, n=1)
    item = getattr(_factories, "scored", lambda rec, checks: (rec, checks))(record(planned[0]), CHECKS)
    RunsRepo(web_store).add_runs([item])
    return planned[0].run_id


def _links(web_store: Any) -> list[tuple[str, str]]:
    with web_store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text("SELECT panel_run_id, assay_run_id FROM panel_run_links"))]


def test_create_run_links_an_assay_run_by_id_or_prefix_and_refuses_one_it_cannot_name(
        pipeline: Panel, session: Session, web_store: Any) -> None:
    run = _assay_run(web_store)
    pipeline.model("m1")
    pipeline.environment()
    step = {"action": "create-run", "model": "m1", "environment": "outage", "artifact_url": "https://x.example.org/a"}
    for wrong in ("0" * 32, run[:3]):
        refused = session.ingest(**step, assay_run=wrong)
        assert refused.status_code == 404 and refused.json()["field"] == "assay_run", refused.text
    assert session.ingest(**step, assay_run=5).status_code == 422
    assert _links(web_store) == [] and session.client.get("/api/benchmark/runs").json() == []
    made = session.ingest(**step, assay_run=run[:10])
    assert made.status_code == 200 and made.json()["assay_run"] == run
    plain = session.ingest(**step)
    assert plain.status_code == 200 and "assay_run" not in plain.json()
    views = {v["run"]: v for v in session.client.get("/api/benchmark/runs").json()}
    assert views[made.json()["run"]]["assay_run"] == run and views[plain.json()["run"]]["assay_run"] is None
    assert _links(web_store) == [(made.json()["run"], run)]


def test_the_ingest_form_takes_an_optional_assay_run(pipeline: Panel, session: Session, web_store: Any) -> None:
    run = _assay_run(web_store)
    pipeline.model("m1")
    pipeline.environment()
    assert 'name="assay_run"' in session.client.get("/admin/ingest").text
    form = {"csrf_token": session.csrf, "action": "create-run", "model": "m1", "environment": "outage",
            "artifact_url": "https://x.example.org/a"}
    assert session.client.post("/admin/ingest", data={**form, "assay_run": ""}).status_code == 200
    assert session.client.post("/admin/ingest", data={**form, "assay_run": run[:8]}).status_code == 200
    assert [a for _, a in _links(web_store)] == [run]


def test_the_ingest_schema_documents_assay_run(https: Any) -> None:
    text = https.get("/openapi.json").text
    assert "assay_run" in text
