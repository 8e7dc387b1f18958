"""`assay play --server URL --agent SPEC`: play every pending remote run of the key's account with a
local agent over the HTTP API (issue 10). `assay.cli.serve` calls `register(app)`.

Users run their agent on their own machine against a hosted board: the agent key (from
`ASSAY_AGENT_KEY`) says whose runs these are, `POST /api/agent/runs/next` leases one, and each of
the agent's answers goes to `POST /api/agent/runs/{id}/step` until the run is done; then the next,
until the server says none is pending (204). The agent is loaded here exactly as `assay run`
loads it (`assay.agents.loader`), fresh for each run, and sees what it would see in-process: the
conversation (its own answers and what followed each) and the tools.

A step is numbered, so sending it again is safe: when the server cannot be reached (a restart),
answers that its store is unavailable (503) or asks to slow down (429), the same step is sent again
until it is answered (for up to `RETRY_SECONDS`; after the `Retry-After` it names, if any), and one
line says so at once. A lease asked again is safe too: the server leases a run in one transaction,
the last thing it does, so a lease it did not answer leased nothing. A server that never answered
is given up at once instead: a connection is given `CONNECT_TIMEOUT` seconds, and a refused or
unresolvable one two quick retries, then one line names the URL and the cause. What the agent
raises is reported as its failure (the run is `crashed`, as in-process). Ctrl-C releases the run
being played (`release`): the server ends the lease without recording anything, so the run is
pending again at once, where it was.
"""

from __future__ import annotations

import inspect
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:  # asyncio is imported when a play starts, not for `assay --help`
    import asyncio

from assay.cli.agent_opts import AgentEnvOpt, AgentMemoryOpt, agent_options, warn_unsandboxed
from assay.endpoints import CONNECT_TIMEOUT, connect_failure, refused, unreachable
from assay.errors import BadInput

KEY_ENV = "ASSAY_AGENT_KEY"
#: How long a request is retried while a server that answered before cannot be reached (a restart).
RETRY_SECONDS = 120.0
#: Seconds one request may take before it is tried again.
REQUEST_TIMEOUT = 60.0
#: Quick retries of a refused (or unresolvable) connection to a server that never answered.
CONNECT_RETRIES = 2
#: Seconds the release of a run may take when play stops (Ctrl-C): it is tried once.
RELEASE_TIMEOUT = 5.0


class Unreachable(BadInput):
    """The server could not be reached: one line naming its URL and the cause."""


class Stopped(KeyboardInterrupt):
    """Play was interrupted (Ctrl-C, SIGTERM); `released` is the run handed back to the server (None
    when none was being played), `release_error` why it could not be, `played` the runs that ended."""

    def __init__(self, cause: BaseException, played: list[Played], released: str | None,
                 release_error: str | None) -> None:
        super().__init__()
        self.cause, self.played, self.released, self.release_error = cause, played, released, release_error


@dataclass(frozen=True)
class Played:
    """One run this client played: where it was, how it ended and in how many answers."""

    run_id: str
    submission_id: str
    scenario: str
    status: str
    steps: int
    reason: str | None = None


class RemoteServer:
    """The agent routes of one server, over HTTP with an agent key; retries what is safe to retry."""

    def __init__(self, url: str, key: str, *, retry_seconds: float = RETRY_SECONDS,
                 connect_timeout: float = CONNECT_TIMEOUT, sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx2

        self.url = url.rstrip("/")
        self._http = httpx2.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"},
                                   timeout=httpx2.Timeout(REQUEST_TIMEOUT, connect=connect_timeout))
        self._retry_seconds = retry_seconds
        self._sleep = sleep
        #: whether the server has answered once: until it has, a failure to connect is not a restart
        self._answered = False

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_run(self) -> dict[str, Any] | None:
        """A leased run, or None when nothing is pending."""
        return self._post("/api/agent/runs/next", None)

    def step(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._post(f"/api/agent/runs/{run_id}/step", body)
        assert answer is not None
        return answer

    def release(self, run_id: str) -> dict[str, Any]:
        """Hand a leased run back (once, within `RELEASE_TIMEOUT`): it is pending again at once."""
        import httpx2

        try:
            response = self._http.post(f"/api/agent/runs/{run_id}/release", timeout=RELEASE_TIMEOUT)
        except httpx2.TransportError as exc:
            raise Unreachable(unreachable("server", self.url, exc)) from None
        if response.status_code >= 400:
            raise BadInput(f"the server refused to release the run ({response.status_code}): {_detail(response)}",
                           f"--server {self.url}")
        return response.json()

    def _post(self, path: str, body: dict[str, Any] | None) -> dict[str, Any] | None:
        import httpx2

        give_up = time.monotonic() + self._retry_seconds
        pause = 0.25
        tries = 0
        said = False  # whether this request's 5xx was said (once)
        while True:
            try:
                response = self._http.post(path, json=body)
            except httpx2.TransportError as exc:
                tries += 1
                never_answered = not self._answered and connect_failure(exc) is not None
                if (time.monotonic() >= give_up or (never_answered and (not refused(exc) or tries > CONNECT_RETRIES))):
                    raise Unreachable(unreachable("server", self.url, exc)) from None
                if self._answered and tries == 1:  # said at once, not after two minutes of silence
                    from assay.cli.ui import err

                    err.print(f"assay: {unreachable('server', self.url, exc)}; trying again for up to "
                              f"{self._retry_seconds:g} s", markup=False, highlight=False, soft_wrap=True)
                self._sleep(pause)
                pause = min(pause * 2, 5.0)
                continue
            self._answered = True
            if response.status_code == 204:
                return None
            if response.status_code == 429 or response.status_code >= 500:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise BadInput(f"the server keeps answering {response.status_code}", f"--server {self.url}")
                told = response.headers.get("Retry-After")
                status = response.status_code
                wait = _retry_after(told) if status == 429 or (status == 503 and told is not None) else pause
                if status >= 500 and not said:  # said at once: play is waiting, not hung
                    from assay.cli.ui import err

                    err.print(f"assay: the server answered {status} ({_detail(response)}); trying again for up "
                              f"to {self._retry_seconds:g} s", markup=False, highlight=False, soft_wrap=True)
                    said = True
                self._sleep(min(wait, left))
                pause = min(pause * 2, 5.0)
                continue
            if response.status_code >= 400:
                raise BadInput(f"the server refused ({response.status_code}): {_detail(response)}",
                               KEY_ENV if response.status_code == 401 else f"--server {self.url}")
            return response.json()


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.0), 60.0)
    except ValueError:
        return 1.0


