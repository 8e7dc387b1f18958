"""`assay mcp SUITE_OR_FILE`: a stdio MCP server that plays one run of a batch per session (issue 28).

A desktop MCP client (or a local agent built on an MCP client) launches `assay mcp forge`; the
process claims the next pending run of the batch (`service.mcp_play.batch_for`: the newest
unfinished MCP batch of that suite with the same trials, seed and limits, else a new one), serves
its world over stdio until the client goes, and exits. The next launch plays the next run. Stdout
is the protocol: every word of ours goes to stderr.
"""

from __future__ import annotations

from typing import Optional

import typer

from assay.cli.errors import StoreRetryOpt
from assay.cli.ui import DbOpt


def mcp(
    suite: str = typer.Argument(..., metavar="SUITE_OR_FILE",
                                help="Built-in suite key (forge), a suite file, a scenario file or directory."),
    trials: int = typer.Option(3, "--trials", min=1, max=10000, help="Trials per case (of a new batch)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Run seed; in-run chance derives from it, the case and the trial."),
    time_limit: float = typer.Option(600.0, "--time-limit", min=0.01,
                                     help="Seconds the client may take in all between its tool calls (a model thinks "
                                          "between them); past it the run is a timeout."),
    turn_limit: int = typer.Option(40, "--turn-limit", min=1, help="Tool calls per run."),
    label: Optional[str] = typer.Option(None, "--label", help="Agent label of a new batch (default: mcp)."),
    new: bool = typer.Option(False, "--new", help="Start a new batch even when an unfinished one matches."),
    db: Optional[str] = DbOpt,
    store_retry: Optional[float] = StoreRetryOpt,
) -> None:
    """Serve one run of a batch to an MCP client over stdio: the world's tools plus finish, the briefing as instructions.

    Each tool call is one step of the run; finish ends it, and it is recorded and scored like any other (`assay results BATCH`). Launch again for the next run of the same batch (same suite, --trials, --seed and limits); a client that goes away before finish leaves its run pending for the next launch."""
    import anyio

    from assay.errors import BadInput
    from assay.run.engine import Limits
    from assay.service.mcp_play import LocalPlay, batch_for
    from assay.service.suites import resolve_suite
    from assay.cli.ui import err, open_store_at

    bundle = resolve_suite(suite)
    store = open_store_at(db)
    limits = Limits(turn_limit=turn_limit, time_limit=time_limit)
    batch_id, created = batch_for(store, bundle, trials=trials, seed=seed, limits=limits, label=label, new=new)
    play = LocalPlay.start(store, batch_id)
    if play is None:
        raise BadInput(f"every pending run of batch {batch_id} is being played by another session; "
                       "start a new batch with --new", suite)
    planned = play.planned
    err.print(f"assay mcp: {'new ' if created else ''}batch {batch_id}: run {planned.run_id} ({planned.case_id}, "
              f"trial {planned.trial}) · store {store.url}", markup=False, highlight=False, soft_wrap=True)
    try:
        anyio.run(_serve, play)
    finally:
        play.close()
    err.print(f"assay mcp: run {planned.run_id}: {play.status}", markup=False, highlight=False, soft_wrap=True)


async def _serve(play: object) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from assay.service.mcp_play import LocalPlay, mcp_server

    assert isinstance(play, LocalPlay)
    server = mcp_server(lambda _ctx: play)
    async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
        async def watch() -> None:  # a client that stays away past the run's time: a timeout
            while True:
                await anyio.sleep(1.0)
                await anyio.to_thread.run_sync(play.expire_if_due)

        tasks.start_soon(watch)
        await server.run(read, write, server.create_initialization_options())
        tasks.cancel_scope.cancel()


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
