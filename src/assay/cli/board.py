"""`assay suite|account|submit|unpublish|config|note|era|board|card|compare`: releases, submissions, the board.

`assay.cli` calls `register(app)`. Every command takes `--db URL` like the rest of the CLI, and
follows its error contract: a refusal is a `BadInput` (one stderr line, exit 2) raised before
anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from assay.cli.errors import StoreRetryOpt
from assay.errors import BadInput
from assay.cli.agent_opts import AgentEnvOpt, AgentMemoryOpt, agent_options, protect_local, refuse_unsandboxed
from assay.cli.ui import (
    AlwaysJson, BatchProgress, DbOpt, ExecutorOpt, JsonFlag, QuietFlag, RayAddressOpt, WorkersOpt,
    Col, WideFlag, check_output, emit_json, fit_table, open_store_at, out, print_json, progress_bar, says,
)

VersionOpt = typer.Option(None, "--version", help="Suite version (default: the latest).")
JudgeOpt = typer.Option(None, "--judge", help="rules | openai:MODEL (default: the judge the release pins).")
JudgeBaseUrlOpt = typer.Option(None, "--judge-base-url", help="OpenAI-compatible endpoint of a model judge "
                               "(default: the one the submission was judged at, else OPENAI_BASE_URL; a model judge "
                               "with none is refused). A connection gets 5 seconds; one that is refused or times out "
                               "is retried twice, quickly, then judging stops and says why (exit 1).")
#: What `assay compare --metric` accepts (assay.service.compare.METRICS; named here so --help
#: stays fast, and checked equal by the tests).
COMPARE_METRICS = ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")

def _builtin_suites() -> list[str]:
    """The built-in suite keys, read from the package's suites directory (as `resolve_suite` finds them)."""
    from assay import __file__ as package

    return sorted(p.parent.name for p in (Path(package).parent / "suites").glob("*/suite.yaml"))


suite_app = typer.Typer(no_args_is_help=True, help="Release suites and read what each release pins.")
account_app = typer.Typer(no_args_is_help=True, help="Accounts and their public handles.")
config_app = typer.Typer(no_args_is_help=True, help="Platform config: keyed JSON values with history.")
era_app = typer.Typer(no_args_is_help=True, help="Measurement eras: versions of the measurement stack.")




def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _figure(value: float | None, ci: list[float] | None) -> str:
    """A board figure over its 95% interval, on two lines (a narrow column never splits it)."""
    if value is None or ci is None:
        return _rate(value)
    return f"{value:.4f}\n[{ci[0]:.4f}, {ci[1]:.4f}]"


def _rate_ci(value: float | None, ci: list[float] | None) -> str:
    """A figure with its 95% interval beside it: `1.0000 [0.5655, 1.0000]`."""
    if value is None or ci is None:
        return _rate(value)
    return f"{value:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"


# -- suite --------------------------------------------------------------------------------------


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


# -- account ------------------------------------------------------------------------------------


