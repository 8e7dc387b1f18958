"""The options that say how a `python:` agent is played (`run`, `submit`, `resume`, `play`).

A `python:` agent is played in a bubblewrap sandbox (`assay.agents.sandbox`): these options name
what it gets from outside (environment variables, memory), and `--in-process` (run only) plays it
in the harness's own process for debugging.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import typer

from assay.errors import BadInput

AgentEnvOpt: Any = typer.Option(
    None, "--agent-env", metavar="NAME",
    help="Pass the environment variable NAME (its value here) to a python: agent's sandbox; repeatable, "
         "e.g. --agent-env OPENAI_API_KEY for an agent that calls a model. The sandbox has no other "
         "variables but PATH, HOME and LANG (never ASSAY_DB or a key you did not name).")
AgentMemoryOpt: Any = typer.Option(
    None, "--agent-memory", metavar="SIZE",
    help="Address-space limit of a python: agent's process: bytes, or with a K, M or G suffix (default 2G). "
         "Past it the agent's allocations fail (its run is crashed) and its process is replaced.")
InProcessFlag: Any = typer.Option(
    False, "--in-process",
    help="Play a python: agent in this process, unsandboxed, to debug it (breakpoints, pdb). It can then read "
         "everything this process can; the batch is marked so and can never be submitted.")

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)


def memory_bytes(text: Optional[str]) -> Optional[int]:
    """`--agent-memory` in bytes (None: the default)."""
    if text is None:
        return None
    match = _SIZE.match(text)
    if match is None:
        raise BadInput("is a size in bytes, or with a K, M or G suffix (e.g. 512M, 2G)", f"--agent-memory {text}")
    unit = (match.group(2) or "b")[0].lower()
    return int(match.group(1)) * {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit]


def agent_options(agent_env: Optional[list[str]], agent_memory: Optional[str]) -> dict[str, Any]:
    """The loader options these flags stand for (only those given)."""
    options: dict[str, Any] = {}
    if agent_env:
        options["agent_env"] = tuple(agent_env)
    memory = memory_bytes(agent_memory)
    if memory is not None:
        options["agent_memory"] = memory
    return options


def refuse_unsandboxed(spec: str, what: str) -> None:
    """Refuse a `python:` agent where bwrap is missing, before anything is loaded or stored."""
    if spec.startswith("python:"):
        from assay.agents import sandbox

        if sandbox.find_bwrap() is None:
            raise BadInput(sandbox.missing_line(what), "--agent")


def warn_unsandboxed(factory: Any) -> None:
    """One line on stderr when a python: agent runs without its sandbox (bwrap is missing)."""
    from assay.agents import sandbox
    from assay.cli.ui import err

    if getattr(factory, "isolation", None) == "subprocess":
        err.print(f"assay: warning: bwrap is not installed, so the python: agent runs in a plain subprocess, "
                  f"not sandboxed (Debian: apt-get install {sandbox.PACKAGE})", markup=False, highlight=False,
                  soft_wrap=True)


def protect_local(suite_source: Optional[str], db: Optional[str]) -> None:
    """Hide a suite given as a path, and a store named by --db, from the agent's sandbox."""
    from pathlib import Path

    from assay.agents import sandbox

    if suite_source:
        path = Path(suite_source)
        if path.exists():
            sandbox.protect(path if path.is_dir() else path.parent)
    sandbox.protect_store(db)

MaxCostOpt: Any = typer.Option(
    None, "--max-cost", min=0.0, metavar="USD",
    help="Stop starting runs once the next one would push the batch's spend past USD (its model usage at "
         "the prices of `assay config price`; a model with no price stops it). Recorded runs stay; the rest "
         "stay pending for `assay resume`.")


def say_cost_cap(budget: Any, store: Any, batch_id: str) -> None:
    """One stderr line: the batch stopped at its cost cap, what it spent, and how to go on."""
    from assay.store.runs_repo import RunsRepo
    from assay.cli.ui import err

    left = RunsRepo(store).batch_listing()
    listing = next((b for b in left if b.id == batch_id), None)
    pending = "" if listing is None else f"; {listing.n_planned - listing.n_recorded} runs left pending"
    err.print(f"assay: stopped starting runs at --max-cost: {budget.stopped}{pending} "
              f"(`assay resume {batch_id}` plays them)", markup=False, highlight=False, soft_wrap=True)