def _detail(response: Any) -> str:
    try:
        return str(response.json().get("detail"))
    except Exception:  # noqa: BLE001 - whatever it said, in one line
        return response.text[:200].replace("\n", " ")


def as_json(message: Any) -> Any:
    """The agent's answer as JSON, without judging it: a message object (the openai client's) as
    its fields, JSON values as they are; anything else as its text (the server reads it as `empty`)."""
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if message is None or isinstance(message, str | int | float | bool):
        return message
    if isinstance(message, dict):
        return {str(k): as_json(v) for k, v in message.items()}
    if isinstance(message, list | tuple):
        return [as_json(v) for v in message]
    return str(message)


def play(server: RemoteServer, factory: Any, *, max_runs: int | None = None,
         on_lease: Callable[[dict[str, Any]], None] | None = None,
         on_done: Callable[[Played], None] | None = None) -> list[Played]:
    """Play leased runs with `factory`'s agents until none is pending (or `max_runs` were played)."""
    import asyncio

    from assay.agents.protocol import Unreachable as AgentUnreachable

    loop = asyncio.new_event_loop()
    played: list[Played] = []
    lease: dict[str, Any] | None = None
    try:
        while max_runs is None or len(played) < max_runs:
            lease = server.next_run()
            if lease is None:
                break
            if on_lease is not None:
                on_lease(lease)
            done = _play_run(server, factory, lease, loop)
            lease = None
            played.append(done)
            if on_done is not None:
                on_done(done)
    except AgentUnreachable as exc:  # not the agent's failure: no run is charged with it
        assert lease is not None
        try:
            server.release(lease["run_id"])
            then = f"run {lease['run_id']} released, pending again"
        except BadInput as failed:
            then = f"run {lease['run_id']} could not be released ({failed})"
        raise Unreachable(f"{exc}; {then}; check the endpoint and `assay play` again") from None
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM): hand the run back, say which
        released, problem = None, None
        if lease is not None:
            try:
                if server.release(lease["run_id"]).get("released"):
                    released = lease["run_id"]  # (a run that had just ended is not said to be released)
            except BadInput as failed:
                problem = str(failed)
        raise Stopped(exc, played, released, problem) from exc
    finally:
        try:
            closing = getattr(factory, "aclose", None)
            if closing is not None:
                loop.run_until_complete(closing())
        finally:
            loop.close()
    return played