def _print_account(view: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(view)
    else:
        out.print(f"account {view['name']}: public handle {view['public_handle'] or '(none)'}", markup=False)


@account_app.command("create")
def account_create(
    name: str = typer.Argument(..., help="Account name (a-z, 0-9, '-')."),
    public_handle: Optional[str] = typer.Option(None, "--public-handle", help="The name shown on the board."),
    as_json: bool = JsonFlag, db: Optional[str] = DbOpt,
) -> None:
    """Create an account, optionally with a public handle (needed to publish)."""
    from assay.service import accounts

    _print_account(accounts.create(open_store_at(db), name, public_handle, actor=OPERATOR), as_json)


@account_app.command("set-handle")
def account_set_handle(name: str = typer.Argument(..., help="Account name."),
                       handle: str = typer.Argument(..., help="The new public handle, shown on the board."),
                       as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Set an account's public handle (a new handle event; the history is kept)."""
    from assay.service import accounts

    _print_account(accounts.set_handle(open_store_at(db), name, handle, actor=OPERATOR), as_json)


@account_app.command("revoke-handle")
def account_revoke_handle(name: str = typer.Argument(..., help="Account name."), as_json: bool = JsonFlag,
                          db: Optional[str] = DbOpt) -> None:
    """Revoke an account's public handle: its entries leave the public board at once."""
    from assay.service import accounts

    _print_account(accounts.revoke_handle(open_store_at(db), name, actor=OPERATOR), as_json)


@account_app.command("show")
def account_show(name: str = typer.Argument(..., help="Account name."), as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """An account, its public handle and the handle's history."""
    from assay.service import accounts

    _print_account(accounts.view(open_store_at(db), name, actor=OPERATOR), as_json)


# -- submissions --------------------------------------------------------------------------------


def print_submission(view: dict[str, Any], console: Any = None, *, wide: bool = False) -> None:
    """A submission: what it is, where it stands, its figures, then every run with its seed
    (what `assay debrief RUN` takes), on `console` (default: stdout)."""
    from assay.cli.ui import Col, fit_table

    console = console if console is not None else out
    say = lambda line: console.print(line, markup=False, highlight=False)  # noqa: E731
    say(f"submission {view['id']}  {view['suite']['key']} {view['suite']['version']}  [{view['agent']['label']}]")
    rank = f" · rank {view['rank']}" if view["rank"] is not None else ""
    say(f"  status {view['status']} · class {view['leaderboard_class']} · "
        f"published {'yes' if view['published'] else 'no'}"
        f"{'' if view.get('listed', True) else ' (unlisted: `assay entry ID`)'}{rank}")
    say(f"  runs counted {view['n_runs']}/{view['n_planned']} (gated {view['n_gated']})")
    say(f"  pass_rate {_rate(view['pass_rate'])} · consistency {_rate(view['consistency'])}")
    say(f"  false_success_rate {_rate(view['false_success_rate'])} · "
        f"objective_met_rate {_rate(view['objective_met_rate'])}")
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


def _facilitator(spec: str | None, base_url: str | None) -> dict[str, Any] | None:
    """A submission's own facilitator, checked before anything is stored (never its key)."""
    if spec is None:
        if base_url is not None:
            raise BadInput("--facilitator-base-url needs --facilitator openai:MODEL", "--facilitator-base-url")
        return None
    from assay.worlds.campaign.model_facilitator import FacilitatorSpec

    chosen = FacilitatorSpec(spec, base_url)
    if spec != "scripted":
        chosen()  # an endpoint it cannot reach without a key, or none at all, is refused now
    return chosen.shown


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


# -- config and eras ----------------------------------------------------------------------------


@config_app.command("get")
def config_get(key: Optional[str] = typer.Argument(None, help="Config key (default: every known key)."),
               as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Print the value in force (defaults filled in) and its history, as JSON."""
    from assay.service import platform_config

    store = open_store_at(db)
    if key is None:
        print_json({k: platform_config.get(store, k) for k in platform_config.KNOWN_KEYS})
        return
    print_json(platform_config.describe(store, key))


@config_app.command("set")
def config_set(key: str = typer.Argument(..., help="Config key."),
               value: str = typer.Argument(..., help="The new value, a JSON object."),
               as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Append a new value for KEY (the old ones stay in its history)."""
    from assay.service import platform_config

    parsed = platform_config.parse_json_value(value, key)
    platform_config.validate_value(key, parsed)
    print_json({"key": key, "value": platform_config.set_value(open_store_at(db), key, parsed, actor=OPERATOR)})


@config_app.command("price")
def config_price(model: Optional[str] = typer.Argument(None, help="Model name as agents and judges name it "
                                                                  "(default: list every priced model)."),
                 prompt: Optional[float] = typer.Option(None, "--prompt", help="USD per million prompt tokens."),
                 completion: Optional[float] = typer.Option(None, "--completion",
                                                            help="USD per million completion tokens."),
                 cached: Optional[float] = typer.Option(None, "--cached", help="USD per million cached prompt "
                                                        "tokens (default: the prompt price)."),
                 as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Set a model's price (appended: usage recorded earlier keeps the price of its time), or show it.

    With --prompt and --completion, append a price for MODEL; with neither, print its price and
    history; with no MODEL, every priced model and its price in force."""
    from assay.service import usage

    store = open_store_at(db)
    if model is None:
        print_json({"prices": usage.price_table(store)})
        return
    if prompt is None and completion is None and cached is None:
        print_json(usage.describe_price(store, model))
        return
    if prompt is None or completion is None:
        raise BadInput("a price needs both --prompt and --completion (USD per million tokens)", where="--prompt")
    print_json(usage.set_price(store, model, prompt=prompt, completion=completion, cached=cached, actor=OPERATOR))


@era_app.command("add")
def era_add(name: str = typer.Argument(..., help="Era name, e.g. 2026-06-scoring-fix."),
            starts: str = typer.Option(..., "--from", help="ISO 8601 start (a date means 00:00 UTC)."),
            reason: str = typer.Option(..., "--reason", help="What changed in the measurement stack."),
            as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Add a measurement-era boundary; submissions created from then on are stamped with it."""
    from assay.service import platform_config

    era = platform_config.add_era(open_store_at(db), name, starts, reason, actor=OPERATOR)
    if as_json:
        print_json(era)
        return
    out.print(f"era {era['name']} from {era['from']}", markup=False)


@era_app.command("list")
def era_list(as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """The era boundaries, oldest first, marking the current one."""
    from assay.service import platform_config

    rows = platform_config.eras(open_store_at(db))
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no measurement eras defined")
    for e in rows:
        out.print(f"{'*' if e['current'] else ' '} {e['name']}  from {e['from']}  {e['reason']}", markup=False)


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
        era = (e["measurement_era"] or "-") + ("" if e["measurement_era_is_current"] else " (old era)")
        judged: tuple[Any, ...] = ()
        if traits:
            measured = [v for v in (e.get("safety") or {}).values() if v is not None]  # null: measured nowhere
            worst = f"{min(measured):.4f} min" if measured else "-"
            judged = (_figure(e.get("composite"), e.get("composite_ci")), worst, e.get("stability") or "-")
        digest = e.get("digest") or "-"
        rows.append([str(e["rank"]) if e["rank"] is not None else "-", Text(e["agent_label"]),
                     Text(e["public_handle"] or "-"), e["leaderboard_class"], str(e["n_cases"]), str(e["n_runs"]),
                     *judged,
                     *(_figure(e[k], e[f"{k}_ci"]) for k in
                       ("pass_rate", "consistency", "false_success_rate", "objective_met_rate")), era,
                     *((Text(e.get("variance_note") or "-"),) if notes else ()),
                     digest if wide else digest[:12]])
    fit_table(out, cols, rows, wide=wide, caption=r"figure, and below it \[lo, hi]: its 95% interval, clustered by case")
    if traits:
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
              f"{a['agent_label']} ({a['submission_id'][:12]}) {_rate(a[metric])} − "
              f"{b['agent_label']} ({b['submission_id'][:12]}) {_rate(b[metric])}", markup=False)
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


# -- results for a submission (wired by assay.cli's `results`) ----------------------------------


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
            out.print(f"  {k} {_rate_ci(e[k], e.get(f'{k}_ci'))}", markup=False)
    if e.get("usage"):
        u = e["usage"]
        per = e.get("cost_per_run_usd")
        out.print(f"  tokens agent {u['agent']['prompt_tokens']} in / {u['agent']['completion_tokens']} out"
                  f"{' (self-reported)' if u['agent']['self_reported'] else ''} · judge {u['judge']['prompt_tokens']}"
                  f" in / {u['judge']['completion_tokens']} out · cost per run "
                  + (f"${per:.6f}" if per is not None else f"no number ({u['total']['cost_reason']})"), markup=False)
    out.print(f"  digest {e['digest'] or '-'}", markup=False)


def submission_results(store: Any, ident: str) -> dict[str, Any] | None:
    """The owner's view if `ident` names a submission (id or unique prefix), else None."""
    from assay.service import submissions

    found = submissions.find(store, ident)
    return submissions.results(store, found, actor=OPERATOR) if found is not None else None


def register(app: typer.Typer) -> None:
    app.add_typer(suite_app, name="suite")
    app.add_typer(account_app, name="account")
    app.add_typer(config_app, name="config")
    app.add_typer(era_app, name="era")
    app.command("submit")(submit)
    app.command("score")(score)
    app.command("unpublish")(unpublish)
    app.command("note")(note)
    app.command("board")(board)
    app.command("entry")(entry)
    app.command("card")(card)
