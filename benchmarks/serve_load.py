"""Load on one `assay serve` worker (issue 26): board reads by a crowd, and remote play alone and
while the crowd reads.

    PYTHONPATH=src python benchmarks/serve_load.py [--backend sqlite|postgresql|both]
                                                   [--entries 100] [--seconds 5] [--json FILE]
                                                   [--parts reads,play,slow] [--workers N]

What it builds: a forge board of `--entries` entries (one played submission copied in bulk, as
`benchmarks/board_scale.py` builds its boards), accounts with agent keys and remote forge
submissions for the agents to play; then it starts `assay serve` (one worker, the rate limit off,
the default cap in flight) on 127.0.0.1 and drives it with asyncio httpx clients:

* reads: `--seconds` of `/suites/forge`, `/api/leaderboard/forge` and `/api/entries/{id}` by 16
  and 64 clients each (keep-alive, no conditional headers: every answer is a 200 body), giving
  req/s and p50/p95/p99 latency, and the share refused (503 past the cap);
* play: 1, 8 and 32 agents playing remote runs as `assay play` does (lease, step until done;
  each step's answer is `reference:diligent`'s message), steps/s and step p50/p95/p99, alone
  and while 64 clients read `/suites/forge` (wrk in its own process by default; `--readers python`: httpx readers in this one).

Figures go to stdout side by side with the issue's previous ones (wrk, same machine, before).
PostgreSQL is a throwaway cluster started as the tests start theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import httpx  # noqa: E402

from assay.agents.loader import load_agent  # noqa: E402
from assay.run.engine import Limits  # noqa: E402
from assay.service import accounts, keys, releases, remote, submissions  # noqa: E402
from assay.service.actors import OPERATOR, account_actor  # noqa: E402
from assay.store import open_store  # noqa: E402

SECRET = "serve-load-benchmark-secret-" + "s" * 32
#: The issue's figures (one worker, 102 entries, before): (what, clients) -> (req/s, p50 s).
PREVIOUS = {("reads /suites/forge", 16): "11-15 req/s, p50 1.0 s", ("reads /suites/forge", 64): "11-15 req/s, p50 5.7 s",
            ("play", 1): "40-70 steps/s, p50 0.006 s", ("play", 32): "40-70 steps/s",
            ("play+64 readers", 32): "0.73 runs/s (~3 steps/s), p50 7.2 s"}


#: Transport errors (a keep-alive connection the server closed as it was reused): retried, counted.
ERRORS: list[str] = []


async def _send(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """A request, retried (3 times at most) on a transport error; a step is safe to send again
    (the same step index is answered again, never applied twice)."""
    for attempt in range(3):
        try:
            return await client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            ERRORS.append(f"{method} {path}: {type(exc).__name__}")
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process `pid` and its live descendants so far, in seconds
    (Linux `/proc`): the server's cost, which a loaded machine slows but does not inflate."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    used: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        used[int(entry)] = int(fields[11]) + int(fields[12])
    total, todo = 0, [pid]
    while todo:
        at = todo.pop()
        total += used.get(at, 0)
        todo.extend(children.get(at, []))
    return total / tick


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(latencies: list[float], seconds: float, refused: int = 0) -> dict[str, Any]:
    return {"n": len(latencies), "seconds": round(seconds, 1), "per_s": round(len(latencies) / seconds, 1),
            "refused": refused,
            "p50": round(_pct(latencies, 0.50), 4), "p95": round(_pct(latencies, 0.95), 4),
            "p99": round(_pct(latencies, 0.99), 4)}


async def _reader(client: httpx.AsyncClient, path: str, stop: float, out: list[float], refused: list[int],
                  done: asyncio.Event | None = None) -> None:
    while time.monotonic() < stop and not (done is not None and done.is_set()):
        start = time.monotonic()
        response = await _send(client, "GET", path)
        if response.status_code == 503:
            refused.append(1)
            await asyncio.sleep(0.05)
            continue
        assert response.status_code == 200, (path, response.status_code)
        out.append(time.monotonic() - start)


async def reads(base: str, path: str, clients: int, seconds: float) -> dict[str, Any]:
    out: list[float] = []
    refused: list[int] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        began = time.monotonic()
        stop = began + seconds
        await asyncio.gather(*(_reader(client, path, stop, out, refused) for _ in range(clients)))
        wall = time.monotonic() - began  # the last requests end after `stop`
    return _summary(out, wall, len(refused))


async def _agent(client: httpx.AsyncClient, key: str, stop: float, out: list[float], runs: list[str],
                 think: float = 0.0, once: bool = False) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    factory = load_agent("reference:diligent")
    while time.monotonic() < stop:
        lease = await _send(client, "POST", "/api/agent/runs/next", headers=auth)
        if lease.status_code == 204:
            return
        assert lease.status_code == 200, lease.text
        body = lease.json()
        agent, history, index = factory(), list(body["messages"]), body["step"]
        while True:
            message = agent(history, body["tools"])
            if think:
                await asyncio.sleep(think)  # the agent's own time: the only time it is charged
            start = time.monotonic()
            answer = await _send(client, "POST", f"/api/agent/runs/{body['run_id']}/step",
                                 json={"step": index, "message": message}, headers=auth)
            out.append(time.monotonic() - start)
            assert answer.status_code == 200, answer.text
            value = answer.json()
            history = [*history, message, *value["messages"]]
            if value["done"]:
                runs.append(value["status"])
                break
            index += 1
        if once:
            return


#: Who reads while agents play: "wrk" (a C client in its own process: the server is measured, not
#: this process's event loop) when installed, else "python" (httpx readers in this process).
READERS = "wrk"


def _wrk_start(base: str, readers: int) -> subprocess.Popen[str]:
    return subprocess.Popen(["wrk", "-t1", f"-c{readers}", "-d3600s", "--latency", "--timeout", "30s",
                             base + "/suites/forge"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wrk_stop(proc: subprocess.Popen[str], wall: float) -> dict[str, Any]:
    """Stop wrk (SIGINT: it prints its summary) and read its requests and latency percentiles."""
    import re
    import signal as _signal

    proc.send_signal(_signal.SIGINT)
    out = proc.communicate(timeout=60)[0]

    def seconds(text: str) -> float:
        number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
        return round(float(number) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit], 4)

    n = re.search(r"(\d+) requests in", out)
    found: dict[str, Any] = {"n": int(n.group(1)) if n else 0, "seconds": round(wall, 1), "client": "wrk"}
    found["per_s"] = round(found["n"] / wall, 1)
    for pct, name in (("50", "p50"), ("90", "p90"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        found[name] = seconds(m.group(1)) if m else None
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    found["refused"] = int(non2xx.group(1)) if non2xx else 0
    return found


async def play(base: str, agent_keys: list[str], agents: int, seconds: float, readers: int = 0,
               think: float = 0.0, server: int | None = None) -> dict[str, Any]:
    out: list[float] = []
    runs: list[str] = []
    read_out: list[float] = []
    refused: list[int] = []
    limits = httpx.Limits(max_connections=agents + readers + 4, max_keepalive_connections=agents + readers + 4)
    cpu = cpu_seconds(server) if server is not None else None
    client_cpu = time.process_time()
    use_wrk = bool(readers) and READERS == "wrk"
    wrk = _wrk_start(base, readers) if use_wrk else None
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:
        began = time.monotonic()
        stop = began + seconds
        once = think > 0  # slow agents: one run each, the readers until the last one ends
        tasks = [_agent(client, agent_keys[i % len(agent_keys)], stop, out, runs, think, once) for i in range(agents)]
        if wrk is not None:
            await asyncio.gather(*tasks)
        elif once:
            done = asyncio.Event()

            async def agents_then_stop() -> None:
                await asyncio.gather(*tasks)
                done.set()

            async def read_until_done() -> None:
                await _reader(client, "/suites/forge", float("inf"), read_out, refused, done)

            await asyncio.gather(agents_then_stop(), *(read_until_done() for _ in range(readers)))
        else:
            tasks += [_reader(client, "/suites/forge", stop, read_out, refused) for _ in range(readers)]
            await asyncio.gather(*tasks)
        wall = time.monotonic() - began  # an agent finishes the run it is in after `stop`
    found = _summary(out, wall)
    if cpu is not None and server is not None and out:
        # the server's CPU per step (reads included when readers run): what a quiet machine's
        # throughput follows, measured on a loaded one
        found["server_cpu_ms_per_step"] = round(1000 * (cpu_seconds(server) - cpu) / len(out), 2)
    if out:  # this process's (the client's) CPU per step: when it nears the wall time, the client is the limit
        found["client_cpu_ms_per_step"] = round(1000 * (time.process_time() - client_cpu) / len(out), 2)
        found["client_cpu_share"] = round((time.process_time() - client_cpu) / wall, 2)
    found["runs"] = len(runs)
    found["timeouts"] = runs.count("timeout")
    if wrk is not None:
        found["reads"] = _wrk_stop(wrk, wall)
    elif readers:
        found["reads"] = _summary(read_out, wall, len(refused))
    return found


def build(url: str, entries: int, n_agents: int) -> tuple[list[str], str]:
    """The board, the agents' keys (one account each) and their remote submissions; returns the keys
    and one entry's id."""
    import board_scale

    store = open_store(url)
    try:
        releases.bootstrap(store)
        accounts.create(store, "bench", "Bench", actor=OPERATOR)
        template_id = submissions.submit(store, "forge", factory=load_agent("reference:diligent"), account="bench",
                                         label="template", workers=2, publish=True, actor=OPERATOR)
        board_scale.grow(store, board_scale._template(store, template_id), entries - 1, "bench")
        agent_keys = []
        for i in range(n_agents):
            account = f"agent{i}-{uuid.uuid4().hex[:6]}"
            accounts.create(store, account, account, actor=OPERATOR)
            agent_keys.append(keys.create(store, account, "agent", SECRET.encode(), actor=OPERATOR)[1])
            for _ in range(3):
                submissions.compose(store, "forge", factory=remote.remote_factory(), account=account, label="remote",
                                    limits=Limits(turn_limit=40, time_limit=600.0), actor=account_actor(account))
        return agent_keys, template_id
    finally:
        store.close()


