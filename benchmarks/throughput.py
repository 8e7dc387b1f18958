"""Throughput benchmark: Assay's forge suite vs Inspect AI, side by side in one run.

    python benchmarks/throughput.py [--samples 1000] [--skip-inspect] [--skip-assay]

(`make bench` runs it with the project's .venv.)

Inspect side: ``benchmarks/.venv-inspect`` is created with ``venv`` and
``pip install inspect-ai`` when missing (reused when present), and
``benchmarks/inspect_episode.py`` runs there: N samples, each an episode of 10
tool calls plus a final answer with Inspect's ``mockllm/model``, scored and
logged; it prints one JSON line that this driver parses.

Assay side: ``run_suite("forge", agent_spec="reference:diligent", ...)`` with a
scripted agent, world simulation, scoring and SQLite storage included. The forge
suite has 5 cases, so trials = ceil(samples / 5) and Assay executes
5 * trials >= samples runs; rates are per run/sample either way.

Both sides run one after the other (never concurrently), each single-process
(Assay workers=1, Inspect max_samples=1 by default), so neither competes with
the other for the machine's 2 cores.

Prints a table (Assay rate, Inspect rate, ratio, Assay per-step overhead) and
writes the same figures to ``benchmarks/results.json``.
Targets: Assay >= 50x Inspect's rate; harness overhead per agent step < 100 us.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
INSPECT_VENV = BENCH_DIR / ".venv-inspect"
INSPECT_EPISODE = BENCH_DIR / "inspect_episode.py"
INSPECT_REQUIREMENT = "inspect-ai"  # unpinned, as the issue asks; the version is recorded
RESULTS_PATH = BENCH_DIR / "results.json"

FORGE_CASES = 5
TARGET_RATIO = 50.0
TARGET_STEP_OVERHEAD_US = 100.0

# Keep both sides off the network and out of any TUI.
OFFLINE_ENV = {
    "INSPECT_DISPLAY": "none",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Inspect side
# --------------------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_inspect_venv(venv: Path = INSPECT_VENV, requirement: str = INSPECT_REQUIREMENT) -> Path:
    """Create the Inspect virtualenv and install inspect-ai, unless already done.

    A ``.installed`` marker is written only after pip succeeds, so an
    interrupted install is redone on the next run rather than half-reused.
    """
    py = _venv_python(venv)
    marker = venv / ".installed"
    if py.exists() and marker.exists():
        log(f"reusing {venv} ({marker.read_text().strip()})")
        return py
    if not py.exists():
        log(f"creating virtualenv {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log(f"installing {requirement} into {venv} (pip, one-time; takes about a minute)")
    env = _clean_env()
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", requirement], check=True, env=env
    )
    version = subprocess.run(
        [str(py), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    marker.write_text(f"inspect-ai {version}\n")
    log(f"installed inspect-ai {version}")
    return py


def _clean_env() -> dict[str, str]:
    """Environment for the Inspect venv: offline, and nothing of this venv leaking in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(OFFLINE_ENV)
    return env


