"""Latency benchmark: Assay vs Inspect AI against a model endpoint with a fixed latency.

    python benchmarks/latency.py [--quick] [--skip-inspect] [--only assay|inspect]
                                 [--workers C] [--latency S] [--sizes LO,HI[,...]]

(`make bench-latency` runs it with the project's .venv.)

What it measures. With a model that takes exactly L seconds per call and C runs in flight, a
harness can at best complete C / L runs per second. ``latency_server.py`` is such a model: a
stdlib-asyncio OpenAI-compatible server that answers every chat completion after L seconds with
a call to ``finish``, so one Assay run is exactly one model call. It runs as its own process
(one per latency setting, never inside a measured process), and its ``/stats`` counters
(requests, peak in-flight, connections, how late responses left) are read after every
measurement so the figures can be checked against what the server actually saw.

Assay side: ``assay run forge --agent openai:bench-model --base-url http://127.0.0.1:PORT/v1
--workers C --trials T --db sqlite:///<fresh tmp>/x.db --output <tmp>/results.json
[--executor async]`` as a subprocess, ``OPENAI_API_KEY=sk-bench``. Forge has 5 cases, so one
measurement of R runs is ``--trials R/5``. ``--executor async`` is passed only when
``assay run --help`` lists it (the engine rewrite adds it); otherwise the run goes without it
and the output says so. A refusal by the CLI (e.g. ``--workers`` above its cap) is reported
with the CLI's own message, and the driver carries on. A point only counts when the CLI exited
0, every planned run ended ``completed`` in the results JSON, and the server answered exactly R
chat completions (no retries, no lost calls).

Throughput at the margin. The wall time of one ``assay run`` includes interpreter start-up,
imports, store creation and migrations, and the results table; none of that depends on R. So
the rate reported is ``(R_hi - R_lo) / (wall(R_hi) - wall(R_lo))``: the cost of the extra runs
only. Efficiency is that rate divided by the ideal C / L. Sizes are multiples of C, so every
measurement is whole waves of C concurrent calls and the ideal margin time is exactly
``(R_hi - R_lo) / C * L``:

* C=100, L=0.5 s (ideal 200 runs/s): 100 and 500 runs (1 and 5 waves; the margin spans 4 waves,
  2.0 s ideal). The same server also serves 1,000 and 10,000 runs (Assay only) for the memory
  figures below; ``--quick`` skips 10,000 (that one is >= 50 s even at the ideal rate).
* C=1000, L=2 s (ideal 500 runs/s): 1,000 and 3,000 runs (1 and 3 waves; the margin spans 2
  waves, 4.0 s ideal). Fewer than 1,000 runs could not fill C=1000 at all, and a margin of less
  than two waves would be dominated by the ramp-up and the tail of a single wave.

Cross-checks printed beside the margin. The server stamps the first request's arrival and the
last response, so each point's wall time splits into start-up (process start to first model
call), window (first call to last response) and tail (last response to exit), on one clock.
"window runs/s" is the same margin taken over the windows instead of the wall times: it is
immune to start-up jitter (on a busy 2-core machine start-up varies by a second, which is half
the ideal margin at C=100), but blind to per-run work done before the first call or after the
last one, so the two should agree and the wall-time figure is the one that counts. "client CPU
ms/run" is the extra CPU time (user + system, from wait4) per extra run: multiplied by the ideal
rate it says how many cores the harness would need to reach it (the ideal 500 runs/s leaves a
2-core machine 4 ms of CPU per run, for harness, HTTP client and server together). "server CPU
ms/run" is the same for the latency server, read from /proc.

``--workers``/``--latency`` replace both settings by one custom setting (defaults 100 and
0.5 s), measured at ``--sizes`` (default C and 5C, rounded up to a multiple of 5); the first two
sizes form the margin, further sizes are Assay-only extra points.

Peak memory. Each measured process is started with ``subprocess.Popen`` and reaped by this
driver with ``os.wait4(pid)``, whose ``ru_maxrss`` is the peak resident set of *that* process
(on Linux: the maximum over it and any descendants it reaped, never a sum), exactly what
``/usr/bin/time -f %M`` would print, with no dependence on GNU time being installed.
``getrusage(RUSAGE_CHILDREN)`` is not used: it is a running maximum over every child this
driver ever reaped, so after the first big run every later figure would be that one's. While the
process runs, its process tree is also sampled from ``/proc`` every 0.25 s (sum of ``VmRSS`` over
the tree, thread count), which would show if a run ever spread over several processes, and how
many threads it used. The target is RSS(500 runs) / RSS(100 runs) <= 1.25 at C=100, L=0.5 s:
memory must not grow with the number of runs; RSS at 1,000 and 10,000 runs is reported too.

Inspect side (where it installs): ``benchmarks/.venv-inspect``, created with ``pip install
inspect-ai`` when missing and reused when present (as ``throughput.py`` does; the ``openai``
package, which Inspect's OpenAI provider needs, is added to it when missing).
``inspect_latency.py`` runs there: N samples, each one ``openai/bench-model`` call to the same
server, one tool (``finish``) offered, ``max_connections`` = ``max_samples`` = C. Same sizes (the
margin pair), same margin method, on the process's wall time minus the script's own post-run
log verification. If Inspect cannot be installed or run, the reason is printed and the Assay
figures are still reported.

Output: a table on stdout and the same figures in ``benchmarks/latency_results.json``
(machine, Python, date, Assay CLI capabilities, Inspect version, every measured point, the
margins, the memory series). Exit status 1 when an Assay measurement failed or was refused,
else 0 (an Inspect failure is reported, not fatal).

Caveats, on purpose visible in the output: the machine has 2 cores, and the server, the
measured process and this driver share them (the server's CPU seconds per point are reported so
its share is visible, and its "lag" says whether it ever answered late); each point is measured
once unless ``--repeat N`` (the median-time repeat is kept, all are recorded in the JSON).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import math
import os
import platform
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
SERVER = BENCH_DIR / "latency_server.py"
INSPECT_LATENCY = BENCH_DIR / "inspect_latency.py"
RESULTS_PATH = BENCH_DIR / "latency_results.json"
ASSAY = REPO_DIR / ".venv" / "bin" / "assay"

FORGE_CASES = 5
RSS_RATIO_MAX = 1.25
MODEL = "bench-model"
API_KEY = "sk-bench"
SAMPLE_INTERVAL = 0.25  # seconds between /proc samples of a measured process tree


def log(msg: str) -> None:
    print(f"[latency] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One (workers, latency) pair: the margin pair of sizes, plus Assay-only extra sizes."""

    workers: int
    latency: float
    lo: int
    hi: int
    extra: tuple[int, ...] = ()

    @property
    def ideal(self) -> float:
        return self.workers / self.latency

    @property
    def label(self) -> str:
        return f"C={self.workers}, L={self.latency:g}s"


