"""A `python:` agent plays in a bubblewrap sandbox: it can touch nothing but its conversation.

The attack agents (tests/fixtures/sandbox/) each try one way in — the harness's frames and objects,
the environment, /proc of the parent and of pid 1, the store file and its secret beside the agent,
the default store, the built-in suite's YAML, importing and patching assay — and report what they
found in their finish summary. Submitted to forge through the CLI, each gets pass rate 0, and no
stored summary holds a seed, a hidden truth or the secret. The same frame-walking agent played
`--in-process` does find them: the check can fail. An honest agent scores exactly as in process;
every way a worker can fail is recorded as the statuses define it. These tests need bwrap: they
fail, never skip, without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from assay.agents import sandbox
from assay.agents.loader import load_agent
from assay.errors import BadInput, Invalid
from assay.run.engine import Limits
from assay.service import accounts, submissions
from assay.service.actors import OPERATOR
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store import Store
from assay.cli.ui import agent_traceback
from assay.store.runs_repo import RunsRepo
from tests.board.test_cli_board import ASSAY, Cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sandbox"
PACKAGE = Path(sandbox.__file__).resolve().parents[1]
ATTACKS = ("frames", "environ", "proc", "files", "patches")
SECRET = "S3CRET-" + "x" * 40


def test_bwrap_is_installed() -> None:
    assert sandbox.find_bwrap() is not None, "install Debian's bubblewrap (apt-get install bubblewrap)"


@pytest.fixture(scope="module")
def forge_truths() -> list[str]:
    """Every line of every forge scenario's hidden truth long enough to be recognised."""
    lines = []
    for loaded in resolve_suite("forge").scenarios:
        lines += [ln.strip() for ln in loaded.scenario.hidden_truth.splitlines() if len(ln.strip()) >= 24]
    assert lines
    return lines


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    """The attack agents in a directory that also holds the store, its WAL and its secret."""
    home = tmp_path / "agents"
    shutil.copytree(FIXTURES, home)
    secret = home / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    targets = [home / "assay.db", home / "assay.db-wal", home / "assay.db-shm", secret, PACKAGE,
               *sorted((PACKAGE / "suites" / "forge").glob("*.yaml"))]
    (home / "targets.txt").write_text("\n".join(map(str, targets)))
    return home


@pytest.fixture
def cli(agents_dir: Path, templates: Any, tmp_path: Path) -> Cli:
    url = f"sqlite:///{agents_dir / 'assay.db'}"
    templates.copy_into(url, "bootstrapped")
    return Cli(url, tmp_path)


def _summaries(db: Path, batch_id: str) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT r.claim_summary FROM runs r JOIN planned_runs p ON p.run_id = r.run_id "
                           "WHERE p.batch_id = ?", (batch_id,)).fetchall()
        return [r[0] or "" for r in rows]
    finally:
        con.close()


def _seeds(db: Path, batch_id: str) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [str(r[0]) for r in con.execute("SELECT seed FROM planned_runs WHERE batch_id = ?", (batch_id,))]
    finally:
        con.close()


def _leaks(summary: str, seeds: list[str], truths: list[str]) -> list[str]:
    found = [f"seed {s}" for s in seeds if len(s) >= 6 and s in summary]
    found += [f"truth {t[:40]}" for t in truths if t in summary]
    found += ["the secret"] * (SECRET in summary) + ["the store file"] * ("SQLite format 3" in summary)
    return found


