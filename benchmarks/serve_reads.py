"""Board reads by a crowd, driven by wrk (issue 26's read targets): one `assay serve` worker, a forge
board of `--entries` entries, 64 keep-alive clients per route.

    PYTHONPATH=src python benchmarks/serve_reads.py [--backend sqlite|postgresql|both]
                                                    [--entries 100] [--seconds 10] [--clients 16,64]
                                                    [--workers 1] [--threads 2]

wrk (Debian's package) is a C client: unlike `serve_load.py`'s Python readers it costs the 2-core
machine little, so what is measured is the server. Each route is read for `--seconds` per client
count after one warming request; each line gives requests/s, latency p50/p90/p99 (wrk's
`--latency`), the non-2xx count and the server's CPU per request (user+sys of the worker
processes, from /proc). The rate limit is off (`ASSAY_RATE_LIMIT=0`) and the in-flight cap at its
default, as in `serve_load.py`; a 503 from the cap counts as non-2xx.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import httpx  # noqa: E402
import serve_load  # noqa: E402

ROUTES = ("/suites/forge", "/api/leaderboard/forge", "/api/entries/{id}")


def _seconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def wrk(url: str, clients: int, seconds: float, threads: int) -> dict[str, float]:
    """One wrk run: requests/s, p50/p90/p99 seconds, non-2xx responses and socket errors."""
    out = subprocess.run(["wrk", f"-t{min(threads, clients)}", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency",
                          "--timeout", "10s", url], capture_output=True, text=True, check=True).stdout
    found: dict[str, float] = {"per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}  # type: ignore[union-attr]
    for pct in ("50", "90", "99"):
        found[f"p{pct}"] = _seconds(re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    found["requests"] = float(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    found["non2xx"] = float(non2xx.group(1)) if non2xx else 0.0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    found["errors"] = float(sum(int(g) for g in errors.groups())) if errors else 0.0
    return found


def run(kind: str, url: str, entries: int, seconds: float, clients: list[int], workers: int,
        threads: int) -> list[str]:
    _, entry_id = serve_load.build(url, entries, 0)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = serve_load.serve(url, Path(tmp) / "serve.log", workers)
        try:
            for route in ROUTES:
                path = route.replace("{id}", entry_id)
                assert httpx.get(base + path, timeout=60).status_code == 200, path  # warm: computed once
                for n in clients:
                    cpu0 = serve_load.cpu_seconds(proc.pid)
                    found = wrk(base + path, n, seconds, threads)
                    cpu = serve_load.cpu_seconds(proc.pid) - cpu0
                    line = (f"{kind:<10} {route:<24} @{n:<3} {found['per_s']:8.1f} req/s  p50 {found['p50'] * 1e3:7.1f} ms"
                            f"  p90 {found['p90'] * 1e3:7.1f} ms  p99 {found['p99'] * 1e3:7.1f} ms"
                            f"  non-2xx {int(found['non2xx'])}  errors {int(found['errors'])}"
                            f"  cpu/req {cpu / max(found['requests'], 1) * 1e3:5.2f} ms")
                    print(line, flush=True)
                    lines.append(line)
        finally:
            proc.terminate()
            proc.wait(30)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="16,64")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="wrk's threads")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("serve_reads: wrk is not installed (Debian: apt-get install wrk)")
    import signal

    import board_scale

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still stops its PostgreSQL
    clients = [int(c) for c in args.clients.split(",")]
    for kind in (("sqlite", "postgresql") if args.backend == "both" else (args.backend,)):
        with board_scale.backend(kind) as url:
            run(kind, url, args.entries, args.seconds, clients, args.workers, args.threads)


if __name__ == "__main__":
    main()
