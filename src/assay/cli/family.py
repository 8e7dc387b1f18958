"""`assay family expand FAMILY_FILE [-o DIR]`: a scenario family into frozen, ordinary case files.

`assay.cli` calls `register(app)`. The family's syntax and refusals are `scenario.family`'s; each
case is validated as `assay validate` validates one (its world materialised, its checks held to the
kit's state), and nothing is written unless every case is sound. A case file is the case's own
document (YAML), named `<id>.yaml`, headed by a comment naming the family and row it came from.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from assay.cli.ui import DbOpt, JsonFlag, err, out, print_json

family_app = typer.Typer(no_args_is_help=True, help="Scenario families: a template and a parameter table, "
                         "expanded into ordinary cases (docs: Writing scenarios, Families).")


def case_text(family_file: str, family: str, row: int, document: dict[str, Any]) -> str:
    """A case file's text: a header comment, then the document as plain YAML (no tags, no anchors);
    prose (a briefing, a runbook) as a literal block, as an author writes it."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        block = "\n" in value and value == value.strip(" ") and "\t" not in value and not value.endswith("\n\n")
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)

    Dumper.add_representer(str, text)
    head = (f"# Expanded from family '{family}' ({Path(family_file).name}, cases[{row}]) by `assay family expand`.\n"
            "# Edit the family and expand again; a released case's checks never change (a new id does).\n")
    return head + yaml.dump(document, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=110,
                            default_flow_style=False)


@family_app.command("expand")
def expand(
    family_file: Path = typer.Argument(..., metavar="FAMILY_FILE", help="A family YAML: family, parameters, "
                                       "template, cases."),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="DIR",
                                       help="Write each case to DIR/<id>.yaml (DIR is created; a file of the same "
                                            "name is replaced). Without it, the cases are only checked and listed."),
    as_json: bool = JsonFlag,
    db: str | None = DbOpt,
) -> None:
    """Expand a scenario family into its cases, validate each, and list their ids and content hashes.

    A family is a scenario template with ${name} placeholders and a table of parameter rows; each row
    becomes one ordinary scenario document with its own id and content hash, which `assay validate`,
    `suite release` and runs treat like any hand-written case. Every problem (a placeholder naming no
    declared parameter, a parameter the template never uses, a row's unknown or missing parameter, two
    rows giving one id, a case that does not validate) is one line on stderr, exit 2, nothing written.

    As with `assay validate`, when a store exists (--db, $ASSAY_DB or the default; none is created) a case
    that is frozen in a release and whose checks changed is refused too: a changed check needs a new id."""
    from assay.cli.validate import _existing_store
    from assay.errors import BadInput, Problems
    from assay.service.releases import release_problems
    from assay.service.suites import Findings, expand_family_file

    if not family_file.is_file():
        raise BadInput("no such family file", str(family_file))
    try:
        cases = expand_family_file(family_file)
        store = _existing_store(db)
        try:
            refused = release_problems(Findings(tuple(s for _, s in cases), (), None), store)
        finally:
            if store is not None:
                store.close()
        if refused:
            raise Problems(refused)
    except Problems as exc:  # every problem, one line each (as `assay validate` prints them)
        for problem in exc.problems:
            err.print(f"assay: error: {problem}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    written: dict[str, str] = {}
    if output is not None:
        if output.exists() and not output.is_dir():
            raise BadInput("not a directory", str(output))
        output.mkdir(parents=True, exist_ok=True)
        from assay.scenario.family import load_family

        family, _ = load_family(family_file)
        for case, _loaded in cases:
            target = output / f"{case.id}.yaml"
            target.write_text(case_text(str(family_file), family.name, case.row, case.document), encoding="utf-8")
            written[case.id] = str(target)
    if as_json:
        print_json({"family": str(family_file),
                    "cases": [{"id": c.id, "row": c.row, "hash": s.content_hash, "file": written.get(c.id)}
                              for c, s in cases]})
        return
    for c, s in cases:
        where = f"  {written[c.id]}" if c.id in written else ""
        out.print(f"ok  {c.id}  {s.content_hash}{where}", markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(family_app, name="family")
