"""What every `assay` command shares: the consoles, the `--db`/`--json` options, opening the
store, JSON output, progress bars, summary tables and debriefs."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleDimensions, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
import typer

if TYPE_CHECKING:  # imported where used (`open_store_at`): --help loads no store
    from assay.store.db import Store
    from assay.service.suites import SuiteBundle

#: the width of a page when output is piped and $COLUMNS is not set (CI logs, files)
PIPED_WIDTH = 120


class Screen(Console):
    """A console as wide as the terminal it writes to ($COLUMNS, else the terminal's own width, read
    at each print), or PIPED_WIDTH when piped (a log line is never wrapped at a width nobody sees).
    A table is laid out for `page_width` (`fit_table`), which $COLUMNS sets even when piped."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        if kw.get("width") is None:
            self._width = None  # Rich fixes $COLUMNS as it was at import: here it is read at each print

    @property
    def size(self) -> ConsoleDimensions:
        if self._width is not None:  # set for one table (`--wide`)
            return ConsoleDimensions(self._width, self._height or 25)
        return ConsoleDimensions(screen_width(self.file) if _is_terminal(self.file) else PIPED_WIDTH, 25)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def screen_width(stream: Any) -> int:
    """$COLUMNS when set, else the terminal's width, else PIPED_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        pass
    return PIPED_WIDTH


out = Screen()
err = Screen(stderr=True)

DbOpt = typer.Option(None, "--db", help="Store URL (default: $ASSAY_DB, else a SQLite file in your data dir).")
JsonFlag = typer.Option(False, "--json", help="Print one JSON document to stdout and nothing else there "
                        "(messages go to stderr).")
#: for a command whose output is one JSON document whatever is asked: --json is accepted and changes nothing
AlwaysJson = typer.Option(False, "--json", help="Output is JSON either way; accepted so every command takes --json.")
OutputOpt = typer.Option(None, "--output", "-o", metavar="FILE", help="Write the JSON document (what --json prints) to FILE.")
ExecutorOpt = typer.Option(
    None, "--executor", metavar="threads|async|ray",
    help="How runs are played: threads (sync agents), async (one event loop, up to 4096 runs in flight), "
         "ray (Ray worker processes). Default: async for async and openai: agents, threads otherwise.")
RayAddressOpt = typer.Option(None, "--ray-address", help="An existing Ray cluster (with --executor ray); "
                             "default: a local Ray started for this batch.")
WorkersOpt = typer.Option(4, "--workers", min=1, max=4096, help="Runs in flight at once.")
#: a released suite's version (`assay suite show`, `submit`, `board`, `card`)
VersionOpt = typer.Option(None, "--version", help="Suite version (default: the latest).")


#: The stores the running command opened, closed by `close_stores` when it ends (`cli.main`).
_opened: list[Any] = []


def open_store_at(db: str | None, needed: SuiteBundle | None = None) -> Store:  # imported lazily to keep --help fast
    """The store a command works on, bootstrapped: built-in suites released (once per version).
    Every command, `assay run` too: the frozen rule binds a case from its first release, so a
    store that had not released the built-in suites would let an edited frozen case run. `assay run`
    passes the suite it plays as `needed` (a `SuiteBundle`): only the built-in suites holding its
    cases are released then (`releases.bootstrap`)."""
    from assay.service.releases import bootstrap
    from assay.store.db import open_store

    store = open_store(db)
    _opened.append(store)
    bootstrap(store, needed)
    return store


def close_stores() -> None:
    """Close what the command opened: its connections end here (a SQLite WAL is checkpointed, a
    PostgreSQL session is ended politely) rather than whenever the interpreter gets to them."""
    while _opened:
        _opened.pop().close()


def print_json(value: Any) -> None:
    sys.stdout.write(json_text(value))


def json_text(value: Any) -> str:
    """The one JSON document a command prints with --json or writes with --output."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"


