"""agent_api routes (issue 10)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