def test_attack_agents_submitted_to_forge_score_zero_and_find_nothing(
        cli: Cli, agents_dir: Path, forge_truths: list[str]) -> None:
    db = agents_dir / "assay.db"
    for name in ATTACKS:
        cli("account", "create", name, "--public-handle", f"h-{name}")
        out = cli.cwd / f"{name}.json"
        cli("submit", "forge", "--agent", f"python:{agents_dir / (name + '.py')}:agent", "--account", name,
            "--label", name, "--publish", "--workers", "2", "--output", str(out))
        view = json.loads(out.read_text())
        assert view["pass_rate"] == 0, (name, view)
        assert view["n_runs"] == view["n_planned"] == 15, view
        summaries = _summaries(db, view["id"])
        assert len(summaries) == 15 and all(summaries), name
        seeds = _seeds(db, view["id"])
        for summary in summaries:
            assert _leaks(summary, seeds, forge_truths) == [], (name, summary[:2000])
        text = summaries[0]
        # the attack ran, and came back empty-handed
        if name == "frames":
            assert "seed" not in text and "hidden_truth" not in text, text
        elif name == "environ":
            assert "ASSAY_DB=None" in text and "ASSAY_SANDBOX_PROTECT" not in text and "PYTHONPATH" not in text, text
        elif name == "proc":
            # its own PID namespace, where it is pid 1 and alone: no parent to read (ppid 0)
            assert text.startswith("processes: ['1'] || pid 0 environ: b'/proc/0/environ: FileNotFoundError'"), text[:300]
        elif name == "files":
            for path in (db, Path(f"{db}-wal"), agents_dir / "secret", PACKAGE):
                assert f"{path}: FileNotFoundError" in text or f"{path}: b''" in text or f"{path}: dir []" in text, \
                    (path, text)
            assert "targets.txt" in text and "assay.db" not in text.split("siblings:")[1], text
        elif name == "patches":
            assert "import assay: ModuleNotFoundError" in text and "patched" not in text, text


def test_the_frame_walker_in_process_does_find_the_secrets(cli: Cli, agents_dir: Path,
                                                           forge_truths: list[str]) -> None:
    """The control: in the harness's process the same agent reads the seed and the hidden truth,
    so the checks above can fail. Such a batch is marked, and cannot be submitted."""
    done = cli("run", "forge", "--agent", f"python:{agents_dir / 'frames.py'}:agent", "--in-process",
               "--trials", "1", "--seed", "123456789", "--json")
    batch = json.loads(done.stdout)["batch_id"]
    summaries = _summaries(agents_dir / "assay.db", batch)
    assert any(_leaks(s, _seeds(agents_dir / "assay.db", batch), forge_truths) for s in summaries)
    assert "--in-process" not in cli("submit", "--help").stdout


def _by_slot(results: dict[str, Any]) -> dict[tuple[str, int], tuple[str, bool, str]]:
    return {(c["case_id"], t["trial"]): (t["final_state_hash"], t["passed"], t["status"])
            for c in results["cases"] for t in c["trials"]}


def test_an_honest_agent_scores_as_it_does_in_process(sqlite_store: Store) -> None:
    spec = f"python:{FIXTURES / 'honest.py'}:agent"
    sandboxed = load_agent(spec)
    in_process = load_agent(spec, in_process=True)
    assert sandboxed.isolation == "sandbox" and in_process.isolation == "in_process"
    assert sandboxed.config_signature == in_process.config_signature == load_agent(
        spec, agent_env=["HOME"], agent_memory=2**30).config_signature
    figures = []
    for factory in (sandboxed, in_process):
        batch = run_suite("forge", factory=factory, trials=3, seed=7, workers=3, store=sqlite_store)
        figures.append(results_json(sqlite_store, batch.batch_id, actor=OPERATOR))
    assert _by_slot(figures[0]) == _by_slot(figures[1])
    assert {s for _, _, s in _by_slot(figures[0]).values()} == {"completed"}
    assert figures[0]["summary"] == figures[1]["summary"]
    assert RunsRepo(sqlite_store).batch_agent(figures[1]["batch_id"]).options == {"in_process": True}  # type: ignore[union-attr]
    assert RunsRepo(sqlite_store).batch_agent(figures[0]["batch_id"]).options == {}  # type: ignore[union-attr]
    # 15 runs, 3 at a time: the workers are pooled (the first is the loader's probe)
    assert sandboxed.pool.started <= 4


