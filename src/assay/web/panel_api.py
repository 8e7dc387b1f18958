"""The human panel's JSON API: applications, categories, the ingest state machine, the board.

Public: `POST /api/panel/applications` (201 `{"id"}`, the same for an email that applied already),
`GET /api/benchmark/categories`, `GET /api/benchmark/leaderboard`. Admin (the session cookie, and
on every POST its CSRF token as `X-CSRF-Token`; never a key): `GET /api/panel/applications`,
`POST /api/panel/applications/{id}/approve|reject`, `POST /api/benchmark/ingest` (one flat JSON
object whose `action` selects the step), `GET /api/benchmark/runs`, `GET /api/benchmark/runs/{run}/scorecards`.

Each route is a thin shell over `service.panel`, handing it the caller's actor (the public, or
`ADMIN` from the session, with which admin it is for the record); the service decides. Bodies are
read as JSON here and validated by the service, so every refusal is the app's one shape,
`{"detail": "…", "field": …}` with its status (404 no such run, 409 scored already or no
scorecards, 403 not an approved panelist, 422 a malformed value), and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field, TypeAdapter

from assay.errors import Invalid
from assay.service import panel
from assay.service.actors import Actor
from assay.service.admins import AdminSession
from assay.store.db import Store
from assay.web.admin import admin_change, admin_session
from assay.web.deps import get_store, public_actor
from assay.web.schemas import Closed, error_responses

router = APIRouter(prefix="/api", responses=error_responses(429, 500))


class Created(Closed):
    id: str = Field(description="The application's id (an email that applied already gets one that names nothing).")


class CategoryView(Closed):
    slug: str
    name: str
    description: str


class Panelist(Closed):
    specialty: str
    years_experience: int


class PanelEntry(Closed):
    """A ranked model: its figures are means of per-run, per-category medians (0..10, 2 places)."""

    slug: str
    name: str
    vendor: str
    n_runs: int
    n_panelists: int
    overall_score: float
    category_scores: dict[str, float]
    panelists: list[Panelist] = Field(description="Who scored it: specialty and years of experience only.")
    overall_ci: list[float] | None = Field(description="95% seeded two-stage bootstrap interval [lo, hi] on "
                                                       "overall_score; null (with ci_reason) where withheld.")
    category_ci: dict[str, list[float]] = Field(description="The same interval per category.")
    ci_reason: str | None = Field(default=None, description="Why overall_ci is null (fewer than two distinct "
                                                             "panelists); null when there is an interval.")
    rank: int | None = Field(description="1 + the ranked models whose overall_ci lies wholly above this one's; "
                                         "null when it has no interval.")


class Provisional(Closed):
    count: int = Field(description="Models scored by fewer panelists than the quorum: a count, never a number.")


class PairwiseEntry(Closed):
    """A model ranked by Bradley–Terry on pairwise preferences."""

    slug: str
    name: str
    strength: float | None = Field(description="Log-strength, centred within its scale; null (with a note) when the "
                                               "MLE is not finite.")
    ci: list[float] | None = Field(description="95% seeded bootstrap [lo, hi], every resample in one frame; null "
                                               "(with a note) when the data cannot support one.")
    scale: list[str] = Field(description="The models whose strengths share this one's scale (its component).")
    rank: int = Field(description="1 + the models of scales above its own + those of its own scale whose ci lies "
                                  "wholly above its.")
    n_comparisons: int
    note: str | None = None


class PairwiseBoard(Closed):
    ranked: list[PairwiseEntry]
    provisional: Provisional
    quorum: int
    ranking: str


class PanelBoard(Closed):
    ranked: list[PanelEntry]
    provisional: Provisional
    quorum: int
    ranking: str
    pairwise: PairwiseBoard


class ApplicationView(Closed):
    id: str
    email: str
    specialty: str
    years_experience: int
    statement: str
    applied_at: str
    status: str = Field(description="pending | approved | rejected (the latest decision)")
    reviewed_at: str | None
    reviewed_by: str | None


class RunView(Closed):
    run: str
    model: str
    environment: str
    artifact_url: str
    status: str
    n_scorecards: int
    created_at: str
    assay_run: str | None = Field(None, description="the Assay run this panel run scored, when it names one")


class ModelRegistered(Closed):
    model: str = Field(description="The model's slug.")
    name: str
    vendor: str


class EnvironmentRegistered(Closed):
    environment: str = Field(description="The environment's slug.")
    name: str


class RunCreated(Closed):
    given_only = frozenset({"assay_run"})

    run: str
    status: Literal["pending"]
    assay_run: str | None = Field(None, description="The Assay run it scores, when it names one.")


class ScoreRecorded(Closed):
    run: str
    scorecard: int = Field(description="The scorecard's id.")
    status: Literal["pending"]
    ratings: dict[str, float] = Field(description="Category → rating, as recorded.")


class RunFinalized(Closed):
    run: str
    status: Literal["scored"]


class PreferenceRecorded(Closed):
    preference: int = Field(description="The preference's id.")
    run_a: str
    run_b: str
    preferred: Literal["a", "b", "tie"]


IngestResult = ModelRegistered | EnvironmentRegistered | RunCreated | ScoreRecorded | RunFinalized | PreferenceRecorded


class ScorecardView(Closed):
    scorecard: int
    panelist_email: str | None
    ratings: dict[str, float]
    comment: str
    minutes: int
    recorded_at: str


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema with its `$defs` written in place, for `openapi_extra`."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items() if k != "discriminator"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": _inline(schema)}}}}


async def json_object(request: Request) -> dict[str, Any]:
    """The request body as one JSON object (the service validates its fields)."""
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise Invalid("the body is not valid JSON", "body") from None
    if not isinstance(body, dict):
        raise Invalid("the body is one JSON object", "body")
    return body


@router.post("/panel/applications", status_code=201, response_model=Created, tags=["panel"],
             summary="Apply to the human panel (the same answer whether or not the email applied before)",
             openapi_extra=_body(panel.Application.model_json_schema()), responses=error_responses(422))
def apply(payload: dict[str, Any] = Depends(json_object), store: Store = Depends(get_store),
          actor: Actor = Depends(public_actor)) -> Any:
    return panel.apply(store, payload, actor=actor)


@router.get("/panel/applications", response_model=list[ApplicationView], tags=["panel"],
            summary="Every panel application with its decision (admin session)", responses=error_responses(401, 403))
def list_applications(session: AdminSession = Depends(admin_session), store: Store = Depends(get_store)) -> Any:
    return panel.applications(store, actor=session.actor)


def _decide(decision: str) -> Callable[..., Any]:  # a route function
    def decide(application_id: str, session: AdminSession = Depends(admin_change),
               store: Store = Depends(get_store)) -> Any:
        return panel.review(store, application_id, decision, actor=session.actor, by=session.admin_id)

    decide.__name__ = f"{decision}_application"
    return decide


for _decision in ("approve", "reject"):
    router.add_api_route(f"/panel/applications/{{application_id}}/{_decision}", _decide(_decision),
                         methods=["POST"], response_model=ApplicationView, tags=["panel"],
                         summary=f"{_decision.capitalize()} a panel application (admin session + X-CSRF-Token)",
                         responses=error_responses(401, 403, 404))


@router.get("/benchmark/categories", response_model=list[CategoryView], tags=["benchmark"],
            summary="The evaluation categories panelists rate runs in")
def list_categories(store: Store = Depends(get_store)) -> Any:
    return panel.categories(store)


@router.get("/benchmark/leaderboard", response_model=PanelBoard, tags=["benchmark"],
            summary="The panel board: ranked models (quorum met) and the provisional count")
def leaderboard(store: Store = Depends(get_store), actor: Actor = Depends(public_actor)) -> Any:
    return panel.board(store, actor=actor)


@router.post("/benchmark/ingest", tags=["benchmark"],
             summary="One step of the ingest state machine, selected by `action` (admin session + X-CSRF-Token)",
             openapi_extra=_body(TypeAdapter(panel.IngestStep).json_schema()), response_model=IngestResult,
             responses={200: {"description": "The step's result."}, **error_responses(401, 403, 404, 409, 422)})
def ingest(session: AdminSession = Depends(admin_change), payload: dict[str, Any] = Depends(json_object),
           store: Store = Depends(get_store)) -> Any:
    return panel.ingest(store, payload, actor=session.actor, by=session.admin_id)


@router.get("/benchmark/runs", response_model=list[RunView], tags=["benchmark"],
            summary="Every panel run with its status (admin session)", responses=error_responses(401, 403))
def list_runs(session: AdminSession = Depends(admin_session), store: Store = Depends(get_store)) -> Any:
    return panel.runs(store, actor=session.actor)


@router.get("/benchmark/runs/{run}/scorecards", tags=["benchmark"], response_model=list[ScorecardView],
            summary="A run's scorecards, history included (admin session)", responses=error_responses(401, 403, 404))
def run_scorecards(run: str, session: AdminSession = Depends(admin_session), store: Store = Depends(get_store)) -> Any:
    return panel.scorecards(store, run, actor=session.actor)
