"""`assay`: run agents in simulated worlds, score them, and read back what was stored.

Bad input prints one line to stderr and exits 2, changing nothing stored (docs/architecture.md, Errors).
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import gc
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from assay.cli import lazy
from assay.cli.errors import StoreRetryOpt
from assay.errors import BadInput
from assay.cli.ui import (
    AlwaysJson, DbOpt, ExecutorOpt, JsonFlag, OutputOpt, QuietFlag, RayAddressOpt, WideFlag, WorkersOpt, check_output,
    close_stores,
    emit_json, err, open_store_at, out, print_json, says,
)
from assay.cli.agent_opts import (  # noqa: E402
    AgentEnvOpt, AgentMemoryOpt, InProcessFlag, MaxCostOpt, agent_options, protect_local, say_cost_cap,
    warn_unsandboxed,
)

#: A value's placeholder by its parameter's name, where the name alone does not say it.
_METAVARS = {"db": "URL", "base_url": "URL", "judge_base_url": "URL", "facilitator_base_url": "URL",
             "ray_address": "ADDRESS", "agent": "SPEC", "judge": "SPEC", "facilitator": "SPEC",
             "play_model": "MODEL", "agent_memory": "SIZE", "agent_env": "NAME[=VALUE]", "starts": "WHEN",
             "time_limit": "SECONDS", "store_retry": "SECONDS", "public_handle": "HANDLE"}


def _conventional_help() -> None:
    """Help as people write it: `SUITE` and `[BATCH]` rather than `{suite}` and `<str>`, a value's
    placeholder named for what it holds (`--trials N`, `--db URL`, `--rubric FILE`), a range in
    words (`N (1 to 10000)`), and flags bare."""
    core = getattr(typer, "core", None)
    argument, option = getattr(core, "TyperArgument", None), getattr(core, "TyperOption", None)
    if argument is None or option is None or getattr(option, "_assay_help", False):
        return

    def placeholder(param: Any) -> str:
        if param.metavar is not None:
            return str(param.metavar)
        name = str(param.name or "value")
        if name in _METAVARS:
            return _METAVARS[name]
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        if annotation is int:
            return "N"
        if annotation is float:
            return "NUMBER"
        if isinstance(annotation, type) and issubclass(annotation, Path):
            return "FILE"
        return name.upper()

    def argument_name(self: Any) -> str:
        return placeholder(self)

    def usage_name(self: Any) -> str:
        name = placeholder(self) + ("..." if self.nargs != 1 else "")
        return name if self.required else f"[{name}]"

    def option_type(self: Any, ctx: Any) -> Any:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None
        return placeholder(self) + ("..." if self.nargs != 1 else "")

    def in_words(self: Any) -> str | None:
        low, high = getattr(self, "min", None), getattr(self, "max", None)
        if low is not None and high is not None:
            return f"{low:g} to {high:g}"
        if low is not None:
            return f"at least {low:g}"
        return None if high is None else f"at most {high:g}"

    argument.display_name_raw = property(argument_name)
    argument._usage_display_name = usage_name
    argument.display_type_rich = lambda self, ctx: None
    option.display_type_rich = option_type
    for kind in (argument, option):
        kind._get_number_range_help_str = in_words
    rich_utils = getattr(typer, "rich_utils", None)
    if rich_utils is not None:
        rich_utils.RANGE_STRING = " ({})"
    option._assay_help = True


_conventional_help()


app = typer.Typer(
    cls=lazy.LazyGroup, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Assay: benchmark AI agents in simulated worlds with a known, hidden ground truth.",
)


def _print_version(value: bool) -> None:
    if value:
        from assay import HARNESS_VERSION, __version__

        out.print(f"assay {__version__} ({HARNESS_VERSION})", markup=False, highlight=False)
        raise typer.Exit()


def _debug(value: bool) -> bool:
    if value:
        import os

        from assay.cli.errors import ENV_DEBUG

        os.environ[ENV_DEBUG] = "1"
    return value


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit."),
          debug: bool = typer.Option(False, "--debug", callback=_debug,
                                     help="Print the traceback of a store fault after its one line "
                                          "(also ASSAY_DEBUG=1).")) -> None:
    """Assay: benchmark AI agents in simulated worlds with a known, hidden ground truth."""


from assay.cli.validate import validate  # noqa: E402 - in its own module, listed here in --help order

app.command()(validate)


@app.command()
def schema(as_json: bool = AlwaysJson) -> None:
    """Print the JSON Schema of scenario documents (for editors): assay schema > scenario.schema.json"""
    from assay.scenario.models import Scenario
    from assay.worlds.estate.spec import EstateSpec

    doc = Scenario.model_json_schema(by_alias=True)
    world = EstateSpec.model_json_schema(ref_template="#/$defs/{model}")
    doc.setdefault("$defs", {}).update(world.pop("$defs", {}))
    doc["$defs"]["EstateWorld"] = world
    doc["properties"]["world"] = {"$ref": "#/$defs/EstateWorld", "description": "the estate kit's world block"}
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["title"] = "Assay scenario"
    print_json(doc)


#: A built-in suite's version on disk (`assay run forge --version 2.0`); a file's own version must match.
SuiteVersionOpt = typer.Option(
    None, "--version", help="The suite version to play: a built-in suite's default is the document at "
    "suites/KEY/suite.yaml (forge: 1.0); another version is named (forge: 2.0, 55 cases). For a suite file, "
    "its own version must match.")


@app.command()
def cases(suite: str = typer.Argument("forge", help="Built-in suite key, suite file or scenario directory."),
          version: Optional[str] = SuiteVersionOpt,
          as_json: bool = JsonFlag) -> None:
    """List a suite's cases with their content hashes."""
    from rich.table import Table

    from assay.service.suites import resolve_suite

    bundle = resolve_suite(suite, version)
    if as_json:
        print_json({"suite": {"key": bundle.key, "version": bundle.version},
                    "cases": [{"case_id": s.id, "hash": s.content_hash, "frozen_on": s.scenario.frozen_on,
                               "safety_checks": sum(c.safety for c in s.scenario.checks), "title": s.scenario.title}
                              for s in bundle.scenarios]})
        return
    table = Table(title=f"{bundle.key} {bundle.version or ''}".strip())
    for col in ("case", "hash", "frozen on", "safety checks", "title"):
        table.add_column(col)
    for s in bundle.scenarios:
        table.add_row(s.id, s.content_hash[:12], s.scenario.frozen_on or "-",
                      str(sum(c.safety for c in s.scenario.checks)), s.scenario.title)
    out.print(table)


