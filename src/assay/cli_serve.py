"""`assay serve`, `assay key` and `assay play`: the service's commands (issue 10).

`assay.cli` calls `register(app)`.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the service's commands to `app`."""
    from assay.cli_play import register as register_play

    register_play(app)
