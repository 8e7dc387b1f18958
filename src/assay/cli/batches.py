"""`assay resume|batches|submissions|runs`: finishing a stopped batch, and finding what is stored.

`assay.cli` calls `register(app)`. A refusal is a `BadInput` (one stderr line, exit 2) raised
before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import dataclasses
from typing import Any, Optional, TypedDict

import typer

from assay.cli.agent_opts import (
    AgentEnvOpt, AgentMemoryOpt, MaxCostOpt, agent_options, protect_local, say_cost_cap, warn_unsandboxed,
)
from assay.cli.errors import StoreRetryOpt
from assay.cli.ui import (
    DbOpt, ExecutorOpt, JsonFlag, QuietFlag, RayAddressOpt, WideFlag, WorkersOpt, open_store_at, out, print_json,
)


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if hasattr(value, "isoformat") else str(value)


def resume(
    ident: str = typer.Argument(..., metavar="BATCH_OR_SUBMISSION", help="Batch or submission id (or a unique prefix)."),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="The agent to play with (default: the one stored with the batch); its "
        "configuration signature must be the stored one."),
    agent_env: Optional[list[str]] = AgentEnvOpt,
    agent_memory: Optional[str] = AgentMemoryOpt,
    workers: int = WorkersOpt,
    executor: Optional[str] = ExecutorOpt,
    ray_address: Optional[str] = RayAddressOpt,
    max_cost: Optional[float] = MaxCostOpt,
    quiet: bool = QuietFlag,
    as_json: bool = JsonFlag,
    db: Optional[str] = DbOpt,
    store_retry: Optional[float] = StoreRetryOpt,
) -> None:
    """Finish a batch or submission that a killed, stopped or failed process left.

    Plays every slot that never ran or was held by a process that is gone; runs already recorded are never played or recorded again. Several resumes of one batch at once split the work.

    A python: agent is played as the batch was (sandboxed, or in process if it was run with --in-process), with the --agent-env and --agent-memory it was stored with unless given again."""
    from assay.store.runs_repo import RunsRepo
    from assay.run.executors import make_executor
    from assay.service import batches, completion, execution
    from assay.cli.ui import BatchProgress

    store = open_store_at(db)
    batch = batches.find(store, ident, actor=OPERATOR)
    noun = "submission" if batch.kind == "submission" else "batch"
    left = not execution.all_recorded(store, batch.id)
    if left or agent is not None:  # an agent named again is checked, whether or not it has runs to play
        protect_local(None, db)
        factory, limits = execution.stored_agent(store, batch.id, agent, agent_options(agent_env, agent_memory))
        warn_unsandboxed(factory)
    budget = None
    if left:
        from assay.service.usage import Budget

        budget = None if max_cost is None else Budget(store, batch.id, max_cost)
        chosen = make_executor(executor, workers, factory, ray_address=ray_address)
        scenarios = execution.stored_scenarios(store, batch.id)
        with BatchProgress(noun, f"resume {batch.suite_key} · {batch.agent_spec}", quiet=quiet,
                           announce=False) as progress:
            progress.created(batch.id, execution.pending(store, batch.id))
            execution.execute_pending(store, batch.id, factory, chosen, limits, scenarios, progress.done,
                                    budget=budget)
        if budget is not None and budget.stopped:
            say_cost_cap(budget, store, batch.id)
    # every run recorded (now, or before: a finalisation cut short): finish it, whoever played it
    finished = completion.complete(store, batch.id)
    if batch.kind == "submission":
        from assay.cli.submissions import judge_submission

        summary = judge_submission(store, batch.id, None, None, quiet=quiet)  # the runs it just recorded
    else:
        summary = None
    listing = next(b for b in RunsRepo(store).batch_listing() if b.id == batch.id)
    if as_json:
        print_json({"id": batch.id, "kind": batch.kind, "n_recorded": listing.n_recorded,
                    "n_planned": listing.n_planned, "complete": bool(finished)})
    else:
        word = "complete" if finished else "not complete yet (another process still holds some of its slots)"
        out.print(f"{noun} {batch.id}: {listing.n_recorded}/{listing.n_planned} runs recorded, {word}",
                  markup=False, highlight=False)
    from assay.cli.failures import FAILED, judging_lines, say_all

    failed = judging_lines(summary)
    if failed:  # judging could not finish: say why, never a quiet 0
        say_all(failed)
        raise typer.Exit(FAILED)


def batches_cmd(
    kind: Optional[str] = typer.Option(None, "--kind", metavar="run|submission", help="Only batches of this kind."),
    as_json: bool = JsonFlag, db: Optional[str] = DbOpt,
) -> None:
    """Every stored batch, newest first: id, kind, suite, agent, when, status, runs recorded of planned."""
    from rich.table import Table

    from assay.errors import BadInput
    from assay.service import batches

    if kind not in (None, "run", "submission"):
        raise BadInput("is run or submission", "--kind")
    rows = batches.list_batches(open_store_at(db), kind, actor=OPERATOR)
    if as_json:
        print_json([{**dataclasses.asdict(r), "created_at": _when(r.created_at)} for r in rows])
        return
    if not rows:
        out.print("no batches yet — play one with: assay run forge --agent reference:diligent", markup=False,
                  highlight=False, soft_wrap=True)
        return
    table = Table(title="batches")
    for col in ("id", "kind", "suite", "agent", "created", "status", "recorded"):
        table.add_column(col, no_wrap=col in ("id", "created"))
    for r in rows:
        table.add_row(r.id, r.kind, f"{r.suite_key} {r.suite_version or ''}".strip(), r.agent_label,
                      _when(r.created_at)[:19], r.status, f"{r.n_recorded}/{r.n_planned}")
    out.print(table)


def submissions_cmd(
    account: Optional[str] = typer.Option(None, "--account", help="Only this account's submissions."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Only submissions to this suite key."),
    as_json: bool = JsonFlag, wide: bool = WideFlag, db: Optional[str] = DbOpt,
) -> None:
    """Submissions, newest first: id, suite, version, label, status, runs planned / recorded / scored."""
    from rich.text import Text

    from assay.cli.ui import Col, fit_table
    from assay.service import batches

    rows = batches.list_submissions(open_store_at(db), account, suite, actor=OPERATOR)
    if as_json:
        print_json([dataclasses.asdict(r) for r in rows])
        return
    if not rows:
        out.print("no submissions yet — make one with: assay submit forge --agent reference:diligent "
                  "--account NAME --label LABEL", markup=False, highlight=False, soft_wrap=True)
        return
    cols = [Col("id"), Col("account", 40, wraps=True), Col("suite", 80, wraps=True), Col("label", 60, wraps=True),
            Col("status", 90), Col("planned", 55, "right"), Col("recorded", 75, "right"),
            Col("scored", 65, "right"), Col("created", 30)]
    fit_table(out, cols, [[r.id if wide else r.id[:12], Text(r.account), Text(f"{r.suite} {r.version}"),
                           Text(r.label), r.status, str(r.n_planned), str(r.n_recorded),
                           str(r.n_scored), r.created_at[:16].replace("T", " ")] for r in rows],
              wide=wide, title="submissions (an id prefix is enough for every command)")


class _RunRow(TypedDict):
    """A row of `assay runs` (printed as it is with --json: these keys, in this order)."""

    run_id: str
    case_id: str
    trial: int
    status: str
    score: int | None
    passed: bool | None
    claimed_success: bool | None
    false_success: bool


def runs_cmd(
    ident: str = typer.Argument(..., metavar="BATCH_OR_SUBMISSION", help="Batch or submission id (or a unique prefix)."),
    as_json: bool = JsonFlag, wide: bool = WideFlag, db: Optional[str] = DbOpt,
) -> None:
    """The planned runs of a batch or submission: run id, case, trial, status, score, passed.

    A slot with no run recorded yet is `pending` here (in the results JSON it counts as a failed `error` trial, because the denominator is the plan)."""
    from rich.text import Text

    from assay.cli.ui import Col, fit_table

    from assay.service import batches
    from assay.service.results import batch_results

    store = open_store_at(db)
    batch = batches.find(store, ident, actor=OPERATOR)
    results = batch_results(store, batch.id, actor=OPERATOR)
    rows: list[_RunRow] = [
        {"run_id": t.run_id, "case_id": c.case_id, "trial": t.trial,
         "status": t.status if t.recorded else "pending",
         # a slot with no run has no score and no verdict yet (the results JSON counts it failed)
         "score": t.score if t.recorded else None, "passed": t.passed if t.recorded else None,
         "claimed_success": t.claimed_success, "false_success": t.false_success}
        for c in results.cases for t in c.trials]
    if as_json:
        print_json(rows)
        return
    claim = {True: "success", False: "no", None: "-"}
    cols = [Col("run"), Col("case", wraps=True), Col("trial", 60, "right"), Col("status", 90),
            Col("score", 80, "right"), Col("passed", 85), Col("claimed", 70)]
    fit_table(out, cols, [[r["run_id"], Text(r["case_id"]), str(r["trial"]), r["status"],
                           *(("-", "-", "-") if r["status"] == "pending" else
                             (str(r["score"]), "yes" if r["passed"] else "no", claim[r["claimed_success"]]))]
                          for r in rows], wide=wide, title=f"runs of {batch.kind} {batch.id}")


def register(app: typer.Typer) -> None:
    app.command("resume")(resume)
    app.command("batches")(batches_cmd)
    app.command("submissions")(submissions_cmd)
    app.command("runs")(runs_cmd)
