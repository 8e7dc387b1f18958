"""`assay suite release|list|show|versions`: release suites and read what each release pins.

`assay.cli.lazy` calls `register(app)` when one of its commands is named. Every command takes
`--db URL` like the rest of the CLI, and follows its error contract: a refusal is a `BadInput`
(one stderr line, exit 2) raised before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
from typing import Optional

import typer
from rich.table import Table

from assay.cli.ui import DbOpt, JsonFlag, VersionOpt, open_store_at, out, print_json

suite_app = typer.Typer(no_args_is_help=True, help="Release suites and read what each release pins.")


@suite_app.command("release")
def suite_release(
    path: str = typer.Argument(..., help="A suite YAML file, or a directory holding suite.yaml."),
    as_json: bool = JsonFlag, db: Optional[str] = DbOpt,
) -> None:
    """Validate a suite and record a release pinning every scenario's content hash (immutable)."""
    from assay.service import releases

    store = open_store_at(db)
    release, created = releases.release_path(store, path, actor=OPERATOR)
    view = releases.release_view(store, release)
    if as_json:
        print_json({**view, "created": created})
        return
    word = "released" if created else "already released, identical"
    out.print(f"{view['key']} {view['version']} {word} ({view['visibility']}, {view['language']}, "
              f"{view['reps_per_scenario']} reps)", markup=False)
    for s in view["scenarios"]:
        out.print(f"  {s['case_id']}  v{s['version']}  {s['hash_prefix']}", markup=False)


@suite_app.command("list")
def suite_list(as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Every released suite version in this store (built-in suites are released when a store is first opened)."""
    from assay.service import releases

    rows = releases.list_releases(open_store_at(db), actor=OPERATOR)
    if as_json:
        print_json(rows)
        return
    table = Table(title="suite releases")
    for col in ("key", "version", "visibility", "language", "reps", "released", "title"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["key"], r["version"], r["visibility"], r["language"], str(r["reps_per_scenario"]),
                      r["released_at"][:19], r["title"])
    out.print(table)


@suite_app.command("show")
def suite_show(key: str = typer.Argument(..., help="Suite key."), version: Optional[str] = VersionOpt,
               as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """One release: what it pins (scenario versions and hashes), its judge, facilitator and owner."""
    from assay.service import releases

    store = open_store_at(db)
    view = releases.release_view(store, releases.find_release(store, key, version, actor=OPERATOR))
    if as_json:
        print_json(view)
        return
    out.print(f"{view['key']} {view['version']} — {view['title']}", markup=False)
    out.print(f"  visibility {view['visibility']} · language {view['language']} · reps {view['reps_per_scenario']}"
              f" · owner {view['owner'] or '-'} · facilitator {view['facilitator_model'] or '-'}", markup=False)
    out.print(f"  judge {json.dumps(view['judge']) if view['judge'] else 'none (oracle checks only)'}", markup=False)
    out.print(f"  release {view['release_hash']}  released {view['released_at']}", markup=False)
    for s in view["scenarios"]:
        out.print(f"  {s['case_id']}  v{s['version']}  {s['hash']}", markup=False)


@suite_app.command("versions")
def suite_versions(key: str = typer.Argument(..., help="Suite key."), as_json: bool = JsonFlag,
                   db: Optional[str] = DbOpt) -> None:
    """Every released version of a suite, oldest first, with its scenario hash prefixes."""
    from assay.service import releases

    rows = releases.versions(open_store_at(db), key, actor=OPERATOR)
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{key} versions")
    for col in ("version", "visibility", "released", "scenarios"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["version"], r["visibility"], r["released_at"][:19],
                      " ".join(f"{s['case_id']}@{s['hash_prefix']}" for s in r["scenarios"]))
    out.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(suite_app, name="suite")
