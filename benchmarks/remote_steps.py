"""Remote play's server side without HTTP (issue 26, item 3): agents in threads of one process
playing remote forge runs through `service.remote` (what `POST /api/agent/runs/{id}/step` calls),
so the figures are the store's and the engine's, not the web stack's or a client's.

    PYTHONPATH=src python benchmarks/remote_steps.py [--backend sqlite|postgresql|both]
                                                     [--agents 1,8,32] [--seconds 8] [--json FILE] [--asgi]

Each agent has its own account and remote forge submission and plays `reference:diligent`'s
answers, lease after lease, until `--seconds` have passed (the run in play is finished). Printed
per backend and agent count: steps/s over the wall time, the process's CPU per step (robust to a
loaded machine), its share of one core, and the write transactions per step (a lease's and a
completion's included, spread over the steps). Compare two commits
by running this file with each one's `src` on `PYTHONPATH`, one after the other.

`--asgi` adds, per backend, one agent playing the same way through the web app in this process
(httpx's ASGI transport, the play lane run inline, one thread, the key checked as the routes check
it) and the same agent through the service alone: the difference of their CPU per step is the web
stack's share of a step (issue 26), without a socket, a server process or a loaded event loop.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from assay.agents.loader import load_agent  # noqa: E402
from assay.run.engine import Limits  # noqa: E402
from assay.service import accounts, releases, remote, submissions  # noqa: E402
from assay.service.actors import OPERATOR, account_actor, agent_of  # noqa: E402
from assay.store import Store, open_store  # noqa: E402


def measure(store: Store, agents: int, seconds: float, tag: str) -> dict[str, Any]:
    names = [f"{tag}-agent{i}" for i in range(agents)]
    for name in names:
        accounts.create(store, name, name, actor=OPERATOR)
        submissions.compose(store, "forge", factory=remote.remote_factory(), account=name, label="bench",
                            limits=Limits(turn_limit=40, time_limit=600.0), actor=account_actor(name))
    factory = load_agent("reference:diligent")
    steps, writes, guard = [0], [0], threading.Lock()

    def on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get(Store.WRITE_OPTION):
            with guard:
                writes[0] += 1

    def play(name: str, stop: float) -> None:
        actor = agent_of(name)
        while time.monotonic() < stop:
            lease = remote.next_run(store, actor=actor)
            if lease is None:
                return
            agent, history, index = factory(), list(lease["messages"]), lease["step"]
            while True:
                message = agent(history, lease["tools"])
                answer = remote.step(store, lease["run_id"], message, actor=actor, index=index)
                with guard:
                    steps[0] += 1
                history = [*history, message, *answer["messages"]]
                if answer["done"]:
                    break
                index += 1

    sa.event.listen(store.engine, "begin", on_begin)
    began, cpu = time.monotonic(), time.process_time()
    threads = [threading.Thread(target=play, args=(name, began + seconds)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, used = time.monotonic() - began, time.process_time() - cpu
    sa.event.remove(store.engine, "begin", on_begin)
    n = max(1, steps[0])
    return {"steps": steps[0], "seconds": round(wall, 1), "per_s": round(steps[0] / wall, 1),
            "cpu_ms_per_step": round(1000 * used / n, 2), "cpu_share": round(used / wall, 2),
            "writes_per_step": round(writes[0] / n, 2)}


def one_agent(store: Store, seconds: float, tag: str, asgi: bool) -> dict[str, Any]:
    """One agent, sequentially, through the web app in process (`asgi`) or the service alone."""
    import asyncio

    import anyio.to_thread
    import httpx

    from assay.service import keys
    from assay.web.app import Settings, create_app

    secret = b"remote-steps-benchmark-secret-" + b"s" * 16
    accounts.create(store, tag, tag, actor=OPERATOR)
    key = keys.create(store, tag, "agent", secret, actor=OPERATOR)[1]
    for _ in range(3):
        submissions.compose(store, "forge", factory=remote.remote_factory(), account=tag, label="bench",
                            limits=Limits(turn_limit=40, time_limit=600.0), actor=account_actor(tag))
    factory, auth = load_agent("reference:diligent"), {"Authorization": f"Bearer {key}"}
    app = create_app(Settings(db_url=None, secret=secret, rate_limit=0), store=store)

    async def inline(func: Any, *args: Any, limiter: Any = None, **_: Any) -> Any:
        return func(*args)  # the play lane in this thread: one thread, so all its CPU is counted

    async def via_app(stop: float) -> int:
        steps = 0
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            while time.monotonic() < stop:
                response = await client.post("/api/agent/runs/next", headers=auth)
                if response.status_code == 204:
                    break
                lease = response.json()
                agent, history, index = factory(), list(lease["messages"]), lease["step"]
                while True:
                    message = agent(history, lease["tools"])
                    answer = (await client.post(f"/api/agent/runs/{lease['run_id']}/step",
                                                json={"step": index, "message": message}, headers=auth)).json()
                    steps += 1
                    history = [*history, message, *answer["messages"]]
                    if answer["done"]:
                        break
                    index += 1
        return steps

    def via_service(stop: float) -> int:
        steps = 0
        while time.monotonic() < stop:
            lease = remote.next_run(store, actor=keys.authenticate(store, secret, key, "agent"))
            if lease is None:
                break
            agent, history, index = factory(), list(lease["messages"]), lease["step"]
            while True:
                message = agent(history, lease["tools"])
                answer = remote.step(store, lease["run_id"], message, index=index,
                                     actor=keys.authenticate(store, secret, key, "agent"))
                steps += 1
                history = [*history, message, *answer["messages"]]
                if answer["done"]:
                    break
                index += 1
        return steps

    real = anyio.to_thread.run_sync
    anyio.to_thread.run_sync = inline  # type: ignore[assignment]
    try:
        began, cpu = time.monotonic(), time.process_time()
        n = asyncio.run(via_app(began + seconds)) if asgi else via_service(began + seconds)
        used = time.process_time() - cpu
    finally:
        anyio.to_thread.run_sync = real  # type: ignore[assignment]
    return {"steps": n, "cpu_ms_per_step": round(1000 * used / max(1, n), 2)}


def run(url: str, counts: list[int], seconds: float, asgi: bool = False) -> dict[str, Any]:
    store = open_store(url)
    try:
        releases.bootstrap(store)
        found: dict[str, Any] = {str(n): measure(store, n, seconds, f"a{n}") for n in counts}
        if asgi:
            found["1 via the app"] = one_agent(store, seconds, "viaapp", True)
            found["1 via the service"] = one_agent(store, seconds, "viaservice", False)
        return found
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--agents", default="1,8,32", help="Agent counts, comma-separated.")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--asgi", action="store_true", help="Also one agent through the web app in process, "
                        "and through the service alone (the web stack's CPU per step).")
    args = parser.parse_args()
    counts = [int(n) for n in args.agents.split(",")]
    results: dict[str, Any] = {}
    for kind in (("sqlite", "postgresql") if args.backend == "both" else (args.backend,)):
        if kind == "sqlite":
            with tempfile.TemporaryDirectory(prefix="assay-remote-steps-") as tmp:
                results[kind] = run(f"sqlite:///{tmp}/steps.db", counts, args.seconds, args.asgi)
        else:
            from tests.support.own_pg import own_pg

            with own_pg() as server:
                results[kind] = run(server.url("postgres"), counts, args.seconds, args.asgi)
        for n, found in results[kind].items():
            if n.startswith("1 via"):
                print(f"{kind:10} {n}: {found['cpu_ms_per_step']:>6} ms/step over {found['steps']} steps")
                continue
            print(f"{kind:10} agents {n:>3}: {found['per_s']:>7} steps/s  cpu {found['cpu_ms_per_step']:>6} ms/step  "
                  f"cpu share {found['cpu_share']:.2f}  write transactions/step {found['writes_per_step']}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