def run_inspect(samples: int, max_samples: int = 1) -> dict:
    """Run inspect_episode.py in the Inspect venv; return its JSON result."""
    py = ensure_inspect_venv()
    cmd = [str(py), str(INSPECT_EPISODE), "--samples", str(samples), "--max-samples", str(max_samples)]
    log(f"inspect: {samples} samples x 10 tool calls (max_samples={max_samples or 'inspect-default'})")
    # cwd: a scratch dir, so Inspect picks up no .env file and leaves no logs behind.
    with tempfile.TemporaryDirectory(prefix="bench-inspect-cwd-") as cwd:
        proc = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-5000:])
        sys.stderr.write(proc.stdout[-5000:])
        raise RuntimeError(f"inspect_episode.py exited {proc.returncode}: {' '.join(cmd)}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"inspect_episode.py printed no JSON line; stdout was:\n{proc.stdout}")
    result = json.loads(lines[-1])
    expected_calls = samples * 10
    if result["samples"] != samples or result["tool_calls"] != expected_calls:
        raise RuntimeError(
            f"inspect ran {result['samples']} samples / {result['tool_calls']} tool calls, "
            f"expected {samples} / {expected_calls}"
        )
    return result


# --------------------------------------------------------------------------
# Assay side
# --------------------------------------------------------------------------


def measure_step_overhead(steps: int = 39, repeats: int = 2000) -> float:
    """Harness overhead per agent step, in microseconds (target < 100 us).

    What is timed is Assay's own step loop and nothing else: an episode whose agent hands back a
    prebuilt tool-call message at once and whose world answers every call with a constant, so
    the figure is the harness's cost of one step — reading the reply, decoding arguments,
    dispatching to the world, recording the action and the transcript, checking limits. Episodes
    are as long as the default turn limit (40 turns); the mean over `repeats` of them is reported,
    the final-state hash included (the fork is made before the clock starts).
    """
    from assay.records import PlannedRun
    from assay.run.drivers import play_sync
    from assay.run.engine import Episode, Limits
    from assay.service.suites import resolve_suite
    from assay.worlds.base import opening
    from assay.worlds.tooling import ToolWorld

    case = resolve_suite("forge").scenarios[0]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]}
    finish = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "f", "type": "function", "function": {"name": "finish",
                                                     "arguments": '{"claimed_success": false, "summary": ""}'}}]}

    class ConstantWorld(ToolWorld):
        def tools(self):
            return [{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}]

        def reset(self):
            return opening("system", "briefing")

        def call(self, name, arguments):
            return "{}"

        def state(self):
            return {"steps": 0}

    def make_agent():
        n = {"i": 0}

        def agent(messages, tools):
            n["i"] += 1
            return call if n["i"] <= steps else finish
        return agent

    total_s, total_steps = 0.0, 0
    for _ in range(repeats):
        ep = Episode(PlannedRun("bench", 0, case.id, case.content_hash, 1, 0), ConstantWorld(),
                     Limits(turn_limit=steps + 1, time_limit=600))
        t0 = time.perf_counter()
        record = play_sync(ep, make_agent)
        elapsed = time.perf_counter() - t0
        if record.status != "completed" or ep.steps != steps + 1:
            raise RuntimeError(f"overhead episode ended {record.status} after {ep.steps} steps")
        total_s += elapsed
        total_steps += ep.steps
    return total_s / total_steps * 1e6


def run_assay(samples: int) -> dict:
    """Run the forge suite with the scripted reference agent and time it.

    Returns {"runs", "steps", "seconds", "rate", "step_overhead_us"} plus
    "suite_seconds" (run_suite's own timing, for cross-checking). seconds is this
    function's perf_counter around run_suite; rate = runs / seconds.
    step_overhead_us is None while measure_step_overhead() is not implemented.
    """
    try:
        from assay.service.runs import run_suite
    except ImportError:
        src = str(REPO_DIR / "src")
        if src in sys.path:
            raise
        sys.path.insert(0, src)  # running outside the project's venv
        from assay.service.runs import run_suite

    trials = math.ceil(samples / FORGE_CASES)
    log(f"assay: forge x {trials} trials ({trials * FORGE_CASES} runs), workers=1, sqlite")
    with tempfile.TemporaryDirectory(prefix="bench-assay-") as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        t0 = time.perf_counter()
        result = run_suite(
            "forge",
            agent_spec="reference:diligent",
            trials=trials,
            workers=1,
            db_url=db_url,
            seed=0,
            progress=False,
        )
        seconds = time.perf_counter() - t0

    runs, steps = int(result.n_runs), int(result.n_steps)
    if runs != trials * FORGE_CASES:
        log(f"warning: expected {trials * FORGE_CASES} runs, run_suite reported {runs}")
    try:
        step_overhead_us: float | None = float(measure_step_overhead())
    except NotImplementedError as exc:
        log(f"per-step overhead not measured: {exc}")
        step_overhead_us = None
    return {
        "runs": runs,
        "steps": steps,
        "seconds": seconds,
        "rate": runs / seconds,
        "step_overhead_us": step_overhead_us,
        "suite_seconds": float(result.seconds),
    }


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _fmt(x: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{unit}"


def _verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[ok]


def summarize(samples: int, inspect: dict | None, assay: dict | None, errors: dict) -> dict:
    a_rate = assay["rate"] if assay else None
    i_rate = inspect["rate"] if inspect else None
    ratio = a_rate / i_rate if a_rate and i_rate else None
    overhead = assay.get("step_overhead_us") if assay else None
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "samples": samples,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "assay": assay,
        "inspect": inspect,
        "ratio": ratio,
        "targets": {
            "ratio_min": TARGET_RATIO,
            "ratio_ok": None if ratio is None else ratio >= TARGET_RATIO,
            "step_overhead_us_max": TARGET_STEP_OVERHEAD_US,
            "step_overhead_ok": None if overhead is None else overhead < TARGET_STEP_OVERHEAD_US,
        },
        "errors": errors or None,
    }