def serve(url: str, log: Path, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ASSAY_SECRET": SECRET, "ASSAY_RATE_LIMIT": "0", "ASSAY_DB": url}
    exe = Path(sys.executable).parent / "assay"
    proc = subprocess.Popen([str(exe), "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", str(workers)], env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/openapi.json", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"assay serve did not start: {log.read_text()[-2000:]}")


def run(kind: str, url: str, entries: int, seconds: float, parts: set[str], workers: int = 1) -> dict[str, Any]:
    agent_keys, entry_id = build(url, entries, 32)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = serve(url, Path(tmp) / "serve.log", workers)
        try:
            found: dict[str, Any] = {}
            if parts & {"play", "slow"}:
                # first use costs (imports, statement compiles, scenarios parsed) are not a step's:
                # one agent plays 2 s, unmeasured, before anything is measured (the `play @1` row
                # of runs before this showed twice the CPU per step of a second pass)
                asyncio.run(play(base, agent_keys[-1:], 1, 2.0))
            for path in () if "reads" not in parts else ("/suites/forge", "/api/leaderboard/forge", f"/api/entries/{entry_id}"):
                for clients in (16, 64):
                    name = f"reads {path if 'entries' not in path else '/api/entries/{id}'}"
                    found[f"{name} @{clients}"] = asyncio.run(reads(base, path, clients, seconds))
                    print(f"  {kind} {name} @{clients}: {found[f'{name} @{clients}']}", file=sys.stderr)
            for agents in () if "play" not in parts else (1, 8, 32):
                found[f"play @{agents}"] = asyncio.run(play(base, agent_keys, agents, seconds, server=proc.pid))
                print(f"  {kind} play @{agents}: {found[f'play @{agents}']}", file=sys.stderr)
            for agents in () if "play" not in parts else (8, 32):
                found[f"play+64 readers @{agents}"] = asyncio.run(play(base, agent_keys, agents, seconds, readers=64,
                                                                         server=proc.pid))
                print(f"  {kind} play+64 readers @{agents}: {found[f'play+64 readers @{agents}']}", file=sys.stderr)
            if "slow" in parts:
                found["slow agents (1 s) +256 readers @8"] = asyncio.run(
                    play(base, agent_keys, 8, seconds, readers=256, think=1.0, server=proc.pid))
                print(f"  {kind} slow: {found['slow agents (1 s) +256 readers @8']}", file=sys.stderr)
            return found
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--parts", default="reads,play", help="What to measure: reads, play, slow (comma-separated).")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers of the server (assay serve --workers).")
    parser.add_argument("--readers", choices=("wrk", "python"), default="wrk",
                        help="Who reads while agents play: wrk (its own process; the default when installed) "
                             "or httpx readers in this process (the figures before wrk).")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    global READERS
    import shutil

    READERS = args.readers if shutil.which("wrk") else "python"
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still stops its PostgreSQL
    import board_scale

    results = {}
    for kind in (("sqlite", "postgresql") if args.backend == "both" else (args.backend,)):
        with board_scale.backend(kind) as url:
            results[kind] = run(kind, url, args.entries, args.seconds, parts, args.workers)
    names = list(next(iter(results.values())))
    print(f"{'measure':44} " + "  ".join(f"{k:>40}" for k in results) + "   previous (issue 26)")
    for name in names:
        cells = []
        for kind in results:
            v = results[kind][name]
            cells.append(f"{v['per_s']:>7}/s p50 {v['p50']:.3f} p95 {v['p95']:.3f} p99 {v['p99']:.3f}"
                         + (f" runs {v['runs']} to {v['timeouts']}" if "runs" in v else "")
                         + (f" cpu {v['server_cpu_ms_per_step']} ms/step" if "server_cpu_ms_per_step" in v else ""))
        prev = next((p for (what, n), p in PREVIOUS.items() if name.startswith(what) and name.endswith(f"@{n}")), "")
        print(f"{name:44} " + "  ".join(f"{c:>40}" for c in cells) + f"   {prev}")
    print(f"transport errors retried: {len(ERRORS)} {sorted(set(ERRORS))[:5]}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
