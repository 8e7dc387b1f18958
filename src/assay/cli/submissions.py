"""`assay submit|score|unpublish|note`: submit an agent to a released suite, judge its runs, take
it off the board, file an operator's note; and a submission's owner view (for `assay results`).

`assay.cli.lazy` calls `register(app)` when one of its commands is named. Every command takes
`--db URL` like the rest of the CLI, and follows its error contract: a refusal is a `BadInput`
(one stderr line, exit 2) raised before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import RenderableType
from rich.text import Text

from assay.cli.errors import StoreRetryOpt
from assay.errors import BadInput
from assay.cli.agent_opts import AgentEnvOpt, AgentMemoryOpt, agent_options, protect_local, refuse_unsandboxed
from assay.cli.ui import (
    BatchProgress, DbOpt, ExecutorOpt, JsonFlag, QuietFlag, RayAddressOpt, VersionOpt, WorkersOpt,
    Col, check_output, emit_json, fit_table, open_store_at, out, print_json, progress_bar, rate, says,
)

if TYPE_CHECKING:
    from assay.service.execution import FacilitatorRef

JudgeOpt = typer.Option(None, "--judge", help="rules | openai:MODEL (default: the judge the release pins).")
JudgeBaseUrlOpt = typer.Option(None, "--judge-base-url", help="OpenAI-compatible endpoint of a model judge "
                               "(default: the one the submission was judged at, else OPENAI_BASE_URL; a model judge "
                               "with none is refused). A connection gets 5 seconds; one that is refused or times out "
                               "is retried twice, quickly, then judging stops and says why (exit 1).")


def _builtin_suites() -> list[str]:
    """The built-in suite keys, read from the package's suites directory (as `resolve_suite` finds them)."""
    from assay import __file__ as package

    return sorted(p.parent.name for p in (Path(package).parent / "suites").glob("*/suite.yaml"))


def print_submission(view: dict[str, Any], console: Any = None, *, wide: bool = False) -> None:
    """A submission: what it is, where it stands, its figures, then every run with its seed
    (what `assay debrief RUN` takes), on `console` (default: stdout)."""
    console = console if console is not None else out
    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    say(f"submission {view['id']}  {view['suite']['key']} {view['suite']['version']}  [{view['agent']['label']}]")
    rank = f" · rank {view['rank']}" if view["rank"] is not None else ""
    say(f"  status {view['status']} · class {view['leaderboard_class']} · "
        f"published {'yes' if view['published'] else 'no'}"
        f"{'' if view.get('listed', True) else ' (unlisted: `assay entry ID`)'}{rank}")
    say(f"  runs counted {view['n_runs']}/{view['n_planned']} (gated {view['n_gated']})")
    say(f"  pass_rate {rate(view['pass_rate'])} · consistency {rate(view['consistency'])}")
    say(f"  false_success_rate {rate(view['false_success_rate'])} · "
        f"objective_met_rate {rate(view['objective_met_rate'])}")
    if view.get("digest"):
        say(f"  digest {view['digest']}")
    runs = view.get("runs") or []
    if not runs:
        return
    cols = [Col("run"), Col("case", wraps=True), Col("rep", 60, "right"), Col("seed", 90, "right"),
            Col("status", 95), Col("score", 70, "right"), Col("passed", 80), Col("gated", 50),
            *((Col("why it ended", 45, wraps=True),) if any(r.get("reason") for r in runs) else ())]
    rows: list[list[RenderableType]] = []
    for r in runs:
        recorded = r["status"] != "pending"
        rows.append([(r["run_id"] or "-") if wide else (r["run_id"] or "-")[:12], Text(r["scenario"]), str(r["rep"]),
                     str(r["seed"]), r["status"],
                     "-" if r["score"] is None else f"{r['score']:g}",
                     ("yes" if r["passed"] else "no") if recorded else "-",
                     "yes" if r["participation_gated"] else "",
                     *((Text(r.get("reason") or ""),) if len(cols) > 8 else ())])
    fit_table(console, cols, rows, wide=wide, title="runs (a run id prefix is enough for `assay debrief RUN`)")