def _trials(store: Store, spec: str, *, trials: int = 2, workers: int = 2, limits: Limits | None = None,
            executor: str | None = None, **options: Any) -> list[dict[str, Any]]:
    factory = load_agent(spec, **options)
    batch = run_suite("forge", factory=factory, trials=trials, workers=workers, store=store, executor=executor,
                      limits=limits or Limits(turn_limit=6, time_limit=10.0))
    results = results_json(store, batch.batch_id, actor=OPERATOR)
    return [{**t, **dataclasses.asdict(RunsRepo(store).run(t["run_id"]))} for c in results["cases"] for t in c["trials"]]  # type: ignore[arg-type]


def spec(name: str) -> str:
    return f"python:{FIXTURES / 'behaviours.py'}:{name}"


def test_what_a_worker_does_is_recorded_as_the_statuses_define_it(sqlite_store: Store) -> None:
    raised = _trials(sqlite_store, spec("raises"), trials=1)
    assert {t["status"] for t in raised} == {"crashed"}
    assert raised[0]["reason"] == "agent raised ValueError: the agent gave up"
    trace = agent_traceback(raised[0])  # what `assay debrief` shows
    assert trace and "behaviours.py" in trace and "ValueError: the agent gave up" in trace, raised[0]["transcript"]

    bad_init = _trials(sqlite_store, spec("BadInit"), trials=1)
    assert {(t["status"], t["reason"]) for t in bad_init} == {
        ("crashed", "agent could not be created: RuntimeError: no instance for you")}

    exits = _trials(sqlite_store, spec("exits"), trials=1)
    assert {(t["status"], t["reason"]) for t in exits} == {("crashed", "the agent's process exited with code 3")}

    hog = _trials(sqlite_store, spec("hog"), trials=1, agent_memory=256 * 2**20)
    assert {t["status"] for t in hog} == {"crashed"} and "MemoryError" in hog[0]["reason"]

    garbage = _trials(sqlite_store, spec("garbage"), trials=1)
    assert {t["status"] for t in garbage} == {"empty"}
    assert "not a protocol message" in garbage[0]["reason"] or "not asked for" in garbage[0]["reason"]

    hangs = _trials(sqlite_store, spec("hangs"), trials=1, workers=5, limits=Limits(turn_limit=6, time_limit=0.3))
    assert {t["status"] for t in hangs} == {"timeout"}
    # the threads executor drives the same proxies on each thread's own loop, under the same budget
    hangs = _trials(sqlite_store, spec("hangs"), trials=1, workers=5, limits=Limits(turn_limit=6, time_limit=0.3),
                    executor="threads")
    assert {t["status"] for t in hangs} == {"timeout"}

    for name, summary in (("prints", "printed"), ("polite", "async")):
        done = _trials(sqlite_store, spec(name), trials=1)
        assert {(t["status"], t["claim_summary"]) for t in done} == {("completed", summary)}, name
    counted = _trials(sqlite_store, spec("Counter"), trials=2, workers=1)
    assert {t["claim_summary"] for t in counted} == {"calls=3 turn=3"}


def test_a_dead_or_hung_worker_costs_only_its_run_and_is_replaced(sqlite_store: Store) -> None:
    factory = load_agent(spec("Counter"))
    pool = factory.pool
    worker = pool.take()
    assert worker is not None
    worker.kill()  # as if the agent's process had died between runs
    pool.keep(worker)
    batch = run_suite("forge", factory=factory, trials=2, workers=1, store=sqlite_store,
                      limits=Limits(turn_limit=6, time_limit=10.0))
    results = results_json(sqlite_store, batch.batch_id, actor=OPERATOR)
    assert {t["status"] for c in results["cases"] for t in c["trials"]} == {"completed"}
    assert pool.size == 0  # the batch closed its workers