def _play_run(server: RemoteServer, factory: Any, lease: dict[str, Any], loop: asyncio.AbstractEventLoop) -> Played:
    from assay.agents.protocol import Unreachable as AgentUnreachable

    run_id, tools = lease["run_id"], lease["tools"]
    history: list[Any] = list(lease["messages"])
    index = int(lease.get("step", 1))
    agent: Any = None
    while True:
        try:
            if agent is None:
                agent = factory()
            raw = agent(list(history), tools)
            if inspect.isawaitable(raw):
                raw = loop.run_until_complete(raw)
            message = as_json(raw)
            body: dict[str, Any] = {"step": index, "message": message}
        except AgentUnreachable:
            raise  # the agent's endpoint is down: play stops, the run is handed back
        except Exception as exc:  # noqa: BLE001 - the agent's failure, reported as the run's
            message, body = None, {"step": index, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        answer = server.step(run_id, body)
        history = [*history, message, *answer["messages"]]
        if answer["done"]:
            return Played(run_id, lease["submission_id"], lease["scenario"]["id"], answer["status"], index,
                          answer.get("reason"))
        index += 1


def play_command(
    server: str = typer.Option(..., "--server", help="The Assay server, e.g. https://assay.example.org."),
    agent: str = typer.Option(..., "--agent", help="reference:NAME | python:FILE.py:NAME | python:module:NAME | openai:MODEL"),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", help="OpenAI-compatible endpoint (openai: agents). A connection gets 5 seconds (an answer "
        "up to the run's time limit); a refused one is retried twice, quickly, then play stops with one line naming "
        "the endpoint and the cause (exit 1) and hands the run back, uncharged."),
    max_runs: Optional[int] = typer.Option(None, "--max-runs", min=1, help="Stop after this many runs."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no summary table."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs played (run, submission, scenario, status, "
                                 "steps) as one JSON document to stdout and nothing else there."),
    agent_env: Optional[list[str]] = AgentEnvOpt,
    agent_memory: Optional[str] = AgentMemoryOpt,
) -> None:
    """Play every pending run of your account's remote submissions with a local agent, over HTTP.

    The agent key is read from ASSAY_AGENT_KEY (`assay key create --account NAME --kind agent`). Runs are leased one at a time; each is recorded and scored by the server as it ends.

    A connection to the server (and to an openai: agent's endpoint) gets 5 seconds; a server that cannot be reached at the start is given up at once (a refused connection after two quick retries) with one line naming it and why, exit 1. Once it has answered, a step is sent again for up to 2 minutes while it restarts or answers 503 (its store unavailable), after the Retry-After it names, with one line saying so.

    Ctrl-C stops at once: the run being played is released (pending again, where it was, not charged as a timeout), one line names it, exit 130; `assay play` again goes on."""
    import os

    from assay.agents.loader import load_agent
    from assay.cli.ui import err, out

    key = os.environ.get(KEY_ENV, "").strip()
    if not key:
        raise BadInput("is not set: export an agent key (`assay key create --account NAME --kind agent`)", KEY_ENV)
    if not server.startswith(("http://", "https://")):
        raise BadInput("must be an http:// or https:// URL", f"--server {server}")
    factory = load_agent(agent, base_url=base_url, **agent_options(agent_env, agent_memory))
    warn_unsandboxed(factory)  # a python: agent is sandboxed here too, as `assay run` plays it
    try:
        with RemoteServer(server, key) as remote, _Progress(err, quiet=quiet) as progress:
            played = play(remote, factory, max_runs=max_runs, on_lease=progress.leased, on_done=progress.done)
    except Unreachable as exc:
        err.print(f"assay: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except Stopped as stop:
        err.print(f"assay: stopped after {len(stop.played)} run(s): {_stopped_line(stop)}",
                  markup=False, highlight=False, soft_wrap=True)
        raise stop.cause from None
    if as_json:
        from dataclasses import asdict

        from assay.cli.ui import print_json

        print_json({"runs": [asdict(p) for p in played]})
        return
    if quiet:
        return
    if not played:
        out.print("no run was pending for this agent key's account", markup=False, highlight=False)
        return
    _summary(out, played)


def _stopped_line(stop: Stopped) -> str:
    if stop.released is not None:
        return (f"run {stop.released} released, pending again; `assay play` again goes on "
                "(it resumes the run where it was)")
    if stop.release_error is not None:
        return (f"the run being played could not be released ({stop.release_error}); it ends as a timeout "
                "once its time limit passes")
    return "no run was being played; `assay play` again goes on"


class _Progress:
    """A progress bar on a terminal (runs done of those known), a line per run otherwise."""

    def __init__(self, console: Any, *, quiet: bool) -> None:
        self.console, self.quiet = console, quiet
        self.tty = sys.stderr.isatty()
        self._bar: Any = None
        self._task: Any = None
        self._n = 0

    def __enter__(self) -> _Progress:
        if not self.quiet and self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("remote runs", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def leased(self, lease: dict[str, Any]) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=self._n + 1 + int(lease.get("pending", 0)),
                             description=f"{lease['scenario']['id']}")

    def done(self, run: Played) -> None:
        self._n += 1
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1)
        else:
            why = f" ({run.reason})" if run.reason else ""
            steps = f"{run.steps} step" + ("" if run.steps == 1 else "s")
            self.console.print(f"run {self._n}: {run.scenario} · {run.status}{why} · {steps} · {run.run_id}",
                               markup=False, highlight=False, soft_wrap=True)


def _summary(console: Any, played: list[Played]) -> None:
    from rich.table import Table

    table = Table(title=f"{len(played)} remote run(s) played")
    for col in ("submission", "runs", "completed", "not completed", "steps"):
        table.add_column(col, justify="left" if col == "submission" else "right")
    for submission_id in dict.fromkeys(p.submission_id for p in played):
        mine = [p for p in played if p.submission_id == submission_id]
        statuses = Counter(p.status for p in mine)
        others = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()) if s != "completed") or "0"
        table.add_row(submission_id, str(len(mine)), str(statuses.get("completed", 0)), others,
                      str(sum(p.steps for p in mine)))
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add `assay play` to `app`."""
    app.command("play")(play_command)