def submit(
    key: str = typer.Argument(..., metavar="SUITE", help=f"Suite key of a released suite (built in: "
                              f"{', '.join(_builtin_suites())}; `assay suite list` lists every release)."),
    version: Optional[str] = VersionOpt,
    agent: str = typer.Option(..., "--agent", help="reference:NAME | python:FILE.py:NAME | python:module:NAME | openai:MODEL"),
    account: str = typer.Option(..., "--account", help="The submitting account."),
    label: str = typer.Option(..., "--label", help="Agent label (self-declared, shown as such)."),
    play_model: Optional[str] = typer.Option(None, "--play-model", help="The model used, self-reported (unverified)."),
    publish: bool = typer.Option(False, "--publish", help="Publish once complete (needs a public handle)."),
    unlisted: bool = typer.Option(
        False, "--unlisted", help="Publish unlisted: reachable by its submission id (`assay entry ID`), never listed "
        "on the board. Bring-your-own submissions only (--facilitator, --rubric or --byok)."),
    byok: bool = typer.Option(False, "--byok", help="Bring your own key: never ranked (self_hosted_facilitator)."),
    baseline: bool = typer.Option(False, "--baseline", help="An official baseline (suite owner only)."),
    as_json: bool = typer.Option(False, "--json", help="Print the owner's view (every run, with its seed) as JSON "
                                 "to stdout and nothing else there."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE",
                                          help="Write the owner's view (what --json prints: every run with its "
                                               "seed) to FILE."),
    workers: int = WorkersOpt,
    executor: Optional[str] = ExecutorOpt,
    ray_address: Optional[str] = RayAddressOpt,
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (openai: agents). A connection gets 5 seconds (an answer up to the run's time limit); a refused one is retried twice, quickly, then the run is recorded as error naming the endpoint and the cause."),
    judge: Optional[str] = JudgeOpt,
    judge_base_url: Optional[str] = JudgeBaseUrlOpt,
    facilitator: Optional[str] = typer.Option(
        None, "--facilitator", help="Bring your own facilitator for a campaign suite: openai:MODEL (its runs are "
        "never ranked: self_hosted_facilitator)."),
    facilitator_base_url: Optional[str] = typer.Option(
        None, "--facilitator-base-url", help="OpenAI-compatible endpoint of --facilitator (default: OPENAI_BASE_URL)."),
    rubric: Optional[Path] = typer.Option(
        None, "--rubric", help="Bring your own trait rubric (YAML) for a trait suite: its runs are never ranked."),
    agent_env: Optional[list[str]] = AgentEnvOpt,
    agent_memory: Optional[str] = AgentMemoryOpt,
    quiet: bool = QuietFlag,
    db: Optional[str] = DbOpt,
    store_retry: Optional[float] = StoreRetryOpt,
) -> None:
    """Submit an agent: the server runs every scenario × reps of the release, each with its own seed.

    A python: agent is played in a bubblewrap sandbox (see --agent-env, --agent-memory); without bwrap it is refused.

    A suite with a trait rubric (academy) is then scored by its judge (the release's, or --judge); the submission is complete once every run is judged.

    The submission id is printed (on stderr) as soon as the plan is stored, before the first run; if the process is stopped or killed, `assay resume ID` finishes the submission.

    Exit 1, with one line per reason, when no run could reach its agent or judging could not finish (`assay score ID` retries it)."""
    from assay.agents.loader import load_agent
    from assay.run.executors import make_executor
    from assay.service import submissions

    check_output(output)
    refuse_unsandboxed(agent, "assay submit")
    protect_local(None, db)
    factory = load_agent(agent, base_url=base_url, **agent_options(agent_env, agent_memory))
    make_executor(executor, workers, factory, ray_address=ray_address)  # refuse bad options before opening the store
    _check_judge(judge, judge_base_url)
    own_facilitator = _facilitator(facilitator, facilitator_base_url)
    own_rubric = None
    if rubric is not None:
        from assay.scenario.rubric import load_rubric

        own_rubric = load_rubric(rubric)
    store = open_store_at(db)
    from assay.service.scoring import check_judge

    check_judge(store, key, version, judge, judge_base_url, own_rubric=own_rubric is not None, actor=OPERATOR)
    with BatchProgress("submission", f"{key} · {factory.spec}", quiet=quiet) as progress:
        submission_id = submissions.submit(
            store, key, factory=factory, account=account, label=label, version=version, play_model=play_model,
            publish=publish, unlisted=unlisted, byok=byok, baseline=baseline, workers=workers, executor=executor,
            ray_address=ray_address, on_created=progress.created, on_done=progress.done,
            facilitator=own_facilitator, rubric=own_rubric, actor=OPERATOR)
    from assay.cli.failures import FAILED, judging_lines, no_agent_reached, say_all

    unreached = no_agent_reached(store, submission_id)
    summary = None if unreached else judge_submission(store, submission_id, judge, judge_base_url, quiet=quiet)
    view = submissions.results(store, submission_id, actor=OPERATOR)
    say = says(as_json)
    if quiet:  # what a script reads: the id and where it stands
        say.print(f"submission {view['id']} {view['status']}", markup=False, highlight=False)
    else:
        print_submission(view, say)
    emit_json(view, as_json=as_json, output=output)
    if output is not None and not quiet:
        say.print(f"owner view JSON (every run with its seed): {output}", markup=False, highlight=False)
    failed = [unreached] if unreached else judging_lines(summary)
    if failed:  # a submission that measured nothing, or whose judging could not finish: never a quiet 0
        say_all(failed)
        raise typer.Exit(FAILED)


def _scored(store: Any, submission_id: str, judge: str | None, base_url: str | None, quiet: bool) -> Any:
    """`scoring.score` with a progress bar over the passes it makes."""
    from assay.service import scoring

    with contextlib.ExitStack() as stack:
        advance: list[Callable[[Any, bool], None]] = []

        def start(total: int) -> None:
            advance.append(stack.enter_context(progress_bar(total, f"judging {submission_id[:12]}", quiet=quiet)))

        return scoring.score(store, submission_id, judge=judge, base_url=base_url, actor=OPERATOR,
                             on_start=start, on_pass=lambda _run, p: advance[0](p, p.valid))

def _facilitator(spec: str | None, base_url: str | None) -> FacilitatorRef | None:
    """A submission's own facilitator, checked before anything is stored (never its key)."""
    if spec is None:
        if base_url is not None:
            raise BadInput("--facilitator-base-url needs --facilitator openai:MODEL", "--facilitator-base-url")
        return None
    from assay.worlds.campaign.model_facilitator import FacilitatorSpec

    chosen = FacilitatorSpec(spec, base_url)
    if spec != "scripted":
        chosen()  # an endpoint it cannot reach without a key, or none at all, is refused now
    shown = chosen.shown
    return {"spec": shown["spec"], "base_url": shown["base_url"]}


def _check_judge(judge: str | None, base_url: str | None) -> None:
    """Refuse a bad --judge before anything is stored."""
    if judge is not None:
        from assay.score.judge import judge_from_spec

        judge_from_spec(judge, base_url)


def judge_submission(store: Any, submission_id: str, judge: str | None, base_url: str | None, *,
                     quiet: bool = False) -> Any:
    """Score a submission's runs with its judge (`scoring.ScoringSummary`); None for an oracle suite
    (nothing to judge)."""
    from assay.service.judgements import needs_judging

    if not needs_judging(store, submission_id):
        return None
    return _scored(store, submission_id, judge, base_url, quiet)


def score(
    submission: str = typer.Argument(..., help="Submission id (or a unique prefix)."),
    judge: Optional[str] = JudgeOpt,
    judge_base_url: Optional[str] = JudgeBaseUrlOpt,
    json_out: bool = JsonFlag,
    quiet: bool = QuietFlag,
    db: Optional[str] = DbOpt,
) -> None:
    """Score a submission's runs with its judge, or finish what an interrupted scoring left.

    The judge is pinned at a submission's first scoring (the release's by default) and every run is scored with it: a different --judge later is refused. Every pass is stored as it ends, so stopping loses nothing; the submission is complete, and published if it asked to be, once every run is judged.

    A model judge is asked at --judge-base-url, else at the endpoint the submission was judged at before. When judging cannot finish (the endpoint cannot be reached, passes keep failing) it exits 1 with one line per reason; `assay debrief RUN` says why a run has no judge score."""
    from assay.cli.failures import FAILED, judging_lines, say_all

    store = open_store_at(db)
    from assay.service import submissions
    from assay.service.completion import complete
    from assay.service.execution import all_recorded
    from assay.service.judgements import needs_judging

    found = submissions.find(store, submission)
    if found is not None and all_recorded(store, found):
        complete(store, found)  # a finalisation cut short is finished here too
        if not needs_judging(store, found):  # checks alone: nothing to judge, and now complete
            if json_out:
                print_json({"submission_id": found, "judge": None, "complete": True})
            else:
                out.print(f"submission {found}: complete (its suite is scored by its checks alone; nothing to "
                          "judge)", markup=False, highlight=False)
            return
    summary = _scored(store, submission, judge, judge_base_url, quiet)
    if json_out:
        print_json(dataclasses.asdict(summary))
    else:
        out.print(f"submission {summary.submission_id}: {summary.runs_scored} of {summary.runs_recorded} "
                  f"recorded runs scored by {summary.judge['model']} ({summary.passes_recorded} passes stored "
                  "now)", markup=False, highlight=False)
    failed = judging_lines(summary)
    if failed:
        say_all(failed)
        raise typer.Exit(FAILED)


def unpublish(submission: str = typer.Argument(..., help="Submission id (or a unique prefix)."),
              as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Take a submission off the public board (at any time; a new publication event)."""
    from assay.service import submissions

    view = submissions.unpublish(open_store_at(db), submission, actor=OPERATOR)
    if as_json:
        print_json(view)
        return
    out.print(f"submission {view['id']} unpublished", markup=False)


def note(submission: str = typer.Argument(..., help="Submission id (or a unique prefix)."),
         text: str = typer.Argument(..., help="The operator's variance note (empty withdraws it)."),
         as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """File an operator's variance note on an entry (the latest note is shown)."""
    from assay.service import submissions

    view = submissions.note(open_store_at(db), submission, text, actor=OPERATOR)
    if as_json:
        print_json(view)
        return
    out.print(f"submission {view['id']}: variance note {'set' if view['variance_note'] else 'withdrawn'}",
              markup=False)


def submission_results(store: Any, ident: str) -> dict[str, Any] | None:
    """The owner's view if `ident` names a submission (id or unique prefix), else None."""
    from assay.service import submissions

    found = submissions.find(store, ident)
    return submissions.results(store, found, actor=OPERATOR) if found is not None else None


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
    app.command("score")(score)
    app.command("unpublish")(unpublish)
    app.command("note")(note)
