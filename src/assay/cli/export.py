"""`assay export` and `assay verify`: the store's append-only rows as files anyone can check.

`assay.cli` calls `register(app)`. `export` follows the CLI's error contract (a refusal is one
stderr line, exit 2, nothing written); `verify` needs no database at all: exit 0 with a one-line
summary when every line is the line exported and every digest and board figure adds up, exit 1
naming the file and line of the first thing that does not, exit 2 for bad input (no such
directory, not an export). `export --inspect DIR` writes Inspect AI logs instead
(`service/inspect_logs.py`; the extra `assay[inspect]`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from assay.service.actors import OPERATOR
from assay.cli.ui import DbOpt, JsonFlag, QuietFlag, err, open_store_at, out, print_json

#: A table with at least this many rows is announced on stderr as it is written (with --quiet, none).
PROGRESS_ROWS = 1


def export(
    out_dir: Optional[Path] = typer.Option(None, "--out", help="A new (or empty) directory to write the export into."),
    inspect_dir: Optional[Path] = typer.Option(
        None, "--inspect", metavar="DIR", help="Instead of --out: write each batch and submission as an Inspect AI "
        "evaluation log (DIR/*.eval, for `inspect view --log-dir DIR` and `inspect_ai.log.read_eval_log`): one "
        "sample per run, its transcript, its verdict as the score, the trials as epochs; no seeds, hidden truths or "
        "account names. Needs the extra: pip install 'assay\\[inspect]'."),
    batch: Optional[list[str]] = typer.Option(
        None, "--batch", help="With --inspect: only this batch or submission (an id or a unique prefix; repeat "
        "for more)."),
    public: bool = typer.Option(
        False, "--public", help="Only what the public may see: published, listed entries of public suites, seed "
        "commitments instead of seeds, public handles instead of account names, no scenario documents. Without "
        "it, a full export: every row, secrets included (for the operator only)."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Only the rows of this suite's releases and submissions."),
    quiet: bool = QuietFlag,
    as_json: bool = JsonFlag,
    db: Optional[str] = DbOpt,
) -> None:
    """Write the store's tables as JSON Lines (one file per table, canonical JSON per row, in
    primary-key order), a README and a manifest (kind, harness version, schema revision, row counts,
    a SHA-256 per file and per line, and each suite's public boards as served).

    A full export holds secrets (seeds, hidden truths, account names) and says so; `--public`
    writes what anyone may download and check with `assay verify DIR`."""
    from assay.errors import BadInput
    from assay.service import exports

    if (out_dir is None) == (inspect_dir is None):
        raise BadInput("give exactly one of --out DIR (an Assay export) and --inspect DIR (Inspect AI logs)", "export")
    if batch and inspect_dir is None:
        raise BadInput("only an --inspect export takes batches; --out exports the store (or --suite)", "--batch")
    if inspect_dir is not None:
        _inspect(inspect_dir, suite=suite, batches=batch, public=public, quiet=quiet, as_json=as_json, db=db)
        return
    assert out_dir is not None
    store = open_store_at(db)

    def progress(name: str, rows: int) -> None:
        if not quiet and rows >= PROGRESS_ROWS:
            err.print(f"export: {name} {rows} row(s)", markup=False, highlight=False, soft_wrap=True)

    manifest = exports.export(store, out_dir, suite=suite, public=public, on_table=progress, actor=OPERATOR)
    if manifest["contains_secrets"]:
        err.print(f"assay: {exports.FULL_NOTICE}", markup=False, highlight=False, soft_wrap=True)
    rows = sum(f["rows"] for f in manifest["files"])
    entries = sum(len(exports.entry_ids(b)) for b in manifest["boards"])
    if as_json:
        print_json({"directory": str(out_dir), "kind": manifest["kind"], "contains_secrets": manifest["contains_secrets"],
                    "rows": rows, "files": len(manifest["files"]), "boards": len(manifest["boards"]),
                    "entries": entries})
        return
    out.print(f"exported {rows} rows in {len(manifest['files'])} files, {len(manifest['boards'])} boards "
              f"({entries} entries) to {out_dir} ({manifest['kind']} export); check it with `assay verify {out_dir}`",
              markup=False, highlight=False, soft_wrap=True)


def _inspect(directory: Path, *, suite: Optional[str], batches: Optional[list[str]], public: bool, quiet: bool,
             as_json: bool, db: Optional[str]) -> None:
    from assay.service import inspect_logs

    inspect_logs.require_inspect()  # before the store is opened: one line saying how to install it
    store = open_store_at(db)
    written = inspect_logs.export(store, directory, suite=suite, batch_ids=batches, public=public, actor=OPERATOR)
    if not quiet and not as_json:
        for path in written:
            err.print(f"export: {path.name}", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        print_json({"directory": str(directory), "kind": "inspect", "files": [p.name for p in written]})
        return
    out.print(f"exported {len(written)} Inspect log(s) to {directory}; view them with `inspect view --log-dir "
              f"{directory}`", markup=False, highlight=False, soft_wrap=True)


def verify(
    directory: Path = typer.Argument(..., metavar="DIR", help="A directory `assay export` wrote."),
    as_json: bool = JsonFlag,
) -> None:
    """Check an export with nothing but the export: every line as exported, every submission's
    digest recomputed from its rows, every board figure recomputed from the rows.

    Exit 0 when everything adds up; 1 naming the file and line of the first thing that does not."""
    from assay.service.verify import verify as check

    report = check(directory)
    if as_json:
        print_json(report.as_json())
    elif report.ok:
        out.print(report.summary(), markup=False, highlight=False, soft_wrap=True)
    else:
        err.print(f"assay: verify failed: {report.summary()}", markup=False, highlight=False, soft_wrap=True)
    if not report.ok:
        sys.exit(1)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("verify")(verify)
