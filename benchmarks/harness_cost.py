"""The harness's own cost, whole process, with a scripted agent (issue 25, item 6):

    .venv/bin/python benchmarks/harness_cost.py [--repeat 3] [--baseline-src PATH]

- **margin**: `assay run forge --agent reference:diligent` at 100 and 500 trials (500 and 2500
  runs), each into a new SQLite store; runs/s at the margin = 2000 / (t(2500) - t(500)), so the
  fixed cost (interpreter, imports, making the store) cancels out.
- **new store, 5 runs** and **new store, 500 runs**: the whole `assay run` process, a new SQLite
  store each time (what a first `--db`, or a test's store, costs).
- **CPU**: the same processes' user+sys CPU seconds (all their threads), and the CPU per run at
  the margin: on a loaded machine these move far less than wall times do.

Each figure is the median of `--repeat` fresh processes. With `--baseline-src` (another checkout's
`src`, e.g. a worktree of the commit before), the same figures are taken for it in the same loop,
interleaved run for run, and printed side by side with their ratio: on a shared machine, only
ratios taken together mean anything. Nothing here asserts a time. The source is byte-compiled
first, as `make` does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASSAY = Path(sys.executable).parent / "assay"
CASES = ("margin 500", "margin 2500", "new store, 5 runs", "new store, 500 runs")
TRIALS = {"margin 500": 100, "margin 2500": 500, "new store, 5 runs": 1, "new store, 500 runs": 100}


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "OPENAI_"))}
    env["PYTHONPATH"] = str(src)
    return env


def _once(src: Path, trials: int, scratch: Path) -> tuple[float, float]:
    """(wall seconds, user+sys CPU seconds) of one whole `assay run` process."""
    db = scratch / f"{time.monotonic_ns()}.db"
    began = time.perf_counter()
    proc = subprocess.Popen([str(ASSAY), "run", "forge", "--agent", "reference:diligent", "--trials", str(trials),
                             "--db", f"sqlite:///{db}"], env=_env(src), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    for path in scratch.iterdir():
        path.unlink()
    return took, usage.ru_utime + usage.ru_stime


def measure(sources: dict[str, Path], repeat: int) -> dict[str, dict[str, float]]:
    times: dict[str, dict[str, list[float]]] = {name: {case: [] for case in CASES} for name in sources}
    cpu: dict[str, dict[str, list[float]]] = {name: {case: [] for case in CASES} for name in sources}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for _ in range(repeat):
            for case in CASES:
                for name, src in sources.items():  # interleaved: both sides see the same machine
                    wall, used = _once(src, TRIALS[case], scratch)
                    times[name][case].append(wall)
                    cpu[name][case].append(used)
    out: dict[str, dict[str, float]] = {}
    for name, per_case in times.items():
        median = {case: statistics.median(v) for case, v in per_case.items()}
        median["runs/s at the margin"] = 2000 / max(1e-9, median["margin 2500"] - median["margin 500"])
        used = {case: statistics.median(v) for case, v in cpu[name].items()}
        median["CPU, new store, 5 runs"] = used["new store, 5 runs"]
        median["CPU, new store, 500 runs"] = used["new store, 500 runs"]
        median["CPU ms per run at the margin"] = 1000 * (used["margin 2500"] - used["margin 500"]) / 2000
        out[name] = median
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src directory, measured alongside")
    args = parser.parse_args()
    sources = {"this": REPO / "src"}
    if args.baseline_src is not None:
        sources = {"baseline": args.baseline_src.resolve(), **sources}
    for src in sources.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL)
    figures = measure(sources, args.repeat)
    rows = [*CASES, "runs/s at the margin", "CPU, new store, 5 runs", "CPU, new store, 500 runs",
            "CPU ms per run at the margin"]
    names = list(figures)
    print(f"{'':24}" + "".join(f"{n:>12}" for n in names) + ("       ratio" if len(names) == 2 else ""))
    for row in rows:
        cells = [figures[n][row] for n in names]
        unit = "" if row.startswith(("runs/s", "CPU ms")) else " s"
        line = f"{row:24}" + "".join(f"{c:>10.2f}{unit:2}" for c in cells)
        if len(names) == 2:
            line += f"{cells[1] / cells[0]:>11.2f}x"
        print(line)
    print(f"load average: {os.getloadavg()[0]:.2f} (quiet is below 0.5 on the 2-core machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
