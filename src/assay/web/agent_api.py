"""Remote play routes (agent key): lease the next run, then send it one assistant message a step.

    POST /api/agent/runs/next              → 200 {run_id, submission_id, scenario, messages, tools,
                                              limits, step: 1, pending} · 204 when nothing is pending
    POST /api/agent/runs/{run_id}/step     {"step": N, "message": {assistant message}}
                                           → {run_id, step, messages, done, status}
    POST /api/agent/runs/{run_id}/release  → {run_id, released, step}: the agent stopped; the run is
                                              pending again at once, nothing recorded or charged

A thin shell over `service.remote`; the engine decides everything (a malformed message is the
run's `empty`, an unknown tool a tool error, a late answer a `timeout`). `step` numbers the
answers of a run from 1 and makes a retry safe: the same step sent again is answered again, never
applied twice. A bare assistant message as the body (no `message` key) is taken as the message.
Only the key's own account's runs exist for it; an API key is refused here like no key. A key found
valid is taken on trust for `deps.KEY_RECHECK_SECONDS` (5 s) before it is read again, so a revoked
agent key is refused here within that time (the other routes refuse it at once).

Play has its own lane (issue 26): the routes run in `web.edge.Lanes.play`, a thread pool public
reads never use, and a step is charged from the server's last answer to the step's arrival
(`web.edge.Arrival`), so time a request waits in the server is never the agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.records import STATUSES
from assay.service import remote
from assay.service.actors import Actor
from assay.store.db import Store
from assay.store import schema as store_schema
from assay.web.deps import agent_scheme, verified_keys
from assay.web.edge import ARRIVED, Answered
from assay.web.schemas import Closed, error_responses

router = APIRouter(prefix="/api/agent/runs", tags=["remote play"], responses=error_responses(401, 429, 500))

RunStatus = Literal["running", "completed", "timeout", "turn_limit", "crashed", "empty", "error"]
assert set(RunStatus.__args__) == {"running", *STATUSES}  # type: ignore[attr-defined]


class FunctionCall(Closed):
    name: str
    arguments: str = Field(description="The arguments as JSON text, as the agent sent them.")


class ToolCall(Closed):
    """One tool call of an assistant message (OpenAI chat format)."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(Closed):
    """One message of the conversation, in the OpenAI chat format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class ToolParameter(Closed):
    given_only = frozenset({"enum"})

    type: str = Field(description="Its JSON Schema type (`string`, `integer`, …).")
    description: str
    enum: list[str] | None = Field(None, description="The values it may take, when they are few.")


class ToolParameters(Closed):
    """A tool's parameters, as a JSON Schema object."""

    type: Literal["object"]
    properties: dict[str, ToolParameter]
    required: list[str]
    additionalProperties: bool  # noqa: N815 - the JSON Schema keyword


class ToolFunction(Closed):
    name: str
    description: str
    parameters: ToolParameters


class ToolSchema(Closed):
    """One tool the agent may call (an OpenAI function tool); `finish` ends the run."""

    type: Literal["function"]
    function: ToolFunction


class ScenarioBrief(Closed):
    """What the agent may know of its scenario besides the messages (never its hidden truth or checks)."""

    id: str
    title: str
    briefing: str


class RunLimits(Closed):
    turn_limit: int = Field(description="Assistant messages the run may take before it ends as `turn_limit`.")
    time_limit: float = Field(description="Seconds the agent may take in all, counted from each answer (or the "
                                          "lease) to the next step; past it the run is a `timeout`.")


class RunLease(Closed):
    """A run leased to the caller: the opening of its conversation, its tools and its limits."""

    run_id: str
    submission_id: str
    scenario: ScenarioBrief
    messages: list[ChatMessage]
    tools: list[ToolSchema] = Field(description="OpenAI function-tool schemas; `finish` ends the run.")
    limits: RunLimits
    step: int = Field(description="The number of the first answer (1).")
    pending: int = Field(description="Runs of the account's remote submissions still waiting for an agent.")


class StepRequest(BaseModel):
    """One answer of the agent. `message` is one assistant message of the agent protocol
    (`{"role": "assistant", "content": …, "tool_calls": [...]}`), sent as the agent gave it: what is
    not a usable message ends the run as `empty`, exactly as in-process. `step` is the answer's
    number (the lease's `step`, then one more each time): a retry of a step is answered again, never
    applied twice. `error` instead of a message says the agent failed on its side: the run is
    `crashed` with that reason. Without `message`, the body itself is taken as the message."""

    model_config = ConfigDict(extra="allow")

    step: int | None = Field(None, ge=1, le=1_000_000, description="The answer's 1-based number in the run.")
    message: Any = Field(None, description="One assistant message of the agent protocol.")
    error: str | None = Field(None, max_length=2000, description="The agent failed on its side (the run is `crashed`).")


class StepAnswer(Closed):
    run_id: str
    step: int | None = Field(description="The answer this replies to (None when the run was already over).")
    messages: list[ChatMessage] = Field(description="What followed the answer: tool results, a facilitator's words.")
    done: bool = Field(description="Whether the run is over; it is recorded and scored like any other.")
    status: RunStatus = Field(description="`running`, or the run's outcome once it is over.")
    reason: str | None = Field(None, description="Why a run that is over did not complete (`crashed`: the "
                               "failure the agent reported; `timeout`: the limit), else null.")


