"""Building the app: one store per process, the routers, and the error mapping.

Domain errors from `service/` become JSON `{"detail": …}` with 404/409/403/422 (DESIGN.md,
Errors); nothing else a route raises may reach the client as a stack trace or a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI


@dataclass(frozen=True)
class Settings:
    """What `assay serve` hands the app: where the store is and the server's secret."""

    db_url: str | None
    secret: bytes
    body_limit: int = 1 << 20


def create_app(settings: Settings) -> FastAPI:
    from assay.web import agent_api, api, pages, submissions_api

    app = FastAPI(title="Assay", version="1")
    app.state.settings = settings
    app.include_router(api.router)
    app.include_router(submissions_api.router)
    app.include_router(agent_api.router)
    app.include_router(pages.router)
    return app
