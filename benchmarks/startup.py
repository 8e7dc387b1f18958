"""How long `assay` takes before it does any work: `--help`, `--version`, and `assay run`'s fixed cost.

    .venv/bin/python benchmarks/startup.py [--repeat 7]

Every figure is the median wall-clock time of the real console script, each repetition a fresh
process. The fixed cost of `assay run` (interpreter, imports, opening an existing SQLite store,
checking its migrations, then loading the suite, opening the store and writing the results) is taken at the margin
between two batch sizes of `reference:diligent` on forge, so the per-run cost cancels out:

    per run = (t(5 trials) - t(1 trial)) / 20 runs,   fixed = t(1 trial) - 5 runs x per run

Beside them, in the same loop, the *floor*: a bare interpreter importing the libraries `assay run`
cannot do without (Typer with its pydantic-based option parsing, Rich, SQLAlchemy, PyYAML), so the
part of the fixed cost that is Assay's own is the difference.

The source is byte-compiled first (`python -m compileall -q src`), as `make` does: with
PYTHONDONTWRITEBYTECODE set, an editable install would otherwise recompile every module on every
start. Nothing here asserts a time; it prints figures for README's Throughput section.
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
FORGE_CASES = 5


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "OPENAI_"))}


def timed(*args: str) -> float:
    began = time.perf_counter()
    subprocess.run([str(ASSAY), *args], env=_env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


#: What the floor imports; the console script also freezes the collector before exiting (`cli.console`).
FLOOR = "import typer, typer._adapters, rich.console, rich.table, pydantic, sqlalchemy, yaml, gc; gc.freeze()"


def timed_floor() -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], env=_env(), check=True)
    return time.perf_counter() - began


def timed_run(db: str, trials: int) -> float:
    return timed("run", "forge", "--agent", "reference:diligent", "--trials", str(trials), "--quiet",
                 "--workers", "1", "--db", db)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="repetitions of each measurement (median reported)")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True)
    timed("--version")  # warm the file cache
    help_s = statistics.median(timed("--help") for _ in range(args.repeat))
    version_s = statistics.median(timed("--version") for _ in range(args.repeat))
    small, large, floor = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        db = f"sqlite:///{Path(tmp) / 'assay.db'}"
        fresh = timed_run(db, 1)  # creates and migrates the store, releases forge: once per store
        for _ in range(args.repeat):
            small.append(timed_run(db, 1))
            large.append(timed_run(db, 5))
            floor.append(timed_floor())
    t1, t5 = statistics.median(small), statistics.median(large)
    per_run = (t5 - t1) / (4 * FORGE_CASES)
    fixed = t1 - FORGE_CASES * per_run
    print(f"assay --help        {help_s:.3f} s (median of {args.repeat})")
    print(f"assay --version     {version_s:.3f} s")
    print(f"assay run, 5 runs   {t1:.3f} s;  25 runs {t5:.3f} s")
    print(f"assay run per run   {per_run * 1000:.1f} ms")
    print(f"assay run fixed     {fixed:.3f} s (a store that exists; its first run, which creates and migrates it, "
          f"took {fresh:.3f} s)")
    floor_s = statistics.median(floor)
    print(f"floor               {floor_s:.3f} s (importing Typer, Rich, pydantic, SQLAlchemy, PyYAML); "
          f"Assay's own share of the fixed cost {fixed - floor_s:.3f} s")


if __name__ == "__main__":
    main()
