"""Submission routes for submitters (API key): create, list, owner view, unpublish (issue 10)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
