"""`assay agreement SUITE`: how closely the suite's judge follows the human panel (issue 12, item 7).

`assay.cli` calls `register(app)`. For each (trait, category) pair the suite version maps, a Rich
table of n, Spearman's ρ and Krippendorff's α with their 95% bootstrap intervals over the runs both
scored, or with `--json` one JSON document on stdout. A suite that maps nothing, or has no run both
scored, says so in words and exits 0; an unknown suite is the CLI's one-line refusal, exit 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from assay.service.actors import OPERATOR
from assay.cli.ui import DbOpt, JsonFlag, open_store_at, out, print_json

if TYPE_CHECKING:  # the service is imported when the command runs (start-up cost)
    from assay.service.agreement import AgreementReport

VersionOpt = typer.Option(None, "--version", help="Suite version (default: the latest released).")


def _shown(value: float | None, interval: list[float] | None, reason: str | None) -> str:
    """The figure with its interval, or with the reason the interval is withheld."""
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval is not None
                             else f" (no interval: {reason})")


def print_agreement(report: AgreementReport) -> None:
    from rich.table import Table
    from rich.text import Text

    judge = report["judge"]["model"] if report["judge"] else None
    against = f": the {judge} judge against the human panel ({report['scale']})" if judge else ""
    out.print(f"{report['suite']} {report['version']}{against}", markup=False, highlight=False, soft_wrap=True)
    if report["pairs"] and report["note"] is None:
        table = Table(caption=r"\[lo, hi]: 95% bootstrap interval over runs; '-' where the data give no number")
        for col in ("trait", "category", "n"):
            table.add_column(col, no_wrap=True)
        for col in (r"ρ \[lo, hi]", r"α \[lo, hi]"):
            table.add_column(col)
        for p in report["pairs"]:
            table.add_row(*(Text(cell) for cell in (p["trait"], p["category"], str(p["n"]),
                                                    _shown(p["spearman"], p["spearman_ci"], p["spearman_ci_reason"]),
                                                    _shown(p["alpha"], p["alpha_ci"], p["alpha_ci_reason"]))))
        out.print(table)
        shown = {reason for p in report["pairs"]
                 for value, reason in ((p["spearman"], p["spearman_ci_reason"]), (p["alpha"], p["alpha_ci_reason"]))
                 if value is not None}
        for p in report["pairs"]:
            for note in (n for n in p["notes"] if n not in shown):
                out.print(f"{p['trait']} / {p['category']}: {note}", markup=False, highlight=False, soft_wrap=True)
    if report["note"] is not None:
        out.print(report["note"], markup=False, highlight=False, soft_wrap=True)
    if report["excluded_runs"]:
        out.print(f"{report['excluded_runs']} linked run(s) left out: judged by another judge or rubric than the "
                  "release pins", markup=False, highlight=False, soft_wrap=True)


def agreement(
    suite: str = typer.Argument(..., help="Suite key."),
    version: Optional[str] = VersionOpt,
    as_json: bool = JsonFlag,
    db: Optional[str] = DbOpt,
) -> None:
    """Judge–panel agreement: per (trait, category) the suite maps, Spearman's ρ and Krippendorff's α
    between the judge's trait means and the panel's medians on the runs both scored, with n and a
    95% bootstrap interval."""
    from assay.service.agreement import agreement as build

    report = build(open_store_at(db), suite, version, actor=OPERATOR)
    if as_json:
        print_json(report)
    else:
        print_agreement(report)


def register(app: typer.Typer) -> None:
    app.command("agreement")(agreement)