def default_settings(quick: bool) -> list[Setting]:
    return [
        Setting(100, 0.5, 100, 500, (1000,) if quick else (1000, 10000)),
        Setting(1000, 2.0, 1000, 3000),
    ]


def _round5(n: int) -> int:
    return max(FORGE_CASES, math.ceil(n / FORGE_CASES) * FORGE_CASES)


# --------------------------------------------------------------------------
# The server process
# --------------------------------------------------------------------------


class LatencyServer:
    """``latency_server.py`` as a child process: started on a free port, stopped with SIGTERM."""

    def __init__(self, latency: float, log_path: Path) -> None:
        self.latency = latency
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.final: dict[str, Any] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LatencyServer:
        self._err = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", "0", "--latency", str(self.latency)],
            stdout=subprocess.PIPE, stderr=self._err, stdin=subprocess.DEVNULL, text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"latency server did not start (got {line!r}; see {self.log_path})")
        self.port = int(line.split()[1])
        log(f"server: latency {self.latency:g}s on 127.0.0.1:{self.port} (pid {self.proc.pid})")
        return self

    def stats(self, reset: bool = False) -> dict[str, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", "/stats?reset=1" if reset else "/stats")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def cpu_seconds(self) -> float | None:
        assert self.proc is not None
        return _proc_cpu_seconds(self.proc.pid)

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
            for line in out.splitlines():
                if line.startswith("STATS "):
                    self.final = json.loads(line[6:])
        self._err.close()


def _proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process, from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------
# Measuring one child process
# --------------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    """pid and all its descendants, from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                try:
                    todo.extend(int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split())
                except OSError:
                    pass
        except OSError:
            pass
    return out


def _sample_tree(pid: int) -> tuple[int, int, int]:
    """(sum of VmRSS in kB, threads, processes) over the tree rooted at pid."""
    rss = threads = procs = 0
    for p in _tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        procs += 1
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return rss, threads, procs


@dataclass
class Measured:
    returncode: int
    seconds: float
    maxrss_kb: int
    user_s: float
    sys_s: float
    tree_rss_kb_max: int
    threads_max: int
    procs_max: int
    timed_out: bool
    start_wall: float  # time.time() just before Popen, to line up with the server's clock
    end_wall: float  # time.time() when wait4 returned
    stdout: str
    stderr: str


def run_measured(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> Measured:
    """Run cmd, reap it with os.wait4 for its own rusage, sample its tree from /proc meanwhile.

    The wall time runs from just before Popen to the moment wait4 returns (in a waiter thread, so
    the /proc sampling never delays it). stdout/stderr go to files, so a chatty child can never
    block on a full pipe.
    """
    out_path, err_path = cwd / "stdout.txt", cwd / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start_wall = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        reaped: dict[str, Any] = {}

        def waiter() -> None:
            _, status, usage = os.wait4(proc.pid, 0)
            reaped["t"] = time.perf_counter()
            reaped["wall"] = time.time()
            reaped["status"], reaped["usage"] = status, usage

        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        rss_max = threads_max = procs_max = 0
        timed_out = False
        while thread.is_alive():
            rss, threads, procs = _sample_tree(proc.pid)
            rss_max, threads_max, procs_max = max(rss_max, rss), max(threads_max, threads), max(procs_max, procs)
            thread.join(SAMPLE_INTERVAL)
            if thread.is_alive() and not timed_out and time.perf_counter() - t0 > timeout:
                timed_out = True
                for p in reversed(_tree(proc.pid)):  # only the processes this run started
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
        thread.join()
    status, usage = reaped["status"], reaped["usage"]
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait
    return Measured(
        returncode=proc.returncode,
        seconds=reaped["t"] - t0,
        maxrss_kb=usage.ru_maxrss,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        tree_rss_kb_max=rss_max,
        threads_max=threads_max,
        procs_max=procs_max,
        timed_out=timed_out,
        start_wall=start_wall,
        end_wall=reaped["wall"],
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
    )


# --------------------------------------------------------------------------
# Points
# --------------------------------------------------------------------------


@dataclass
class Point:
    side: str  # "assay" | "inspect"
    workers: int
    latency: float
    runs: int
    ok: bool = False
    error: str | None = None
    seconds: float | None = None  # wall time used for the margin
    rate: float | None = None  # runs / seconds, start-up included
    peak_rss_mb: float | None = None
    tree_rss_mb_max: float | None = None
    threads_max: int | None = None
    procs_max: int | None = None
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    statuses: dict[str, int] | None = None
    server: dict[str, Any] | None = None
    # From the server's clock: process start -> first chat request (start-up), first request ->
    # last response (the window in which model calls happened), last response -> exit (tail).
    startup_s: float | None = None
    window_s: float | None = None
    tail_s: float | None = None
    server_window_rate: float | None = None  # requests / window_s
    detail: dict[str, Any] = field(default_factory=dict)
    repeats: list[dict[str, Any]] = field(default_factory=list)


def _timeout_for(runs: int, workers: int, latency: float, override: float | None) -> float:
    if override:
        return override
    ideal = math.ceil(runs / workers) * latency
    return max(180.0, 20 * ideal + 60)


def _fill_common(point: Point, m: Measured, server: LatencyServer, cpu0: float | None) -> str | None:
    """Resource and server figures for a finished measurement; an error text if the server is gone."""
    cpu1 = server.cpu_seconds()
    point.peak_rss_mb = m.maxrss_kb / 1024
    point.client_cpu_s = m.user_s + m.sys_s
    try:
        stats = server.stats(reset=True)
    except OSError as exc:
        return f"latency server unreachable after the run: {exc}"
    point.tree_rss_mb_max = m.tree_rss_kb_max / 1024
    point.threads_max, point.procs_max = m.threads_max, m.procs_max
    point.server_cpu_s = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    point.server = {k: stats[k] for k in ("requests", "max_in_flight", "connections", "chat_connections",
                                          "max_open_connections", "by_status", "lag_ms_mean", "lag_ms_max")}
    if stats["requests"] and stats["first_request"] and stats["last_response"]:
        point.startup_s = stats["first_request"] - m.start_wall
        point.window_s = stats["last_response"] - stats["first_request"]
        point.tail_s = m.end_wall - stats["last_response"]
        point.server_window_rate = stats["requests"] / point.window_s if point.window_s > 0 else None
    return None


def _last_lines(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def measure_assay(server: LatencyServer, s: Setting, runs: int, caps: dict[str, Any],
                  timeout: float | None) -> Point:
    trials = runs // FORGE_CASES
    point = Point("assay", s.workers, s.latency, runs)
    with tempfile.TemporaryDirectory(prefix="bench-latency-assay-") as tmp_name:
        tmp = Path(tmp_name)
        cmd = [str(ASSAY), "run", "forge", "--agent", f"openai:{MODEL}", "--base-url", server.base_url,
               "--workers", str(s.workers), "--trials", str(trials),
               "--db", f"sqlite:///{tmp / 'x.db'}", "--output", str(tmp / "results.json")]
        if caps["executor"]:
            cmd += ["--executor", "async"]
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_BASE_URL", "ASSAY_DB", "PYTHONPATH", "PYTHONHOME")}
        env.update(OPENAI_API_KEY=API_KEY, NO_COLOR="1", COLUMNS="200")
        log(f"assay: {runs} runs (--trials {trials}) at {s.label}{'' if caps['executor'] else ', no --executor'}")
        server.stats(reset=True)
        cpu0 = server.cpu_seconds()
        m = run_measured(cmd, env=env, cwd=tmp, timeout=_timeout_for(runs, s.workers, s.latency, timeout))
        server_error = _fill_common(point, m, server, cpu0)
        point.seconds = m.seconds
        point.detail["command"] = " ".join(cmd).replace(tmp_name, "$TMP")
        problems = [server_error] if server_error else []
        if m.timed_out:
            problems.append(f"killed after the {_timeout_for(runs, s.workers, s.latency, timeout):.0f} s timeout")
        if m.returncode != 0:
            problems.append(f"assay run exited {m.returncode}: {_last_lines(m.stderr) or _last_lines(m.stdout)}")
        results = tmp / "results.json"
        if results.exists():
            data = json.loads(results.read_text())
            point.statuses = dict(Counter(t["status"] for c in data["cases"] for t in c["trials"]))
            point.detail["harness_version"] = data.get("harness_version")
            done = point.statuses.get("completed", 0)
            if sum(point.statuses.values()) != runs or done != runs:
                problems.append(f"{done} of {runs} runs completed ({point.statuses})")
        elif m.returncode == 0:
            problems.append("no results JSON written")
        if m.returncode == 0 and point.server and point.server["requests"] != runs:
            problems.append(f"server answered {point.server['requests']} chat completions for {runs} runs")
        point.ok = not problems
        point.error = "; ".join(problems) or None
        if point.ok:  # a refused or broken run has a wall time, but no rate worth printing
            point.rate = runs / m.seconds
    return point


def measure_inspect(server: LatencyServer, s: Setting, samples: int, inspect_py: Path,
                    timeout: float | None) -> Point:
    from throughput import _clean_env  # same offline, venv-clean environment as `make bench`

    point = Point("inspect", s.workers, s.latency, samples)
    with tempfile.TemporaryDirectory(prefix="bench-latency-inspect-") as tmp_name:
        tmp = Path(tmp_name)
        cmd = [str(inspect_py), str(INSPECT_LATENCY), "--samples", str(samples),
               "--max-connections", str(s.workers), "--base-url", server.base_url,
               "--log-dir", str(tmp / "logs")]
        env = _clean_env()
        env.update(OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=server.base_url)
        log(f"inspect: {samples} samples at {s.label} (max_connections = max_samples = {s.workers})")
        server.stats(reset=True)
        cpu0 = server.cpu_seconds()
        # cwd: a scratch dir, so Inspect picks up no .env file and leaves no logs behind.
        m = run_measured(cmd, env=env, cwd=tmp, timeout=_timeout_for(samples, s.workers, s.latency, timeout))
        server_error = _fill_common(point, m, server, cpu0)
        problems = [server_error] if server_error else []
        lines = [ln for ln in m.stdout.splitlines() if ln.startswith("{")]
        if m.timed_out:
            problems.append("killed after the timeout")
        if m.returncode != 0 or not lines:
            problems.append(f"inspect_latency.py exited {m.returncode}: "
                            f"{_last_lines(m.stderr) or _last_lines(m.stdout)}")
        else:
            result = json.loads(lines[-1])
            point.detail.update(result)
            # The script's own log read-back is benchmark-only work: not Inspect's time.
            point.seconds = m.seconds - result["verify_seconds"]
            point.rate = samples / point.seconds
            point.statuses = {"completed": result["finish_calls"]}
            if result["finish_calls"] != samples:
                problems.append(f"{result['finish_calls']} finish calls for {samples} samples")
            if point.server and point.server["requests"] != samples:
                problems.append(f"server answered {point.server['requests']} chat completions "
                                f"for {samples} samples")
        point.ok = not problems
        point.error = "; ".join(problems) or None
        if not point.ok:
            point.rate = None
    return point


def measure(fn: Any, repeat: int, *args: Any) -> Point:
    """Measure a point `repeat` times; keep the median-time one, record all."""
    tries = [fn(*args) for _ in range(repeat)]
    good = [p for p in tries if p.ok]
    if not good:
        return tries[-1]
    good.sort(key=lambda p: p.seconds)
    chosen = good[(len(good) - 1) // 2]
    if repeat > 1:
        chosen.repeats = [{"seconds": p.seconds, "peak_rss_mb": p.peak_rss_mb, "ok": p.ok, "error": p.error}
                          for p in tries]
    return chosen


# --------------------------------------------------------------------------
# Capabilities and environment
# --------------------------------------------------------------------------


def assay_capabilities() -> dict[str, Any]:
    """What the installed CLI accepts, from `assay run --help` (the rewrite changes it)."""
    env = dict(os.environ, COLUMNS="300", NO_COLOR="1", TERM="dumb")
    proc = subprocess.run([str(ASSAY), "run", "--help"], capture_output=True, text=True, env=env)
    text = proc.stdout + proc.stderr
    caps: dict[str, Any] = {"cli": str(ASSAY), "help_ok": proc.returncode == 0,
                            "executor": "--executor" in text}
    for opt in ("trials", "workers"):
        match = re.search(rf"--{opt}\b[^\[\n]*\[([^\]\n]*x[^\]\n]*)\]", text)
        bounds = match.group(1).strip() if match else None
        top = re.search(r"x\s*<=\s*(\d+)", bounds or "")
        caps[f"{opt}_range"] = bounds
        caps[f"{opt}_max"] = int(top.group(1)) if top else None
    line = next((ln for ln in text.splitlines() if "--executor" in ln), None)
    caps["executor_help"] = re.sub(r"[│\s]+", " ", line).strip() if line else None
    return caps


def _raise_open_files_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit, inherited by every child: C=1000 needs > 1024 fds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def ensure_inspect() -> tuple[Path, str]:
    """The Inspect venv's python (created by throughput.py's routine), with `openai` in it."""
    from throughput import INSPECT_VENV, _clean_env, ensure_inspect_venv

    py = ensure_inspect_venv()
    env = _clean_env()
    check = subprocess.run([str(py), "-c", "import openai, inspect_ai; print(inspect_ai.__version__, openai.__version__)"],
                           capture_output=True, text=True, env=env)
    if check.returncode != 0:
        log(f"installing openai into {INSPECT_VENV} (Inspect's OpenAI provider needs it)")
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "openai"], check=True, env=env)
        check = subprocess.run([str(py), "-c", "import openai, inspect_ai; print(inspect_ai.__version__, openai.__version__)"],
                               capture_output=True, text=True, env=env, check=True)
    inspect_version, openai_version = check.stdout.split()
    return py, f"inspect-ai {inspect_version} (openai {openai_version})"


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------


def margin(points: list[Point], side: str, s: Setting) -> dict[str, Any]:
    by_runs = {p.runs: p for p in points if p.side == side and p.workers == s.workers and p.latency == s.latency}
    lo, hi = by_runs.get(s.lo), by_runs.get(s.hi)
    out: dict[str, Any] = {"side": side, "workers": s.workers, "latency": s.latency, "lo": s.lo, "hi": s.hi,
                           "ideal": s.ideal, "rate": None, "efficiency": None, "note": None}
    if lo is None or hi is None:
        out["note"] = "not measured"
    elif not (lo.ok and hi.ok):
        out["note"] = "a measurement failed: " + "; ".join(dict.fromkeys(p.error or "" for p in (lo, hi) if not p.ok))
    else:
        runs = s.hi - s.lo
        if hi.seconds - lo.seconds <= 0:
            out["note"] = f"wall({s.hi}) <= wall({s.lo}): noise larger than the margin; try --repeat 3"
        else:
            out["rate"] = runs / (hi.seconds - lo.seconds)
            out["efficiency"] = out["rate"] / s.ideal
        # Cross-check free of start-up noise: the same margin over the server-side windows.
        if lo.window_s is not None and hi.window_s is not None and hi.window_s > lo.window_s:
            out["window_rate"] = runs / (hi.window_s - lo.window_s)
        # Client CPU per extra run: if this times the ideal rate exceeds the cores, the ideal
        # is out of reach on this machine whatever the scheduling.
        out["client_cpu_ms_per_run"] = (hi.client_cpu_s - lo.client_cpu_s) / runs * 1000
        out["server_cpu_ms_per_run"] = ((hi.server_cpu_s - lo.server_cpu_s) / runs * 1000
                                        if hi.server_cpu_s is not None and lo.server_cpu_s is not None else None)
    return out


def rss_series(points: list[Point], side: str, s: Setting) -> dict[str, Any]:
    pts = sorted((p for p in points if p.side == side and p.workers == s.workers and p.latency == s.latency
                  and p.ok), key=lambda p: p.runs)
    series = {str(p.runs): p.peak_rss_mb for p in pts}
    ratio = None
    if str(s.lo) in series and str(s.hi) in series:
        ratio = series[str(s.hi)] / series[str(s.lo)]
    return {"side": side, "workers": s.workers, "latency": s.latency, "peak_rss_mb": series,
            "ratio_hi_lo": ratio, "ratio_of": f"{s.hi}/{s.lo}", "ratio_max": RSS_RATIO_MAX,
            "ratio_ok": None if ratio is None else ratio <= RSS_RATIO_MAX}


def _f(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _tables(summary: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report as (title, columns, rows) tables of strings."""
    pts = summary["points"]
    key = lambda p: [p["side"], str(p["workers"]), f"{p['latency']:g}s", f"{p['runs']:,}"]  # noqa: E731
    timing = [key(p) + [_f(p["seconds"], ".2f"), _f(p["startup_s"], ".2f"), _f(p["window_s"], ".2f"),
                        _f(p["tail_s"], ".2f"), _f(p["rate"], ".1f"), "ok" if p["ok"] else "FAILED (below)"]
              for p in pts]
    resources = [key(p) + [_f(p["peak_rss_mb"], ".1f"), _f(p["threads_max"], "d"), _f(p["client_cpu_s"], ".1f"),
                           _f(p["server_cpu_s"], ".2f"), _f((p["server"] or {}).get("requests"), ",d"),
                           _f((p["server"] or {}).get("max_in_flight"), "d"),
                           _f((p["server"] or {}).get("chat_connections"), ",d"),
                           _f((p["server"] or {}).get("lag_ms_max"), ".1f")] for p in pts]
    margins = [[f"C={g['workers']}, L={g['latency']:g}s", g["side"], f"{g['lo']:,}→{g['hi']:,}",
                _f(g["rate"], ".1f"), f"{g['ideal']:.0f}",
                "—" if g["efficiency"] is None else f"{100 * g['efficiency']:.1f}%",
                _f(g.get("window_rate"), ".1f"), _f(g.get("client_cpu_ms_per_run"), ".2f"),
                _f(g.get("server_cpu_ms_per_run"), ".2f")] for g in summary["margins"]]
    rss = [[f"C={r['workers']}, L={r['latency']:g}s", r["side"],
            ", ".join(f"{int(k):,}: {v:.1f}" for k, v in r["peak_rss_mb"].items()) or "—",
            _f(r["ratio_hi_lo"], ".3f") + f" ({r['ratio_of']})",
            (f"<= {r['ratio_max']}: " + {True: "PASS", False: "FAIL", None: "n/a"}[r["ratio_ok"]])
            if r["side"] == "assay" else "(for comparison)"] for r in summary["rss"]]
    k = ["side", "C", "latency", "runs"]
    return [
        ("Measured points: time (s, from process start; start-up/window/tail on the server's clock)",
         k + ["wall", "start-up", "window", "tail", "runs/s", "result"], timing),
        ("Measured points: resources (peak RSS = wait4 ru_maxrss; server counters for that point)",
         k + ["peak RSS MB", "threads", "client CPU s", "server CPU s", "calls", "max in flight", "connections",
              "lag max ms"], resources),
        ("Throughput at the margin (runs/s = extra runs / extra wall time; window = same over the server window)",
         ["setting", "side", "margin", "runs/s", "ideal", "efficiency", "window runs/s", "client CPU ms/run",
          "server CPU ms/run"], margins),
        ("Peak RSS by number of runs (MB)", ["setting", "side", "peak RSS MB", "ratio", "target"], rss),
    ]


def print_report(summary: dict[str, Any]) -> None:
    m = summary["machine"]
    heading = (f"Latency benchmark: {m['cpus']} CPUs, Python {m['python']}, "
               f"{summary['inspect_version'] or 'Inspect not run'}, {summary['timestamp']}")
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        Console = None  # type: ignore[assignment,misc]
    if Console is not None:
        console = Console(width=max(shutil.get_terminal_size((160, 24)).columns, 140), highlight=False)
        console.print(heading)
        for title, cols, rows in _tables(summary):
            table = Table(title=title, title_justify="left")
            for i, c in enumerate(cols):
                table.add_column(c, justify="left" if i < 2 else "right")
            for r in rows:
                table.add_row(*r)
            console.print(table)
    else:  # plain text, same figures
        print(heading)
        for title, cols, rows in _tables(summary):
            widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
            print(f"\n{title}")
            print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
            for r in rows:
                print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    for p in summary["points"]:
        if not p["ok"]:
            print(f"FAILED {p['side']} {p['runs']:,} runs at C={p['workers']}, L={p['latency']:g}s: {p['error']}")
    for g in summary["margins"]:
        if g["note"]:
            print(f"margin {g['side']} C={g['workers']}, L={g['latency']:g}s: {g['note']}")
    for note in summary["notes"]:
        print(f"note: {note}")


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes wants numbers like 100,500, not {text!r}") from None
    if len(sizes) < 2 or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError("--sizes wants at least two positive sizes: LO,HI[,more]")
    return sizes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 10,000-run memory point")
    ap.add_argument("--skip-inspect", action="store_true", help="do not run the Inspect side")
    ap.add_argument("--only", choices=("assay", "inspect"), help="run one side only")
    ap.add_argument("--workers", type=int, help="one custom setting with this C (default 100)")
    ap.add_argument("--latency", type=float, help="one custom setting with this latency (default 0.5)")
    ap.add_argument("--sizes", type=_sizes, help="custom setting's sizes LO,HI[,extra...] (default C,5C)")
    ap.add_argument("--repeat", type=int, default=1, help="measure each point N times, keep the median")
    ap.add_argument("--timeout", type=float, help="seconds per measured process (default: 20x ideal + 60, >= 180)")
    ap.add_argument("--output", type=Path, default=RESULTS_PATH, help="results JSON path")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.workers is not None and args.workers < 1:
        ap.error("--workers must be >= 1")
    if args.latency is not None and args.latency <= 0:
        ap.error("--latency must be > 0")

    notes: list[str] = []
    if args.workers is not None or args.latency is not None or args.sizes:
        c = args.workers or 100
        lat = args.latency or 0.5
        sizes = [_round5(n) for n in (args.sizes or [c, 5 * c])]
        if args.sizes and sizes != args.sizes:
            notes.append(f"sizes rounded up to multiples of {FORGE_CASES} (forge has {FORGE_CASES} cases): {sizes}")
        settings = [Setting(c, lat, sizes[0], sizes[1], tuple(sizes[2:]))]
    else:
        settings = default_settings(args.quick)
    run_assay_side = args.only != "inspect"
    run_inspect_side = args.only != "assay" and not args.skip_inspect

    fds = _raise_open_files_limit()
    if fds < max(s.workers for s in settings) * 2 + 100:
        notes.append(f"open-files limit {fds} may be too low for C={max(s.workers for s in settings)}")

    caps: dict[str, Any] = {}
    if run_assay_side:
        if not ASSAY.exists():
            log(f"{ASSAY} not found; run `make demo` or `make test` first")
            return 1
        caps = assay_capabilities()
        if not caps["executor"]:
            notes.append("the installed `assay run` has no --executor option (engine rewrite not in yet): "
                         "Assay ran with its default executor")
        for s in settings:
            for opt, value in (("workers", s.workers), ("trials", max((s.hi, *s.extra)) // FORGE_CASES)):
                top = caps.get(f"{opt}_max")
                if top is not None and value > top:
                    notes.append(f"the installed CLI caps --{opt} at {top} ({caps[f'{opt}_range']}); "
                                 f"{s.label} needs {value}: expect a refusal")

    inspect_py: Path | None = None
    inspect_version: str | None = None
    if run_inspect_side:
        try:
            inspect_py, inspect_version = ensure_inspect()
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            notes.append(f"Inspect side skipped: could not set up benchmarks/.venv-inspect: {exc}")
            log(notes[-1])

    points: list[Point] = []
    warmups: list[dict[str, Any]] = []
    server_logs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as scratch:
        for i, s in enumerate(settings):
            with LatencyServer(s.latency, Path(scratch) / f"server-{s.latency:g}.log") as server:
                if i == 0:
                    # One unmeasured 5-run pass per side first: the first process after a source
                    # change (the package is installed editable) or a fresh install compiles its
                    # bytecode, which would otherwise land in whichever point came first.
                    tiny = Setting(min(s.workers, FORGE_CASES), s.latency, FORGE_CASES, FORGE_CASES)
                    if run_assay_side:
                        log("warm-up (not measured)")
                        warm = measure_assay(server, tiny, FORGE_CASES, caps, args.timeout)
                        warmups.append(asdict(warm))
                        if not warm.ok:
                            notes.append(f"the Assay warm-up run failed: {warm.error}")
                    if inspect_py is not None:
                        log("warm-up (not measured)")
                        warmups.append(asdict(measure_inspect(server, tiny, FORGE_CASES, inspect_py, args.timeout)))
                if run_assay_side:
                    for runs in (s.lo, s.hi, *s.extra):
                        points.append(measure(measure_assay, args.repeat, server, s, runs, caps, args.timeout))
                        if not points[-1].ok:
                            log(f"assay {runs} runs FAILED: {points[-1].error}")
                if inspect_py is not None:
                    for samples in (s.lo, s.hi):
                        points.append(measure(measure_inspect, args.repeat, server, s, samples, inspect_py,
                                              args.timeout))
                        if not points[-1].ok:
                            log(f"inspect {samples} samples FAILED: {points[-1].error}")
            server_logs.append({"latency": s.latency, "final_stats": server.final,
                                "stderr": Path(server.log_path).read_text()[-2000:]})

    sides = [side for side, on in (("assay", run_assay_side), ("inspect", inspect_py is not None)) if on]
    margins = [margin(points, side, s) for s in settings for side in sides]
    rss = [rss_series(points, side, s) for s in settings[:1] for side in sides]
    for srv in server_logs:
        if srv["stderr"].strip():
            notes.append(f"server (L={srv['latency']:g}s) wrote to stderr: {_last_lines(srv['stderr'])}")
    summary = {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "open_files_limit": fds},
        "assay_cli": caps or None,
        "inspect_version": inspect_version,
        "settings": [asdict(s) | {"ideal": s.ideal} for s in settings],
        "method": {"margin": "(R_hi - R_lo) / (wall(R_hi) - wall(R_lo)); efficiency = margin / (C / latency)",
                   "wall": "perf_counter from Popen to wait4 of the measured process (Inspect: minus its "
                           "post-run log verification)",
                   "peak_rss": "os.wait4 ru_maxrss of the measured process, kB -> MB (1024)",
                   "repeat": args.repeat},
        "points": [asdict(p) for p in points],
        "warmups": warmups,
        "margins": margins,
        "rss": rss,
        "servers": server_logs,
        "notes": notes,
    }
    print_report(summary)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    log(f"wrote {args.output}")
    return 1 if any(p.side == "assay" and not p.ok for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
