"""The public JSON API, and the agents' suite index: suites, versions, releases, boards, cards.

Every route is a thin shell over `service/`: it names its caller's `Actor` (the public, or an
agent from its key) and the service decides what that actor may see. So an internal suite is a
404 here exactly as a suite that does not exist, an unlisted version opens by its URL but is not
in the index, and the board is the very text `assay board KEY --json` prints (no seed, ever).

The card is served as JSON (`{"key", "version", "markdown"}`) by default, and as the Markdown
itself (`text/markdown`) to a client that asks for it with `Accept: text/markdown`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from assay.service import catalog, releases
from assay.service.actors import PUBLIC, Actor
from assay.service.board import MAX_PAGE, board_json, entry
from assay.service.cards import card
from assay.store.db import Store
from assay.web import edge
from assay.web.deps import agent_actor, get_store, public_actor
from assay.web.schemas import Board, Card, PublishedEntry, SuiteRelease, SuiteSummary, SuiteVersion, error_responses

router = APIRouter(prefix="/api", responses=error_responses(429, 500))

MARKDOWN = "text/markdown; charset=utf-8"


@router.get("/suites", response_model=list[SuiteSummary], tags=["suites"],
            summary="The public suites, each at its latest public version")
def list_suites(store: Store = Depends(get_store), actor: Actor = Depends(public_actor)) -> Any:
    return catalog.suites(store, actor=actor)


@router.get("/agent/suites", response_model=list[SuiteSummary], tags=["suites"],
            summary="The suites an agent may play: public and unlisted, never internal",
            responses=error_responses(401))
def list_agent_suites(store: Store = Depends(get_store), actor: Actor = Depends(agent_actor)) -> Any:
    return catalog.suites(store, actor=actor)


@router.get("/suites/{key}/versions", response_model=list[SuiteVersion], tags=["suites"],
            summary="A suite's versions, oldest first, with their scenario hash prefixes",
            responses=error_responses(404))
def suite_versions(key: str, store: Store = Depends(get_store), actor: Actor = Depends(public_actor)) -> Any:
    return releases.versions(store, key, actor=actor)


@router.get("/suites/{key}/{version}", response_model=SuiteRelease, tags=["suites"],
            summary="One suite version: everything its release pins", responses=error_responses(404))
def suite_release(key: str, version: str, store: Store = Depends(get_store),
                  actor: Actor = Depends(public_actor)) -> Any:
    return releases.release_view(store, releases.find_release(store, key, version, actor=actor))


@router.get("/suites/{key}/{version}/card", tags=["suites"], response_model=Card,
            summary="A suite version's eval card (JSON, or Markdown with Accept: text/markdown)",
            responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}, **error_responses(404)})
async def suite_card(key: str, version: str, request: Request) -> Any:
    def produce() -> Response:
        text = card(get_store(request), key, version, actor=PUBLIC)
        if wants_markdown(request.headers.get("accept", "")):
            return Response(text, media_type=MARKDOWN)
        return _json(Card, {"key": key, "version": version, "markdown": text})

    return await edge.read(request, produce)


def _json(model: type[BaseModel], value: Any) -> Response:
    """`value` as the route's response model serialises it (what FastAPI would send)."""
    return JSONResponse(jsonable_encoder(model.model_validate(value)))


def wants_markdown(accept: str) -> bool:
    """Whether an Accept header asks for Markdown rather than JSON (JSON wins a tie, and `*/*`)."""
    kinds = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return "text/markdown" in kinds and "application/json" not in kinds


@router.get("/leaderboard/{key}", tags=["boards"], response_model=Board,
            summary="A suite version's public board: exactly what `assay board KEY --json` prints",
            responses=error_responses(404))
async def leaderboard(key: str, request: Request,
                      version: str | None = Query(None, description="Suite version (default: the latest public one)."),
                      limit: int | None = Query(None, ge=1, le=MAX_PAGE,
                                                description="At most this many entries (a page; default: every entry)."),
                      cursor: str | None = Query(None, max_length=200,
                                                 description="Where the page starts: a previous page's `page.next_cursor`."),
                      q: str | None = Query(None, max_length=200,
                                            description="Only entries whose public handle or label contains this.")
                      ) -> Response:
    def produce() -> Response:
        return Response(board_json(get_store(request), key, version, actor=PUBLIC, limit=limit, cursor=cursor,
                                   search=q), media_type="application/json")

    return await edge.read(request, produce)


@router.get("/entries/{submission_id}", tags=["boards"], response_model=PublishedEntry,
            summary="One published entry by its full submission id, listed or unlisted",
            responses=error_responses(404))
async def published_entry(submission_id: str, request: Request) -> Any:
    return await edge.read(request, lambda: _json(PublishedEntry, entry(get_store(request), submission_id,
                                                                         actor=PUBLIC)))
