"""Submission routes for submitters (API key): create, list, owner view, unpublish (issue 10).

A thin shell over `service.submissions`, like `assay submit`: the caller's account submits as
itself, and the server composes the batch (every scenario × rep, its own seeds) — the submitter
chooses no run and no seed. The agent is either `"remote"` (an agent of the account plays the runs
over the agent routes, `agent_api`) or a model the server drives itself (`{"spec": "openai:MODEL",
"base_url": …}`), played in background workers (`web.workers`) after the 201.

Refusals: a suite the caller may not see is 404; the cap is 409; `publish` without a public handle
is 422 (the service calls it a conflict with the account's state; to a client it is a request that
cannot be honoured as sent); a malformed field is 422. Another account's submission is 404.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from assay.errors import Conflict, Invalid
from assay.records import storable
from assay.service import batches, remote, submissions
from assay.service.actors import Actor
from assay.store.db import Store
from assay.web import workers
from assay.web.deps import api_actor, get_store
from assay.web.schemas import TRAIT_KEYS, Closed, EntryJudge, error_responses
from assay.store.runs_repo import RunsRepo


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the background workers (resuming what a stopped server left), stop them at the end."""
    pool = app.state.workers = workers.Workers(app.state.store)
    pool.resume_in_background()
    try:
        yield
    finally:
        pool.close()


router = APIRouter(prefix="/api/submissions", tags=["submissions"], lifespan=_lifespan,
                   responses=error_responses(401, 429, 500))


# -- request and response models ------------------------------------------------------------------


def _text(value: Any) -> Any:
    """Text a database can hold, as the run records make it (`records.storable`): a NUL or a lone
    surrogate becomes U+FFFD (PostgreSQL refuses both; a refusal would echo them back)."""
    return storable(value) if isinstance(value, str) else value


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return _text(value)


class ModelAgent(_Request):
    """A model behind an OpenAI-compatible endpoint, which the server drives itself."""

    spec: str = Field(pattern=r"^openai:\S{1,200}$", description="`openai:MODEL`.", examples=["openai:gpt-4.1-mini"])
    base_url: str | None = Field(None, max_length=2000, pattern=r"^https?://\S+$",
                                 description="The endpoint (default: the server's `OPENAI_BASE_URL`); only one the "
                                             "server offers (`ASSAY_MODEL_ENDPOINTS`), since the server's own "
                                             "`OPENAI_API_KEY` is sent there; a key is never part of a submission.")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None:
            from urllib.parse import urlsplit

            value = _text(value)
            try:
                parts = urlsplit(value)
                parts.port  # noqa: B018 - raises for a port that is not one
            except ValueError as exc:
                raise ValueError(f"not a URL: {exc}") from None
            if not parts.hostname:
                raise ValueError("a URL names a host")
        return value


class SubmissionRequest(_Request):
    suite: str = Field(min_length=1, max_length=200, description="Suite key.", examples=["forge"])
    version: str | None = Field(None, min_length=1, max_length=100,
                                description="Suite version (default: the latest public one).")
    label: str = Field(min_length=1, max_length=submissions.MAX_LABEL,
                       description="Agent label (self-declared, shown as such).")
    play_model: str | None = Field(None, max_length=200, description="The model used, self-reported (unverified).")
    publish: bool = Field(False, description="Publish once complete (the account needs a public handle).")
    agent: Literal["remote"] | ModelAgent = Field(
        description='`"remote"`: an agent of the account plays the runs over `/api/agent/runs/…`; or a model the '
                    "server plays itself.")


class SuiteRef(Closed):
    key: str
    version: str


class AgentRef(Closed):
    spec: str | None
    label: str
    label_self_declared: bool = True
    config_signature: str | None


class SubmissionCreated(Closed):
    """A composed submission: its runs are all pending (a remote agent asks for them)."""

    id: str
    suite: SuiteRef
    agent: AgentRef
    remote: bool = Field(description="Whether a remote agent plays it (over the agent routes).")
    status: str = Field(description="`pending` until every run is played and swept.")
    n_planned: int


class SubmissionListed(Closed):
    id: str
    account: str
    suite: str
    version: str
    label: str
    status: str = Field(description="`complete` | `incomplete` once finalised, `pending` before.")
    n_planned: int
    n_recorded: int
    n_scored: int
    created_at: str


class TraitPass(Closed):
    pass_: int = Field(alias="pass", description="The judge's pass, from 1.")
    score: int | float | None
    rationale: str | None

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class RunTrait(Closed):
    mean: float | None
    variance: float | None
    passes: list[TraitPass]


class OwnerRun(Closed):
    given_only = frozenset({"traits"})

    run_id: str
    scenario: str
    rep: int
    seed: int = Field(description="The run's seed: the owner's view shows it, the public board never does.")
    status: str
    scored: bool | None
    score: int | None
    passed: bool | None
    claimed_success: bool | None
    false_success: bool | None
    seed_salt: str | None = Field(description="The salt of the run's seed commitment (the owner may open it).")
    seed_commitment: str | None
    reason: str | None = Field(description="Why the run did not complete, when it did not.")
    participation_gated: bool | None
    win_conditions_met: int | None
    win_conditions_total: int | None
    player_messages: int | None
    actions: int | None
    traits: dict[str, RunTrait] | None = Field(None, description="Trait suites only: per trait its mean, variance "
                                                                  "and passes.")


