"""`assay play --server URL --agent SPEC`: play every pending remote run of the key's account with a
local agent over the HTTP API (issue 10). `assay.cli_serve` calls `register(app)`.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `assay play` to `app`."""