@app.command()
def run(
    suite: str = typer.Argument(..., help="Built-in suite key (forge), a suite file, a scenario file or directory."),
    version: Optional[str] = SuiteVersionOpt,
    agent: str = typer.Option(..., "--agent", help="reference:NAME | python:FILE.py:NAME | python:module:NAME | openai:MODEL"),
    trials: int = typer.Option(3, "--trials", min=1, max=10000, help="Trials per case."),
    seed: int = typer.Option(0, "--seed", min=0, help="Run seed; in-run chance derives from it, the case and the trial."),
    time_limit: float = typer.Option(60.0, "--time-limit", min=0.01,
                                     help="Seconds the agent may spend thinking in a run, summed over its turns "
                                          "(the world's own time is not counted); past it the run ends as timeout."),
    turn_limit: int = typer.Option(40, "--turn-limit", min=1, help="Agent turns per run."),
    workers: int = WorkersOpt,
    executor: Optional[str] = ExecutorOpt,
    ray_address: Optional[str] = RayAddressOpt,
    label: Optional[str] = typer.Option(None, "--label", help="Agent label (default: from the spec)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON to stdout and nothing else there "
                                 "(the table and messages go to stderr)."),
    output: Optional[Path] = OutputOpt,
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (openai: agents). A connection gets 5 seconds (an answer up to the run's time limit); a refused one is retried twice, quickly, then the run is recorded as error naming the endpoint and the cause."),
    fail_under: Optional[float] = typer.Option(
        None, "--fail-under", min=0.0, max=1.0, metavar="RATE",
        help="Exit 1 when the pass rate is below RATE (0..1), for CI pipelines; otherwise a batch that ran exits 0."),
    agent_env: Optional[list[str]] = AgentEnvOpt,
    agent_memory: Optional[str] = AgentMemoryOpt,
    in_process: bool = InProcessFlag,
    max_cost: Optional[float] = MaxCostOpt,
    quiet: bool = QuietFlag,
    wide: bool = WideFlag,
    db: Optional[str] = DbOpt,
    store_retry: Optional[float] = StoreRetryOpt,
) -> None:
    """Run an agent on every case × trial, score each run by oracle checks, store everything.

    A python: agent is played in a bubblewrap sandbox (see --agent-env, --agent-memory, --in-process).

    The batch is stored before its first run and each run as it ends: if the process is stopped (Ctrl-C exits 130, SIGTERM 143) or killed, `assay resume BATCH` plays what is left.

    A batch in which no run could reach its agent (an openai: endpoint refused, timed out or did not resolve) exits 1 with one line saying so."""
    from assay.agents.loader import load_agent
    from assay.run.engine import Limits
    from assay.run.executors import make_executor
    from assay.service.results import batch_results
    from assay.service.runs import run_suite
    from assay.service.suites import resolve_suite
    from assay.cli.ui import BatchProgress, print_summary

    bundle = resolve_suite(suite, version)
    protect_local(bundle.source, db)
    factory = load_agent(agent, base_url=base_url, in_process=in_process, **agent_options(agent_env, agent_memory))
    warn_unsandboxed(factory)
    chosen = make_executor(executor, workers, factory, ray_address=ray_address)
    check_output(output)
    store = open_store_at(db, needed=bundle)
    say = says(as_json)
    budgets: list[Any] = []
    gc.freeze()  # what is loaded lives as long as the command: out of the collector's full passes (a batch's records)
    with BatchProgress("batch", f"{bundle.key} · {factory.spec}", quiet=quiet, announce=False) as progress:
        result = run_suite(bundle, factory=factory, trials=trials, seed=seed, workers=workers, label=label,
                           limits=Limits(turn_limit=turn_limit, time_limit=time_limit), store=store,
                           executor=chosen, on_created=progress.created, progress=progress.done,
                           max_cost=max_cost, on_budget=budgets.append)
    report = batch_results(store, result.batch_id, actor=OPERATOR)
    results = report.as_json()
    if not quiet:
        print_summary(say, [results], wide=wide)
    emit_json(results, as_json=as_json, output=output)
    if output is not None and not quiet:
        say.print(f"results JSON: {output}", markup=False, highlight=False, soft_wrap=True)
    say.print(f"batch {result.batch_id} stored in {store.url}", markup=False, highlight=False, soft_wrap=True)
    if budgets and budgets[0].stopped:
        say_cost_cap(budgets[0], store, result.batch_id)
    from assay.cli.failures import FAILED, no_agent_reached_in, say_all

    unreached = no_agent_reached_in(results)
    if unreached is not None:  # the batch measured nothing: never a quiet exit 0
        say_all([unreached])
        sys.exit(FAILED)
    if fail_under is not None and report.summary.pass_rate < fail_under:
        err.print(f"assay: pass rate {report.summary.pass_rate:.4f} is below --fail-under {fail_under:g}",
                  markup=False, highlight=False)
        sys.exit(1)


@app.command()
def results(
    ident: Optional[str] = typer.Argument(None, metavar="BATCH_OR_SUBMISSION",
                         help="Batch or submission id, or a unique prefix (default: the latest batch)."),
    as_json: bool = JsonFlag,
    output: Optional[Path] = OutputOpt,
    wide: bool = WideFlag,
    db: Optional[str] = DbOpt,
) -> None:
    """A stored batch's results (the results JSON with --json), or a submission's owner view (runs and seeds)."""
    from assay.cli.submissions import print_submission, submission_results
    from assay.service.results import results_json
    from assay.store.runs_repo import RunsRepo
    from assay.cli.ui import print_cases, print_summary

    if as_json and output is None and ident is not None and ident.endswith(".json"):
        raise BadInput(_JSON_TAKES_NO_FILE, ident)
    check_output(output)
    store = open_store_at(db)
    runs = RunsRepo(store)
    ident = ident or runs.latest_batch_id()
    if ident is None:
        raise BadInput("the store holds no finished batches yet; run `assay run` first")
    if runs.resolve_batch_id(ident) is None and runs.resolve_run_id(ident) is not None:
        raise BadInput("this is a run id, not a batch or submission; `assay debrief` shows a run", ident)
    view = submission_results(store, ident)
    document = view if view is not None else results_json(store, ident, actor=OPERATOR)
    emit_json(document, as_json=as_json, output=output)
    if as_json:
        return
    if view is not None:
        print_submission(view, wide=wide)
    else:
        print_summary(out, [document], wide=wide)
        print_cases(out, document, wide=wide)
    if output is not None:
        out.print(f"results JSON: {output}", markup=False, highlight=False)


#: What an old-style `--json FILE` is told: the flag prints, `--output` writes.
_JSON_TAKES_NO_FILE = "--json takes no value now (it prints the JSON document to stdout); write the file with --output FILE"


def _old_json_file(argv: list[str]) -> str | None:
    """The FILE of an old-style `--json FILE`, when one follows the flag; else None."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "--json" and value.endswith(".json") and not value.startswith("-"):
            return value
    return None


@app.command()
def replay(run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."), as_json: bool = JsonFlag,
           db: Optional[str] = DbOpt) -> None:
    """Rebuild the world from the pinned scenario and seed, re-apply the run's actions, compare hashes.

    Exit 0 when the final state hash is identical, 1 when it diverged."""
    from assay.service.results import replay_view

    report = replay_view(open_store_at(db), run_id, actor=OPERATOR)
    if as_json:
        print_json(report.as_json())
    else:
        word = "[green]identical[/]" if report.identical else "[red]diverged[/]"
        out.print(f"run {report.run_id} ({report.case_id}): {report.actions} actions replayed — {word}")
        out.print(f"  stored   {report.stored_final_state_hash}")
        out.print(f"  replayed {report.replayed_final_state_hash}")
        if not report.world_fingerprint_matches:
            out.print("  the kit now materialises a different world from this scenario and seed")
        for d in report.differences:
            out.print(f"  {d}", markup=False)
    raise typer.Exit(0 if report.identical else 1)


@app.command()
def debrief(run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."), as_json: bool = JsonFlag,
            db: Optional[str] = DbOpt) -> None:
    """Reveal a run's hidden truth, each check with its outcome, the claim against the outcome, and the transcript."""
    from assay.cli.ui import print_debrief
    from assay.service.results import debrief as do_debrief

    report = do_debrief(open_store_at(db), run_id, actor=OPERATOR)
    if as_json:
        print_json(report)
    else:
        print_debrief(out, report)


# Every other command's module is imported only when its command is named (`assay run` imports
# none of them; `assay --help` imports them all): `assay.cli.lazy`.
lazy.unwrap_docstrings(app)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so every executor stops the same way (and exits 143, not 130)."""


_signalled: list[int] = []


def _on_sigterm(signum: int, _frame: Any) -> None:
    _signalled.append(signum)
    raise Terminated()


def _interrupt_code() -> int:
    """128 + the signal: 143 after SIGTERM (however click re-wrapped it on the way), else 130."""
    return 128 + (_signalled[0] if _signalled else 2)


def console() -> None:
    """The `assay` console script: `main`, then an exit that does not sweep the heap.

    Before a process ends, Python collects its garbage, walking every object the imports made
    (SQLAlchemy's, pydantic's): about a quarter of a second of `assay run`'s fixed cost, spent on
    memory the exit returns anyway. Freezing the collector's generations first skips that walk.
    What is held only through its module is still finalised as the module goes, and atexit hooks
    still run; what sits in a reference cycle is not, which is why `main` closes its stores itself.
    """
    import gc

    try:
        main()
    finally:
        gc.freeze()


def main() -> None:
    """`assay ARGS` in this process: exit codes as docs/architecture.md says, every store it opened closed."""
    try:
        _main()
    finally:
        close_stores()


def _main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = app(standalone_mode=False)
    except BadInput as exc:  # the domain errors among them name their flag here, and only here
        from assay.cli.errors import cli_line, command_flags

        line = cli_line(exc, command_flags(app, sys.argv[1:]))
        err.print(f"assay: error: {line}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except Exception as exc:  # a store fault, or click usage errors
        from assay.cli.errors import store_fault

        fault_code = store_fault(exc)  # one line naming the batch to resume; the traceback with --debug
        if fault_code is not None:
            sys.exit(fault_code)
        from typer._click import exceptions as click  # typer 0.2x vendors click; no `click` package is installed

        if isinstance(exc, click.UsageError) and not exc.format_message().strip():
            sys.exit(0)  # bare `assay`: the help was printed; nothing went wrong
        found = _old_json_file(sys.argv[1:])
        if isinstance(exc, click.UsageError) and found is not None and "unexpected extra argument" in exc.format_message():
            err.print(f"assay: error: {found}: {_JSON_TAKES_NO_FILE}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(2)
        if isinstance(exc, click.BadParameter) and exc.param is not None and exc.param.opts:
            from assay.cli.errors import parameter_line

            line = parameter_line(exc.message, exc.param.opts, sys.argv[1:])
            err.print(f"assay: error: {line}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        if isinstance(exc, click.ClickException):
            err.print(f"assay: error: {exc.format_message()}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        raise
    if code == 130:  # typer turns Ctrl-C (and our SIGTERM, a KeyboardInterrupt) into Exit(130)
        sys.exit(_interrupt_code())
    if isinstance(code, int) and code:
        sys.exit(code)  # a typer.Exit(code), which click hands back rather than raises here


if __name__ == "__main__":
    console()