def says(as_json: bool) -> Console:
    """Where a command's human lines go: stdout, unless --json keeps stdout for the document."""
    return err if as_json else out


def check_output(path: Path | None) -> None:
    """Refuse an --output FILE that cannot be written, before anything runs or is stored."""
    from assay.errors import BadInput

    if path is None:
        return
    if path.is_dir():
        raise BadInput("is a directory", f"--output {path}")
    if not path.parent.is_dir():
        raise BadInput("its directory does not exist", f"--output {path}")


def emit_json(value: Any, *, as_json: bool, output: Path | None) -> None:
    """Write the document to `output` (when given) and print it on stdout (with --json); encoded
    only when it goes somewhere (a large batch's document costs as much as storing its runs)."""
    if output is None and not as_json:
        return
    text = json_text(value)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    if as_json:
        sys.stdout.write(text)


QuietFlag = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary table: only what scripts read.")


@contextlib.contextmanager
def progress_bar(total: int, title: str, *, quiet: bool = False) -> Iterator[Callable[[Any, bool], None]]:
    """Runs done / planned, passes so far, elapsed and ETA, on stderr when it is a terminal;
    nothing when it is not (CI, pipes) or when `quiet`. The callback is thread-safe."""
    if quiet or not sys.stderr.isatty():
        yield lambda _record, _passed: None
        return
    from rich.progress import (  # only a terminal draws a bar: not imported for --help or a pipe
        BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
    )

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


