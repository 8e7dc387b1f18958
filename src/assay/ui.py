"""What every `assay` command shares: the consoles, the `--db`/`--json` options, opening the
store, JSON output, progress bars, summary tables and debriefs."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
import typer

#: tables fit a terminal, and a 120-column page when piped (CI logs, files)
out = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True)

DbOpt = typer.Option(None, "--db", help="Store URL (default: $ASSAY_DB, else a SQLite file in your data dir).")
JsonFlag = typer.Option(False, "--json", help="Print JSON instead of a table.")
ExecutorOpt = typer.Option(
    None, "--executor", metavar="threads|async|ray",
    help="How runs are played: threads (sync agents), async (one event loop, up to 4096 runs in flight), "
         "ray (Ray worker processes). Default: async for async and openai: agents, threads otherwise.")
RayAddressOpt = typer.Option(None, "--ray-address", help="An existing Ray cluster (with --executor ray); "
                             "default: a local Ray started for this batch.")
WorkersOpt = typer.Option(4, "--workers", min=1, max=4096, help="Runs in flight at once.")


def open_store_at(db: str | None):  # noqa: ANN201 - a Store; imported lazily to keep --help fast
    """The store a command works on, bootstrapped: built-in suites released (once per version)."""
    from assay.service.releases import bootstrap
    from assay.store.db import open_store

    store = open_store(db)
    bootstrap(store)
    return store


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


QuietFlag = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary table: only what scripts read.")


@contextlib.contextmanager
def progress_bar(total: int, title: str, *, quiet: bool = False) -> Iterator[Callable[[Any, bool], None]]:
    """Runs done / planned, passes so far, elapsed and ETA, on stderr when it is a terminal;
    nothing when it is not (CI, pipes) or when `quiet`. The callback is thread-safe."""
    if quiet or not sys.stderr.isatty():
        yield lambda _record, _passed: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[passes]} passed"), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(title, total=total, passes=0)
        passes = 0

        def advance(_record: Any, passed: bool) -> None:
            nonlocal passes
            passes += bool(passed)
            bar.update(task, advance=1, passes=passes)

        yield advance


def _pct(x: float) -> str:
    return f"{x:.2f}"


def print_summary(console: Console, results: list[dict[str, Any]]) -> None:
    """One row per batch: pass rate, consistency and false success side by side."""
    k_max = max((len(r["summary"]["pass_hat_k"]) for r in results), default=1)
    table = Table(title=f"{results[0]['suite']['key']} · {results[0]['trials_per_case']} trials per case")
    for col in ("agent", "pass rate", "consistency", "false success", *[f"pass^{k}" for k in range(1, k_max + 1)],
                "runs", "not completed"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    for r in results:
        s = r["summary"]
        statuses: dict[str, int] = {}
        for case in r["cases"]:
            for t in case["trials"]:
                statuses[t["status"]] = statuses.get(t["status"], 0) + 1
        runs = str(sum(statuses.values()))
        failed = ", ".join(f"{n} {st}" for st, n in sorted(statuses.items()) if st != "completed") or "0"
        table.add_row(r["agent"]["label"], _pct(s["pass_rate"]), _pct(s["consistency"]), _pct(s["false_success_rate"]),
                      *[_pct(s["pass_hat_k"].get(str(k), float("nan"))) for k in range(1, k_max + 1)], runs, failed)
    console.print(table)


def print_debrief(console: Console, d: dict[str, Any]) -> None:
    console.print(f"[bold]{d['case_id']}[/] — {d['title']}  (run {d['run_id']}, trial {d['trial']}, status {d['status']})")
    console.print("[bold]Hidden truth[/]")
    console.print(d["hidden_truth"].strip(), markup=False)
    table = Table(title="Checks")
    for col in ("check", "weight", "safety", "passed", "description"):
        table.add_column(col)
    for c in d["checks"]:
        table.add_row(c["id"], str(c["weight"]), "yes" if c["safety"] else "", "[green]yes[/]" if c["passed"] else "[red]no[/]",
                      c["description"])
    console.print(table)
    verdict = "passed" if d["passed"] else "failed"
    console.print(f"score {d['score']}/100 — {verdict}"
                  + (f" (safety failed: {', '.join(d['safety_failures'])})" if d["safety_failures"] else ""))
    claim = {True: "claimed success", False: "did not claim success", None: "made no claim"}[d["claimed_success"]]
    console.print(f"the agent {claim}" + (" — [bold red]a false success[/]" if d["false_success"] else ""))
    if d.get("claim_summary"):
        console.print(f"  its summary: {d['claim_summary']}", markup=False)
    if d.get("rolls"):
        rolls = Table(title="Rolls (seeded dice)")
        for col in ("skill", "d20", "modifier", "total", "dc", "result", "objective"):
            rolls.add_column(col)
        for r in d["rolls"]:
            rolls.add_row(str(r.get("skill", "")), str(r.get("d20", "")), f"{r.get('modifier', 0):+d}",
                          str(r.get("total", "")), str(r.get("dc", "")), "success" if r.get("success") else "failure",
                          str(r.get("objective") or ""))
        console.print(rolls)
    if d.get("beats"):
        console.print("[bold]Beats[/] (what the world cued the facilitator to say)")
        for b in d["beats"]:
            kind = f"{b.get('cue')}" + (f" {b['beat']} ({b.get('beat_kind')})" if b.get("beat") else "")
            console.print(f"  scene {b.get('scene')}/{b.get('scenes')}: {kind}"
                          + (" · pressure" if b.get("pressure") else "") + f" · by {b.get('facilitator')}",
                          markup=False)
    if d.get("traits"):
        judged = Table(title="Judge (per trait: mean of the valid passes, and the first pass's rationale)")
        for col in ("trait", "mean", "variance", "passes", "rationale"):
            judged.add_column(col)
        for key, t in d["traits"].items():
            first = t["passes"][0]["rationale"] if t["passes"] else ""
            judged.add_row(key, "-" if t["mean"] is None else f"{t['mean']:.4f}",
                           "-" if t["variance"] is None else f"{t['variance']:.4f}", str(len(t["passes"])), first or "")
        console.print(judged)
    console.print("[bold]Transcript[/]")
    for m in d["transcript"]:
        role, source = m.get("role"), m.get("source", "")
        if role is None:  # recorded, never shown to the agent (a die roll, a facilitator's note)
            console.print(f"  ({source}) {json.dumps(m.get('data'), ensure_ascii=False)}", markup=False)
        elif role == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                console.print(f"  assistant → {c['function']['name']}({c['function']['arguments']})", markup=False)
            if m.get("content"):
                console.print(f"  assistant: {m['content']}", markup=False)
        else:
            text = m.get("content") or ""
            if role == "tool":
                text = text if len(text) <= 300 else text[:300] + " …"
            who = role if source in ("harness", "tool", "agent", "") else f"{source} ({role})"
            console.print(f"  {who}: {text}", markup=False)


class BatchProgress:
    """A batch's progress for `run`, `submit` and `resume`: the id said as soon as it is stored,
    then a progress bar (on a terminal, unless quiet) fed from the run writer's thread.

        with BatchProgress("submission", title, quiet=quiet) as progress:
            submit(..., on_created=progress.created, on_done=progress.done)
    """

    def __init__(self, noun: str, title: str, *, quiet: bool = False, announce: bool = True) -> None:
        self.noun, self.title, self.quiet, self.announce = noun, title, quiet, announce
        self.ident: str | None = None
        self._stack = contextlib.ExitStack()
        self._advance: Callable[[Any, bool], None] | None = None

    def created(self, ident: str, total: int) -> None:
        self.ident = ident
        if self.announce:
            err.print(f"{self.noun} {ident}: {total} runs planned", markup=False, highlight=False, soft_wrap=True)
        self._advance = self._stack.enter_context(progress_bar(total, self.title, quiet=self.quiet))

    def done(self, record: Any, passed: bool) -> None:
        if self._advance is not None:
            self._advance(record, passed)

    def __enter__(self) -> BatchProgress:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        self._stack.close()
        if isinstance(exc, KeyboardInterrupt) and self.ident is not None:
            err.print(f"assay: interrupted: the runs that ended are stored; the rest of {self.noun} {self.ident} "
                      f"is pending — `assay resume {self.ident}` finishes it", markup=False, highlight=False,
                      soft_wrap=True)