def test_the_agent_sees_only_the_environment_it_is_given(sqlite_store: Store, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.setenv("GIVEN_TO_AGENT", "yes-given")
    monkeypatch.setenv("NOT_GIVEN", "no-never")
    home = tmp_path / "a"
    shutil.copytree(FIXTURES, home)
    done = _trials(sqlite_store, f"python:{home / 'environ.py'}:agent", trials=1, agent_env=["GIVEN_TO_AGENT"])
    text = done[0]["claim_summary"]
    assert "GIVEN_TO_AGENT=yes-given" in text and "no-never" not in text and "NOT_GIVEN" not in text


@pytest.mark.heavy  # starts a process
def test_stdout_of_the_agent_never_reaches_the_results_json(tmp_path: Path) -> None:
    """The real console script: the agent prints, `--json` still prints exactly the document."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["ASSAY_DB"] = f"sqlite:///{tmp_path / 'assay.db'}"
    proc = subprocess.run([str(ASSAY), "run", "forge", "--agent", spec("prints"), "--trials", "1", "--json", "-q"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["summary"]["trials"] == 5
    assert "agent says hello" in proc.stderr


# -- where bwrap is missing -----------------------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert sandbox.find_bwrap() is None


def test_without_bwrap_submit_refuses_and_run_warns_and_uses_a_subprocess(
        no_bwrap: None, cli: Cli, agents_dir: Path) -> None:
    agent = f"python:{agents_dir / 'behaviours.py'}:polite"
    cli("account", "create", "alice", "--public-handle", "alice")
    refusal = cli.refused("submit", "forge", "--agent", agent, "--account", "alice", "--label", "x")
    assert "bubblewrap" in refusal and "apt-get install bubblewrap" in refusal
    before = cli.counts()
    done = cli("run", "forge", "--agent", agent, "--trials", "1", "--json")
    warnings = [ln for ln in done.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "bubblewrap" in warnings[0] and "subprocess" in warnings[0], done.stderr
    assert {t["status"] for c in json.loads(done.stdout)["cases"] for t in c["trials"]} == {"completed"}
    assert cli.counts()["runs"] == before["runs"] + 5


def test_without_bwrap_the_agent_still_runs_in_another_process(no_bwrap: None, sqlite_store: Store,
                                                                tmp_path: Path) -> None:
    probe = tmp_path / "pid.py"
    probe.write_text("import os, json\ndef agent(m, t):\n    return {'role': 'assistant', 'content': None, "
                     "'tool_calls': [{'id': 'c', 'type': 'function', 'function': {'name': 'finish', 'arguments': "
                     "json.dumps({'claimed_success': False, 'summary': str(os.getpid())})}}]}\n")
    factory = load_agent(f"python:{probe}:agent")
    assert factory.isolation == "subprocess"
    done = _trials(sqlite_store, f"python:{probe}:agent", trials=1)
    assert {t["status"] for t in done} == {"completed"}
    assert str(os.getpid()) not in {t["claim_summary"] for t in done}


def test_the_service_refuses_an_unsandboxed_python_agent(monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)  # PostgreSQL's tools need the real PATH
    accounts.create(store, "alice", "alice", actor=OPERATOR)
    agent = f"python:{FIXTURES / 'honest.py'}:agent"
    for factory in (load_agent(agent), load_agent(agent, in_process=True)):
        with pytest.raises(Invalid) as refused:
            submissions.compose(store, "forge", factory=factory, account="alice", label="x", actor=OPERATOR)
        assert "bubblewrap" in str(refused.value) or "--in-process" in str(refused.value)
    assert RunsRepo(store).batch_listing() == []


@pytest.mark.heavy  # starts a process
def test_bad_agent_options_are_one_line_refusals(tmp_path: Path) -> None:
    agent = f"python:{FIXTURES / 'honest.py'}:agent"
    with pytest.raises(BadInput, match="at least 64 MiB"):
        load_agent(agent, agent_memory=1024)
    with pytest.raises(BadInput, match="not the name"):
        load_agent(agent, agent_env=["A=B"])
    with pytest.raises(BadInput, match="has no attribute 'nope'"):
        load_agent(f"python:{FIXTURES / 'honest.py'}:nope")
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemError('at import')\n")
    with pytest.raises(BadInput, match="could not load .*SystemError: at import"):
        load_agent(f"python:{broken}:agent")


def test_the_layout_hides_the_protected_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's directory is bound entry by entry, never its store, secret or a protected suite;
    and a directory that is $HOME or above it is never bound (only the agent's file)."""
    monkeypatch.setenv(sandbox.PROTECT_ENV, "")
    home = tmp_path / "proj"
    (home / "suite").mkdir(parents=True)
    (home / "agent.py").write_text("def agent(m, t): pass\n")
    (home / "helper.py").write_text("")
    (home / "x.db").write_text("")
    (home / "secret").write_text("")
    sandbox.protect(home / "suite")
    sandbox.protect_store(f"sqlite:///{home / 'x.db'}")
    target = sandbox.Target("agent", home / "agent.py", home, file=home / "agent.py")
    args = sandbox.Launch(target, bwrap="bwrap").layout()
    bound = {args[i + 2] for i, a in enumerate(args) if a == "--ro-bind"}
    assert str(home / "agent.py") in bound and str(home / "helper.py") in bound
    assert not bound & {str(home / "x.db"), str(home / "secret"), str(home / "suite")}
    assert str(Path.home()) not in bound and str(PACKAGE) not in bound
    at_home = sandbox.Target("agent", Path.home() / "agent.py", Path.home(), file=Path.home() / "agent.py")
    args = sandbox.Launch(at_home, bwrap="bwrap").layout()
    shown = {args[i + 2] for i, a in enumerate(args) if a == "--ro-bind"} | {
        args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"}
    assert str(Path.home()) not in shown and str(Path.home() / "agent.py") in shown


def test_the_async_executors_child_processes_make_their_own_pools(sqlite_store: Store) -> None:
    """Each child of the async executor loads the agent from its portable spec: sandboxed there too."""
    from assay.run.executors.procs import ProcessAsyncExecutor

    factory = load_agent(f"python:{FIXTURES / 'honest.py'}:agent")
    batch = run_suite("forge", factory=factory, trials=1, store=sqlite_store, executor=ProcessAsyncExecutor(2, 2))
    results = results_json(sqlite_store, batch.batch_id, actor=OPERATOR)
    assert {t["status"] for c in results["cases"] for t in c["trials"]} == {"completed"}


def test_a_submissions_python_agent_is_played_again_only_in_its_sandbox(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """`resume` and the service load a submission's agent from its row: never without bwrap."""
    from assay.service import execution

    accounts.create(store, "alice", "alice", actor=OPERATOR)
    sid = submissions.compose(store, "forge", factory=load_agent(f"python:{FIXTURES / 'honest.py'}:agent"),
                              account="alice", label="x", actor=OPERATOR)
    factory, _ = execution.stored_agent(store, sid)
    assert factory.isolation == "sandbox"
    factory.close()
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    with pytest.raises(Invalid, match="bubblewrap"):
        execution.stored_agent(store, sid)


class _FakeServer:
    """Two leased runs, each over after the agent's first answer."""

    def __init__(self) -> None:
        self.leases = 2
        self.sent: list[dict[str, Any]] = []

    def next_run(self) -> dict[str, Any] | None:
        if not self.leases:
            return None
        self.leases -= 1
        return {"run_id": f"r{self.leases}", "submission_id": "s", "scenario": {"id": "c"}, "tools": [],
                "messages": [{"role": "user", "content": "hello"}], "step": 1}

    def step(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(body)
        return {"messages": [], "done": True, "status": "completed"}


@pytest.mark.heavy  # starts a process
def test_assay_play_plays_a_python_agent_sandboxed_with_one_worker() -> None:
    from assay.cli.play import play

    factory = load_agent(f"python:{FIXTURES / 'honest.py'}:agent")
    server = _FakeServer()
    played = play(server, factory)  # type: ignore[arg-type]
    assert [p.status for p in played] == ["completed", "completed"]
    assert [b["message"]["tool_calls"][0]["function"]["name"] for b in server.sent] == ["list_alerts"] * 2
    assert factory.pool.started == 1 and factory.pool.size == 0  # one worker for both runs, closed at the end