def rate(value: float | None) -> str:
    """A rate to four places; `—` where there is none."""
    return "—" if value is None else f"{value:.4f}"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 trial`, `3 trials`: a count with its noun, in the number it takes."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


@dataclass(frozen=True)
class Col:
    """A column of a table that fits the page (`fit_table`).

    `keep`: when the page is too narrow, the columns with the lowest `keep` leave first; 100 never
    leaves. `wraps`: text (a label, a note) that may wrap at spaces and fold a long word; every other
    column (a figure, an id, a status) is never wrapped or cut, so a narrow page drops a column
    rather than shorten a number."""

    header: str
    keep: int = 100
    justify: str = "left"
    wraps: bool = False


WideFlag = typer.Option(False, "--wide", help="Every column, however wide the table (default: the columns that fit "
                        "the terminal, or 120 columns when piped; $COLUMNS sets the width).")


#: What a table draws besides its cells: a border and a space either side of every column.
def _overhead(n: int) -> int:
    return 3 * n + 1


#: The narrowest a wrapping text column is made while it has room (a label, a case id).
TEXT_MIN_WIDTH = 12


def _span(console: Console, cells: Sequence[RenderableType]) -> tuple[int, int]:
    """(longest word, longest line) over `cells`."""
    wide = console.options.update_width(10_000)
    found = [Measurement.get(console, wide, c) for c in cells]
    return max(m.minimum for m in found), max(m.maximum for m in found)


def fit_table(console: Console, cols: Sequence[Col], rows: Sequence[Sequence[RenderableType]], *,
              wide: bool = False, **table_kw: Any) -> list[str]:
    """Print a table of `cols` × `rows` that fits `console`'s width, leaving out the least kept
    columns until it does (never wrapping or cutting a figure, only wrapping text at spaces); a
    line after it names what was left out. With `wide`, every column, each at its natural width.
    Returns the headers left out."""
    spans = [_span(console, [c.header, *(row[i] for row in rows)]) for i, c in enumerate(cols)]
    natural = [hi for _lo, hi in spans]
    least = [min(hi, max(lo, TEXT_MIN_WIDTH)) if c.wraps else hi for c, (lo, hi) in zip(cols, spans)]
    width = screen_width(console.file) if console._width is None else console.width  # noqa: SLF001
    shown = list(range(len(cols)))
    hidden: list[str] = []
    while not wide and sum(least[i] for i in shown) + _overhead(len(shown)) > width:
        droppable = [i for i in shown if cols[i].keep < 100]
        if not droppable:
            break
        gone = min(droppable, key=lambda i: (cols[i].keep, -i))
        shown.remove(gone)
        hidden.append(cols[gone].header)
    sizes = {i: natural[i] for i in shown}
    room = width - _overhead(len(shown))
    if not wide and sum(sizes.values()) > room:  # text columns share what the figures leave, fairly
        sizes = {i: least[i] for i in shown}
        spare = room - sum(sizes.values())
        texts = [i for i in shown if cols[i].wraps]
        while spare > 0 and any(sizes[i] < natural[i] for i in texts):
            for i in texts:
                if spare > 0 and sizes[i] < natural[i]:
                    sizes[i] += 1
                    spare -= 1
    table = Table(**table_kw)
    for i in shown:
        c = cols[i]
        table.add_column(c.header, justify=c.justify, no_wrap=not c.wraps,  # type: ignore[arg-type]
                         overflow="fold" if c.wraps else "ellipsis", width=sizes[i])
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    with _width(console, max(width, sum(sizes.values()) + _overhead(len(shown))) if wide else width):
        console.print(table)
    if hidden:
        console.print(f"hidden to fit {width} columns: {', '.join(hidden)} (--wide shows them)",
                      markup=False, highlight=False)
    return hidden


@contextlib.contextmanager
def _width(console: Console, width: int) -> Iterator[None]:
    saved = console._width  # noqa: SLF001 - Rich's own override of the detected width
    console.width = width
    try:
        yield
    finally:
        console._width = saved  # noqa: SLF001


def fold_ks(k_max: int, wide: bool = False) -> list[int]:
    """The k of the pass^k columns a table shows: 1, 2 and the last by default, every one with `wide`."""
    return list(range(1, k_max + 1)) if wide else sorted({k for k in (1, 2, k_max) if 1 <= k <= k_max})


def _suite_name(suite: dict[str, Any]) -> str:
    """`forge 2.0`: the key with its version, where the document names one (a suite has several)."""
    return " ".join(str(p) for p in (suite.get("key"), suite.get("version")) if p)


def print_summary(console: Console, results: list[dict[str, Any]], *, wide: bool = False) -> None:
    """One row per batch: pass rate, consistency and false success side by side; pass^k folded to
    k = 1, 2 and the last unless `wide`. Consistency on one trial a case is withheld (it would read
    1.00 whatever the agent did)."""
    k_max = max((len(r["summary"]["pass_hat_k"]) for r in results), default=1)
    ks = fold_ks(k_max, wide)
    single = all(r["trials_per_case"] < 2 for r in results)
    cols = [Col("agent", wraps=True), Col("pass rate", justify="right"),
            Col("consistency", 80, "right"), Col("false success", 90, "right"),
            *[Col(f"pass^{k}", 40 + (k == k_max) * 5 - k, "right") for k in ks],
            Col("runs", 60, "right"), Col("not completed", 70, "right")]
    rows: list[list[RenderableType]] = []
    for r in results:
        s = r["summary"]
        statuses: dict[str, int] = {}
        for case in r["cases"]:
            for t in case["trials"]:
                statuses[t["status"]] = statuses.get(t["status"], 0) + 1
        runs = str(sum(statuses.values()))
        failed = ", ".join(f"{n} {st}" for st, n in sorted(statuses.items()) if st != "completed") or "0"
        consistency = "—" if s["consistency"] is None or r["trials_per_case"] < 2 else _pct(s["consistency"])
        rows.append([Text(r["agent"]["label"]), _pct(s["pass_rate"]), consistency, _pct(s["false_success_rate"]),
                     *[_pct(s["pass_hat_k"].get(str(k), float("nan"))) for k in ks], runs, failed])
    fit_table(console, cols, rows, wide=wide,
              title=f"{_suite_name(results[0]['suite'])} · {plural(results[0]['trials_per_case'], 'trial')} per case")
    if single:
        console.print("consistency: — (it needs at least 2 trials a case; --trials 3 measures it)",
                      markup=False, highlight=False)


#: How many run ids a case row lists before pointing at `assay runs`.
RUNS_SHOWN = 3


def print_cases(console: Console, results: dict[str, Any], *, wide: bool = False) -> None:
    """One row per case of a batch: its pass rate, whether its trials agree, how its trials ended,
    and its runs' ids (what `assay debrief RUN` takes), failing runs first."""
    single = results["trials_per_case"] < 2
    cols = [Col("case", wraps=True), Col("pass rate", justify="right"), Col("consistent", 60),
            Col("trials", 50, wraps=True), Col("runs (debrief RUN)", 90)]
    rows: list[list[RenderableType]] = []
    more = False
    for c in results["cases"]:
        statuses: dict[str, int] = {}
        for t in c["trials"]:
            statuses[t["status"]] = statuses.get(t["status"], 0) + 1
        ended = ", ".join(f"{n} {st}" for st, n in sorted(statuses.items()))
        trials = sorted(c["trials"], key=lambda t: (bool(t["passed"]), t["trial"]))
        listed = trials if wide else trials[:RUNS_SHOWN]
        runs = [f"{(t['run_id'] or '-')[:12]} {'pass' if t['passed'] else 'fail'}" for t in listed]
        if len(trials) > len(listed):
            more = True
            runs.append(f"+{len(trials) - len(listed)} more")
        rows.append([Text(c["case_id"]), _pct(c["pass_rate"]), "—" if single else ("yes" if c["consistent"] else "no"),
                     Text(f"{plural(len(c['trials']), 'trial')}: {ended}"), "\n".join(runs)])
    fit_table(console, cols, rows, wide=wide, title=f"{results['agent']['label']} · batch {results['batch_id']}")
    if more:
        console.print(f"every run: assay runs {results['batch_id']}", markup=False, highlight=False)


def agent_traceback(d: dict[str, Any]) -> str | None:
    """The agent's traceback a crashed run keeps in its transcript (a harness event whose data
    holds `traceback`), if the run kept one."""
    for m in d.get("transcript") or ():
        data = m.get("data")
        if m.get("source") == "harness" and isinstance(data, dict) and isinstance(data.get("traceback"), str):
            return data["traceback"]
    return None


def print_debrief(console: Console, d: dict[str, Any]) -> None:
    console.print(f"[bold]{d['case_id']}[/] — {d['title']}  (run {d['run_id']}, trial {d['trial']}, status {d['status']})")
    if d.get("reason"):  # why a run that did not complete ended: the exception, the limit, the harness fault
        console.print(f"[bold]Ended:[/] {d['status']} — {escape(d['reason'])}")
    trace = agent_traceback(d)
    if trace:
        console.print("[bold]Agent traceback[/]")
        console.print(trace.rstrip(), markup=False, highlight=False)
    console.print("[bold]Hidden truth[/]")
    console.print(d["hidden_truth"].strip(), markup=False)
    table = Table(title="Checks")
    for col in ("check", "weight", "safety", "passed", "description"):
        table.add_column(col)
    for c in d["checks"]:
        table.add_row(c["id"], str(c["weight"]), "yes" if c["safety"] else "", "[green]yes[/]" if c["passed"] else "[red]no[/]",
                      c["description"])
    console.print(table)
    for c in d["checks"]:
        if c.get("not_found"):
            console.print(f"check {c['id']}: nothing in the final state at {', '.join(c['not_found'])}", markup=False)
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
    if d.get("unjudged"):
        console.print(f"no judge score: {d['unjudged']}", markup=False, highlight=False, soft_wrap=True)
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
        if role is None and m.get("data") is not None and agent_traceback({"transcript": [m]}) is not None:
            continue  # shown above
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