async def _play(request: Request, credentials: HTTPAuthorizationCredentials | None,
                work: Callable[[Store, Actor], Any]) -> Any:
    """`work` for the key's agent, in the play lane (`web.edge.Lanes.play`: never behind public
    reads), the key checked there too (`deps.VerifiedKeys`: a key checked within the last
    `deps.KEY_RECHECK_SECONDS` is not read again)."""
    app = request.app
    presented = credentials.credentials if credentials is not None else None
    verified = verified_keys(app)

    def run() -> Any:
        store: Store = app.state.store
        return work(store, verified.authenticate(store, app.state.settings.secret, presented, "agent"))

    return await anyio.to_thread.run_sync(run, limiter=app.state.lanes.play)


def _clock(request: Request) -> datetime:
    clock = getattr(request.app.state, "clock", None)
    return (clock or store_schema.utcnow)()  # looked up each time: a test may set the store's clock


@router.post("/next", response_model=RunLease, summary="Lease the next pending run of the account's remote submissions",
             responses={204: {"description": "No run is pending."}, **error_responses(403)})
async def next_run(request: Request,
                   credentials: HTTPAuthorizationCredentials | None = Depends(agent_scheme)) -> Any:
    lease = await _play(request, credentials, lambda store, actor: remote.next_run(store, actor=actor))
    if lease is None:
        return Response(status_code=204)
    request.app.state.answered.put(lease["run_id"], 0, _clock(request), False)
    return lease


async def _step(run_id: str, body: StepRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None) -> Any:
    answered: Answered = request.app.state.answered
    now, answered_at = request.scope.get(ARRIVED), answered.get(run_id)
    if body.error is not None:
        failure = body.error
        answer = await _play(request, credentials, lambda store, actor: remote.step(
            store, run_id, actor=actor, index=body.step, failure=failure, now=now, answered_at=answered_at))
    else:
        message = body.message if "message" in body.model_fields_set else dict(body.model_extra or {})
        answer = await _play(request, credentials, lambda store, actor: remote.step(
            store, run_id, message, actor=actor, index=body.step, now=now, answered_at=answered_at))
    answered.put(run_id, answer["step"], _clock(request), answer["done"])
    return answer


def _bearer(request: Request) -> HTTPAuthorizationCredentials | None:
    """The bearer credentials of `Authorization`, read as `HTTPBearer(auto_error=False)` reads them
    (no header, another scheme or nothing after it: None)."""
    authorization = request.headers.get("authorization")
    if not authorization:
        return None
    scheme, _, presented = authorization.partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        return None
    return HTTPAuthorizationCredentials(scheme=scheme, credentials=presented)


def _json_body(request: Request) -> bool:
    kind = request.headers.get("content-type", "").strip().lower()
    return kind == "application/json" or kind.startswith("application/json;")


class LeanStepRoute(APIRoute):
    """The step route without FastAPI's per-request machinery (issue 26: a step is asked hundreds
    of times a second, and dependency solving, body and response validation through FastAPI's
    layers, and its JSON encoding were most of a step's server CPU over HTTP).

    A JSON body that `StepRequest` accepts is validated by pydantic from the bytes
    (`model_validate_json`), the key read as `HTTPBearer` reads it, and the answer validated by
    `StepAnswer` and encoded by pydantic in one call: the same model, status and bytes. Anything
    else (another content type, a body the model refuses) goes to FastAPI's own handler, so every
    refusal is FastAPI's, word for word. The route, its models and its security scheme are
    declared as for any route: `/openapi.json` is unchanged."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        fastapi_handler = super().get_route_handler()

        async def handler(request: Request) -> Response:
            if not _json_body(request):
                return await fastapi_handler(request)
            try:
                body = StepRequest.model_validate_json(await request.body())
            except ValidationError:
                return await fastapi_handler(request)  # the refusal FastAPI words (the body is cached)
            answer = await _step(request.path_params["run_id"], body, request, _bearer(request))
            return Response(StepAnswer.model_validate(answer).model_dump_json().encode(),
                            media_type="application/json")

        return handler


async def step(run_id: str, body: StepRequest, request: Request,
               credentials: HTTPAuthorizationCredentials | None = Depends(agent_scheme)) -> Any:
    # what FastAPI's own handler runs (see `LeanStepRoute`); no docstring: it would become the
    # operation's description in /openapi.json
    return await _step(run_id, body, request, credentials)


router.add_api_route("/{run_id}/step", step, methods=["POST"], response_model=StepAnswer,
                     responses=error_responses(404, 409, 422), route_class_override=LeanStepRoute,
                     summary="Send a leased run the agent's next assistant message")


class ReleaseAnswer(Closed):
    run_id: str
    released: bool = Field(description="Whether a lease was ended (false: the run was not leased, or is over).")
    step: int = Field(description="The number of the run's next answer; its next lease starts there.")


@router.post("/{run_id}/release", response_model=ReleaseAnswer, responses=error_responses(404),
             summary="Hand a leased run back: it is pending again at once, nothing recorded")
async def release(run_id: str, request: Request,
                  credentials: HTTPAuthorizationCredentials | None = Depends(agent_scheme)) -> Any:
    request.app.state.answered.put(run_id, None, _clock(request), True)
    return await _play(request, credentials, lambda store, actor: remote.release(store, run_id, actor=actor))
