"""The sandbox's cost: a scripted `python:` agent played in process vs in its bubblewrap sandbox.

    python benchmarks/sandbox.py [--runs 300] [--workers 4] [--json]

Both sides play the same batch of forge (the agent is the scripted `diligent` reference agent,
loaded as a user's `python:` file, so every step is a real turn of the protocol), one after the
other, each on its default executor (in process: threads; sandboxed: async over the worker
pool), with scoring and SQLite storage included. Also measured: one worker's start-up (bwrap,
the interpreter, the agent's import) and the bare round trip of one turn through a worker.

Prints a table: runs/s, agent steps/s, wall time per step for each side, the sandbox's extra
cost per step, worker starts and the start-up time. Needs bwrap (Debian: bubblewrap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

AGENT = '''"""The scripted diligent reference agent, as a user's python: agent file."""
from assay.agents.reference import Diligent as Agent
'''


def _play(spec: str, runs: int, workers: int, in_process: bool, root: Path) -> dict:
    from assay.agents import sandbox
    from assay.agents.loader import load_agent
    from assay.run.engine import Limits
    from assay.service.runs import run_suite
    from assay.store import open_store

    url = f"sqlite:///{root / ('inproc' if in_process else 'sandbox')}.db"
    sandbox.protect_store(url)  # as the CLI does before loading the agent (its workers never see it)
    store = open_store(url)
    try:
        factory = load_agent(spec, in_process=in_process)
        start = time.perf_counter()
        result = run_suite("forge", factory=factory, trials=math.ceil(runs / 5), workers=workers, store=store,
                           limits=Limits(turn_limit=40, time_limit=60.0))
        took = time.perf_counter() - start
    finally:
        store.close()
    n, steps = result.n_runs, result.n_steps
    return {"isolation": factory.isolation, "runs": n, "steps": steps, "seconds": round(took, 3),
            "runs_per_s": round(n / took, 1), "steps_per_s": round(steps / took, 1),
            "ms_per_step": round(1000 * took / max(1, steps), 4),
            "workers_started": factory.pool.started if factory.pool is not None else 0}


def _worker_costs(spec: str, turns: int = 500) -> dict:
    from assay.agents import sandbox
    from assay.agents.loader import load_agent

    factory = load_agent(spec)
    starts = []
    for _ in range(5):
        began = time.perf_counter()
        worker = factory.pool.spawn()
        worker.start_sync()
        starts.append(time.perf_counter() - began)
        factory.pool.keep(worker)

    async def round_trips() -> float:
        agent = sandbox.SandboxedAgent(factory.pool)
        await agent.aopen()
        messages = [{"role": "user", "content": "Two alerts are open on web-01. " * 20}]
        began = time.perf_counter()
        for _ in range(turns):
            await agent(messages, [])
        agent.close()
        return (time.perf_counter() - began) / turns

    per_turn = asyncio.run(round_trips())
    factory.close()
    return {"worker_start_ms": round(1000 * sorted(starts)[len(starts) // 2], 1),
            "round_trip_us": round(1e6 * per_turn, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    from assay.agents import sandbox

    if sandbox.find_bwrap() is None:
        sys.exit(sandbox.missing_line("benchmarks/sandbox.py"))
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        root = Path(tmp)
        agent = root / "agent.py"
        agent.write_text(AGENT)
        spec = f"python:{agent}:Agent"
        sides = {name: _play(spec, args.runs, args.workers, name == "in process", root)
                 for name in ("in process", "sandboxed")}
        echo = root / "echo.py"
        echo.write_text("def agent(messages, tools):\n    return {'role': 'assistant', 'content': 'ok'}\n")
        costs = _worker_costs(f"python:{echo}:agent")
    inproc, boxed = sides["in process"], sides["sandboxed"]
    extra_us = 1000 * (boxed["ms_per_step"] - inproc["ms_per_step"])
    figures = {"sides": sides, **costs, "extra_us_per_step": round(extra_us, 1), "workers": args.workers}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"forge, {inproc['runs']} runs, --workers {args.workers}, scripted python: agent (diligent)")
    print(f"{'':12}{'runs/s':>10}{'steps/s':>10}{'ms/step':>10}{'workers':>9}")
    for name, side in sides.items():
        print(f"{name:12}{side['runs_per_s']:>10}{side['steps_per_s']:>10}{side['ms_per_step']:>10}"
              f"{side['workers_started']:>9}")
    print(f"sandbox: +{extra_us:.0f} us per step; a turn's round trip {costs['round_trip_us']} us; "
          f"a worker starts in {costs['worker_start_ms']} ms (once per worker, not per run)")


if __name__ == "__main__":
    main()
