"""`assay board|entry|card|compare`: the public board of a suite version, one entry, a suite
version's eval card, and two submissions compared case by case.

`assay.cli.lazy` calls `register(app)` when one of its commands is named. Every command takes
`--db URL` like the rest of the CLI, and follows its error contract: a refusal is a `BadInput`
(one stderr line, exit 2) raised before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
import sys
from typing import Any, Optional

import typer
from rich.console import RenderableType
from rich.text import Text

from assay.errors import BadInput
from assay.jsontypes import JsonValue
from assay.cli.ui import Col, DbOpt, JsonFlag, VersionOpt, WideFlag, fit_table, open_store_at, out, print_json, rate

#: What `assay compare --metric` accepts (assay.service.compare.METRICS; named here so --help
#: stays fast, and checked equal by the tests).
COMPARE_METRICS = ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")


def _number(value: JsonValue) -> float | None:
    """A figure of an entry (its stored figures are JSON): the number, or None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _interval(value: JsonValue) -> tuple[float, float] | None:
    """A figure's stored 95% interval `[lo, hi]`, or None."""
    if isinstance(value, list) and len(value) == 2:
        lo, hi = _number(value[0]), _number(value[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _at(value: JsonValue, *path: str) -> JsonValue:
    """The member at `path` of nested JSON objects (None where one is missing)."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _figure(value: float | None, ci: tuple[float, float] | None) -> str:
    """A board figure over its 95% interval, on two lines (a narrow column never splits it)."""
    if value is None or ci is None:
        return rate(value)
    return f"{value:.4f}\n[{ci[0]:.4f}, {ci[1]:.4f}]"


def _rate_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    """A figure with its 95% interval beside it: `1.0000 [0.5655, 1.0000]`."""
    if value is None or ci is None:
        return rate(value)
    return f"{value:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"


# -- the board and cards ------------------------------------------------------------------------


def board(key: Optional[str] = typer.Argument(None, help="Suite key."), version: Optional[str] = VersionOpt,
          limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Show at most this many entries (the first page)."),
          recompute: bool = typer.Option(False, "--recompute", help=(
              "Rebuild every entry's stored figures from the rows and report what differed (operator).")),
          as_json: bool = JsonFlag, wide: bool = WideFlag, db: Optional[str] = DbOpt) -> None:
    """The public board of a suite version (default: the latest public one); or, with --recompute,
    every entry's stored figures rebuilt from the rows, and what differed."""
    from assay.service.board import MAX_PAGE, board as build, board_json, recompute as rebuild

    if recompute:
        report = rebuild(open_store_at(db), actor=OPERATOR)
        if as_json:
            print_json(report)
            return
        for d in report["differences"]:
            out.print(f"{d['submission_id']}: {d['field']} was {json.dumps(d['stored'])}, the rows give "
                      f"{json.dumps(d['recomputed'])}", markup=False)
        n = len({d["submission_id"] for d in report["differences"]})
        out.print(f"recomputed {report['entries']} entries from the rows: "
                  + (f"{n} differed from what was stored (now replaced)" if n else "every one as stored"), markup=False)
        return
    if key is None:
        raise BadInput("give a suite key (or --recompute)", "KEY")
    if limit is not None and limit > MAX_PAGE:
        raise BadInput(f"at most {MAX_PAGE} entries a page", "--limit")
    if as_json:
        sys.stdout.write(board_json(open_store_at(db), key, version, actor=OPERATOR, limit=limit))
        return
    value = build(open_store_at(db), key, version, actor=OPERATOR, limit=limit)
    s = value["suite"]
    out.print(f"{s['key']} {s['version']} — {s['title']} ({s['language']})", markup=False)
    out.print("pinned: " + " ".join(f"{p['case_id']}@{p['hash_prefix']}" for p in value["provenance"]["scenarios"]),
              markup=False)
    judge = value["provenance"]["judge"]
    traits = value["provenance"].get("rubric_hash_prefix") is not None  # a trait suite, judged
    entries = value["entries"]
    if not entries:
        out.print(f"no entries yet — publish one: assay account create NAME --public-handle HANDLE, then "
                  f"assay submit {s['key']} --agent reference:diligent --account NAME --label LABEL --publish",
                  markup=False, highlight=False, soft_wrap=True)
        return
    notes = any(e.get("variance_note") for e in entries)  # the operator's word, beside the figures
    cols = [Col("rank", justify="right"), Col("agent (self-declared)", wraps=True), Col("handle", 70, wraps=True),
            Col("class", 40), Col("cases", 30, "right"), Col("runs", 50, "right"),
            *((Col("composite", 95, "right"), Col("safety (mean)", 85, "right"), Col("stability", 45))
              if traits else ()),
            Col("pass", 100 if not traits else 90, "right"), Col("consistency", 75, "right"),
            Col("false success", 92, "right"), Col("objective", 35, "right"), Col("era", 60),
            *((Col("variance note", 65, wraps=True),) if notes else ()), Col("digest", 36)]
    rows: list[list[RenderableType]] = []
    for e in entries:
        era = str(e["measurement_era"] or "-") + ("" if e["measurement_era_is_current"] else " (old era)")
        judged: tuple[Any, ...] = ()
        if traits:
            safety = e.get("safety")
            measured = [v for v in (safety.values() if isinstance(safety, dict) else ())
                        if isinstance(v, int | float)]  # null: measured nowhere
            worst = f"{min(measured):.4f} min" if measured else "-"
            judged = (_figure(_number(e.get("composite")), _interval(e.get("composite_ci"))), worst,
                      str(e.get("stability") or "-"))
        digest = str(e.get("digest") or "-")
        rows.append([str(e["rank"]) if e["rank"] is not None else "-", Text(str(e["agent_label"])),
                     Text(str(e["public_handle"] or "-")), str(e["leaderboard_class"]), str(e["n_cases"]),
                     str(e["n_runs"]), *judged,
                     *(_figure(_number(e[k]), _interval(e[f"{k}_ci"])) for k in
                       ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")), era,
                     *((Text(str(e.get("variance_note") or "-")),) if notes else ()),
                     digest if wide else digest[:12]])
    fit_table(out, cols, rows, wide=wide, caption=r"figure, and below it \[lo, hi]: its 95% interval, clustered by case")
    if traits:
        assert judge is not None  # a trait suite's release pins its judge
        out.print(f"judge: {judge['model']} · prompt v{judge['prompt_version']} {judge['prompt_hash'][:12]} · "
                  f"{judge['passes']} pass(es) per run · temperature {judge['temperature']}", markup=False)
    out.print(f"rank: {value['ranking']}", markup=False)
    if len(value["versions"]) > 1:
        out.print("versions: " + ", ".join(v["version"] + (" *" if v["current"] else "") for v in value["versions"]),
                  markup=False)


def compare(
    submission_a: str = typer.Argument(..., metavar="SUBMISSION_A", help="Submission id (or a unique prefix)."),
    submission_b: str = typer.Argument(..., metavar="SUBMISSION_B", help="Submission id (or a unique prefix)."),
    metric: str = typer.Option("pass_rate", "--metric", metavar="METRIC",
                               help=f"The rate compared, case by case: {', '.join(COMPARE_METRICS)}."),
    as_json: bool = JsonFlag, db: Optional[str] = DbOpt,
) -> None:
    """Compare two submissions on the same suite version, case by case: the mean per-case difference
    (A − B), its paired 95% interval and the exact sign-flip p-value."""
    from assay.service.compare import compare as run_compare

    if metric not in COMPARE_METRICS:
        raise BadInput(f"unknown metric '{metric}' (one of: {', '.join(COMPARE_METRICS)})", "--metric")
    value = run_compare(open_store_at(db), submission_a, submission_b, metric, actor=OPERATOR)
    if as_json:
        print_json(value)
        return
    a, b = value["a"], value["b"]
    out.print(f"{value['suite']['key']} {value['suite']['version']} · {metric}: "
              f"{a['agent_label']} ({str(a['submission_id'])[:12]}) {rate(_number(a[metric]))} − "
              f"{b['agent_label']} ({str(b['submission_id'])[:12]}) {rate(_number(b[metric]))}", markup=False)
    ci = value["ci"]
    shown_ci = f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci is not None else "— (the differences do not vary)"
    out.print(f"  difference {value['difference']:+.4f} · 95% CI {shown_ci} · p = {value['p_value']:.4g} "
              f"({value['test']}) · {value['n_cases']} cases", markup=False)
    for c in value["cases"]:
        out.print(f"  {c['case_id']}  {c['a']:.4f} − {c['b']:.4f} = {c['difference']:+.4f}", markup=False)
    if value["note"]:
        out.print(f"  {value['note']}", markup=False)


def card(key: str = typer.Argument(..., help="Suite key."), version: Optional[str] = VersionOpt,
         as_json: bool = typer.Option(False, "--json", help='Print {"key", "version", "markdown"} (as the API '
                                      "serves it) instead of the Markdown."),
         db: Optional[str] = DbOpt) -> None:
    """Print a suite version's eval card as Markdown."""
    from assay.service import releases
    from assay.service.cards import card as build

    store = open_store_at(db)
    text = build(store, key, version, actor=OPERATOR)
    if as_json:
        release = releases.find_release(store, key, version, public=True, actor=OPERATOR)
        print_json({"key": release["suite_key"], "version": release["version"], "markdown": text})
        return
    sys.stdout.write(text)


def entry(submission_id: str = typer.Argument(..., metavar="SUBMISSION_ID",
                                             help="Submission id; a unique prefix finds a listed entry (an unlisted one "
                                                  "only by its full id)."),
          as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """One published entry by its submission id: listed (as its board shows it) or unlisted."""
    from assay.service.board import board_text, entry as find_entry

    value = find_entry(open_store_at(db), submission_id, actor=OPERATOR)
    if as_json:
        sys.stdout.write(board_text(value))
        return
    e, s = value["entry"], value["suite"]
    out.print(f"{s['key']} {s['version']} — {e['agent_label']} (self-declared) by {e['public_handle']} · "
              f"{'listed' if value['listed'] else 'unlisted: reachable by this id only'}", markup=False)
    rank = str(e["rank"]) if e["rank"] is not None else "unranked"
    out.print(f"  {e['leaderboard_class']} · {e['status']} · rank {rank} · {e['n_runs']} runs on {e['n_cases']} cases",
              markup=False)
    for k in ("composite", "pass_rate", "consistency", "false_success_rate", "objective_met_rate"):
        if k in e:
            out.print(f"  {k} {_rate_ci(_number(e[k]), _interval(e.get(f'{k}_ci')))}", markup=False)
    if e.get("usage"):
        u = e["usage"]
        per = _number(e.get("cost_per_run_usd"))
        out.print(f"  tokens agent {_at(u, 'agent', 'prompt_tokens')} in / {_at(u, 'agent', 'completion_tokens')} out"
                  f"{' (self-reported)' if _at(u, 'agent', 'self_reported') else ''} · judge "
                  f"{_at(u, 'judge', 'prompt_tokens')} in / {_at(u, 'judge', 'completion_tokens')} out · cost per run "
                  + (f"${per:.6f}" if per is not None else f"no number ({_at(u, 'total', 'cost_reason')})"),
                  markup=False)
    out.print(f"  digest {e['digest'] or '-'}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("board")(board)
    app.command("entry")(entry)
    app.command("card")(card)
    app.command("compare")(compare)