def print_table(s: dict) -> None:
    a, i, t = s["assay"], s["inspect"], s["targets"]
    rows = [
        ("Assay rate", _fmt(a and a["rate"], ",.1f", " runs/s")
         + (f"  ({a['runs']} runs, {a['steps']} steps, {a['seconds']:.2f} s)" if a else ""), ""),
        ("Inspect rate", _fmt(i and i["rate"], ",.2f", " samples/s")
         + (f"  ({i['samples']} samples, {i['tool_calls']} tool calls, {i['seconds']:.2f} s, "
            f"inspect-ai {i['inspect_version']})" if i else ""), ""),
        ("Ratio Assay/Inspect", _fmt(s["ratio"], ",.1f", "x"),
         f"target >= {TARGET_RATIO:g}x: {_verdict(t['ratio_ok'])}"),
        ("Assay step overhead", _fmt(a and a.get("step_overhead_us"), ",.1f", " us/step"),
         f"target < {TARGET_STEP_OVERHEAD_US:g} us: {_verdict(t['step_overhead_ok'])}"),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"\nThroughput, {s['samples']} samples ({s['machine']['cpus']} CPUs, Python {s['machine']['python']})")
    for name, value, note in rows:
        print(f"  {name:<{w}}  {value}" + (f"   [{note}]" if note else ""))
    for side, err in (s["errors"] or {}).items():
        print(f"  {side} side FAILED: {err}")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000, help="episodes per side (default 1000: long enough that start-up costs on both sides stop dominating)")
    ap.add_argument("--skip-inspect", action="store_true", help="do not run the Inspect side")
    ap.add_argument("--skip-assay", action="store_true", help="do not run the Assay side")
    ap.add_argument(
        "--inspect-max-samples",
        type=int,
        default=1,
        help="Inspect max_samples (default 1, sequential like Assay workers=1; 0 = Inspect's default)",
    )
    ap.add_argument("--output", type=Path, default=RESULTS_PATH, help="results JSON path")
    args = ap.parse_args(argv)
    if args.samples < 1:
        ap.error("--samples must be >= 1")

    inspect = assay = None
    errors: dict[str, str] = {}
    if not args.skip_inspect:
        try:
            inspect = run_inspect(args.samples, args.inspect_max_samples)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            errors["inspect"] = str(exc)
    if not args.skip_assay:
        try:
            assay = run_assay(args.samples)
        except ImportError as exc:
            errors["assay"] = f"Assay's run_suite is not importable: {exc}"

    summary = summarize(args.samples, inspect, assay, errors)
    print_table(summary)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    log(f"wrote {args.output}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
