"""`assay validate`: every problem of a scenario, a directory of them or a suite, in one pass.

Each document's own problems (`service.suites.examine_suite`), what `suite release` would refuse
of them, and, when a store exists, a changed frozen case it already holds a release of
(`service.releases.release_problems`): one line each on stderr, then exit 2. `--explain` shows
each check's verdict on the untouched world.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from assay.cli.ui import DbOpt, JsonFlag, err, out, print_json

if TYPE_CHECKING:
    from assay.service.suites import Untouched

#: The --explain table fits a terminal of this many columns.
EXPLAIN_WIDTH = 80


def validate(
    path: Path = typer.Argument(..., help="A scenario or suite YAML file, or a directory of scenarios."),
    explain: bool = typer.Option(False, "--explain", help="Show each check's and win condition's verdict on the "
                                 "untouched world (before any agent plays), and the score a run that changes "
                                 "nothing would get."),
    as_json: bool = JsonFlag,
    db: str | None = DbOpt,
) -> None:
    """Check a scenario (or suite) document and print its content hash.

    Every problem is reported, one line each on stderr, and then the exit code is 2.

    When a store exists (--db, $ASSAY_DB or the default; validating never creates one), a frozen case whose checks changed since a release pinned it, and a case that differs from what this suite version's release pinned, are refused too."""
    from assay.service.releases import release_problems
    from assay.service.suites import examine_suite, untouched

    found = examine_suite(str(path))
    store = _existing_store(db)
    try:
        refused = release_problems(found, store)
    finally:
        if store is not None:
            store.close()
    problems = [*found.problems, *refused]
    # a case refused for what a release holds (named by its file, or by its id) is not ok
    named = {p.where for p in refused}
    sound = [s for s in found.scenarios if s.source not in named and s.id not in named]
    explained = {s.id: untouched(s) for s in sound} if explain else {}
    if as_json:
        print_json({"ok": not problems,
                    "scenarios": [{"id": s.id, "hash": s.content_hash,
                                   **({"untouched": explained[s.id]} if explain else {})} for s in sound],
                    "problems": [str(p) for p in problems]})
    for s in () if as_json else sound:
        out.print(f"ok  {s.id}  {s.content_hash}", markup=False, highlight=False)
        if explain:
            _print_untouched(s.id, explained[s.id])
    for problem in problems:
        err.print(f"assay: error: {problem}", markup=False, highlight=False, soft_wrap=True)
    if problems:
        sys.exit(2)  # SystemExit, not typer.Exit: under standalone_mode=False typer returns an Exit's code


def _existing_store(db: str | None) -> Any:
    """The store at `db` (default: $ASSAY_DB, else the default file) if it exists, else None. A
    SQLite file that is not there is no store; any other URL is opened (a fault there is one line)."""
    import sqlalchemy as sa

    from assay.store.db import default_url, open_store

    url = db if db is not None else default_url()
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return open_store(url)  # refuses it in one line
    if parsed.get_backend_name() == "sqlite" and not (parsed.database and Path(parsed.database).is_file()):
        return None
    return open_store(url)


def _print_untouched(case: str, found: Untouched) -> None:
    from rich.table import Table

    word = "passes" if found["passed"] else "does not pass"
    table = Table(title=f"{case} untouched: score {found['score']}/100, {word}", title_justify="left")
    for col, justify in (("kind", "left"), ("id", "left"), ("weight", "right"), ("verdict", "left"), ("note", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for c in found["checks"]:
        table.add_row("safety" if c["safety"] else "check", c["id"], str(c["weight"]), _held(c["holds"]), c["note"] or "")
    for w in found["win_conditions"]:
        table.add_row("win", w["id"], "", _held(w["holds"]), w["note"] or "")
    out.print(table, width=min(out.width, EXPLAIN_WIDTH))


def _held(holds: bool) -> str:
    return "holds" if holds else "fails"