class OwnerSuite(Closed):
    key: str
    version: str
    release_hash: str


class OwnerView(Closed):
    """The owner's view of a submission (what `assay submit --json` writes)."""

    given_only = TRAIT_KEYS

    id: str
    suite: OwnerSuite
    account: str
    agent: AgentRef
    status: str
    leaderboard_class: str | None
    published: bool | None
    n_planned: int
    n_recorded: int
    runs: list[OwnerRun]
    harness_version: str | None
    play_model: str | None
    model_provenance: str | None
    byok: bool | None
    baseline: bool | None
    publish_requested: bool | None
    listed: bool | None
    on_board: bool
    public_handle: str | None
    rank: int | None
    n_runs: int
    pass_rate: float | None
    consistency: float | None
    false_success_rate: float | None
    objective_met_rate: float | None
    n_scored: int
    n_gated: int
    measurement_era: str | None
    measurement_era_is_current: bool | None
    finalised: bool | None
    digest: str | None
    variance_note: str | None
    facilitator_models: list[str]
    pinned_facilitator_model: str | None
    created_at: str
    composite: float | None = Field(None, description="Trait suites only (as on the board).")
    traits: dict[str, float | None] | None = None
    safety: dict[str, float | None] | None = None
    trait_n: dict[str, int] | None = None
    stability: str | None = None
    safety_variance_n: dict[str, int] | None = None
    safety_variance_range: dict[str, float] | None = None
    safety_variance_stddev: dict[str, float] | None = None
    judge: EntryJudge | None = None


def offered_endpoints() -> list[str]:
    """The model endpoints this server drives agents at: `ASSAY_MODEL_ENDPOINTS` (comma-separated
    base URLs), else its own `OPENAI_BASE_URL`. The server sends its own key to them, so a
    submitter may name only these — never an address of their choosing (the key would go there)."""
    named = os.environ.get("ASSAY_MODEL_ENDPOINTS") or os.environ.get("OPENAI_BASE_URL") or ""
    return [u.strip().rstrip("/") for u in named.split(",") if u.strip()]


def _require_offered(base_url: str | None) -> None:
    if base_url is not None and base_url.rstrip("/") not in offered_endpoints():
        raise Invalid("this server does not drive models at that endpoint (it would send its own key there); "
                      "name one of ASSAY_MODEL_ENDPOINTS, or omit base_url", "base_url")


# -- routes -----------------------------------------------------------------------------------


@router.post("", status_code=201, response_model=SubmissionCreated,
             summary="Submit an agent: the server composes every scenario × rep of the suite version",
             responses=error_responses(404, 409, 422))
def create_submission(body: SubmissionRequest, request: Request, store: Store = Depends(get_store),
                      actor: Actor = Depends(api_actor)) -> Any:
    if isinstance(body.agent, ModelAgent):
        from assay.agents.loader import load_agent

        _require_offered(body.agent.base_url)
        factory = load_agent(body.agent.spec, base_url=body.agent.base_url)
    else:
        factory = remote.remote_factory()
    assert actor.account is not None
    try:
        submission_id = submissions.compose(
            store, body.suite, factory=factory, account=actor.account, label=body.label, version=body.version,
            play_model=body.play_model, publish=body.publish, actor=actor)
    except Conflict as exc:
        if exc.field == "publish":  # the account has no public handle: the request cannot be honoured
            raise Invalid(exc.message, "publish") from None
        raise
    if isinstance(body.agent, ModelAgent):
        workers.for_app(request.app).play(submission_id)
    batch = RunsRepo(store).batch(submission_id)
    assert batch is not None
    return {
        "id": submission_id,
        "suite": {"key": batch.suite_key, "version": batch.suite_version},
        "agent": {"spec": batch.agent_spec, "label": batch.agent_label, "label_self_declared": True,
                  "config_signature": batch.config_signature},
        "remote": not isinstance(body.agent, ModelAgent),
        "status": "pending",
        "n_planned": len(RunsRepo(store).planned_runs(submission_id)),
    }


@router.get("", response_model=list[SubmissionListed], summary="The caller's own submissions, newest first")
def list_submissions(store: Store = Depends(get_store), actor: Actor = Depends(api_actor)) -> Any:
    return batches.list_submissions(store, actor=actor)


@router.get("/{submission_id}", response_model=OwnerView, responses=error_responses(404),
            summary="The owner's view of a submission: status, figures, and every run with its seed")
def submission_view(submission_id: str, store: Store = Depends(get_store), actor: Actor = Depends(api_actor)) -> Any:
    return submissions.results(store, _ident(submission_id), actor=actor)


@router.post("/{submission_id}/unpublish", response_model=OwnerView, responses=error_responses(404, 409),
             summary="Take a submission off the public board (or stop its publication on completion)")
def unpublish(submission_id: str, store: Store = Depends(get_store), actor: Actor = Depends(api_actor)) -> Any:
    return submissions.unpublish(store, _ident(submission_id), actor=actor)


def _ident(submission_id: str) -> str:
    """A submission id (or prefix) as a path gave it, as text a database can hold (a NUL or a lone
    surrogate names no submission either way)."""
    return _text(submission_id)
