"""Failures say so at once, as a user meets them on the command line (issue 23, item 4): an
`openai:` agent or a model judge whose endpoint refuses connections, within seconds, one line each
naming the endpoint and the cause, exit 1, never a quiet 0. The console script's `main`, in this
process, on a SQLite file; refusals are real (a port bound and closed)."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.unreachable import closed_port

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Cli]:
    """`assay ARGS --db sqlite:///…` through the console script's `main`: (exit code, stdout, stderr)."""
    from assay.cli import main

    for name in ("ASSAY_DB", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    before = signal.getsignal(signal.SIGTERM)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["assay", *args, "--db", db])
        code: object = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        done = capsys.readouterr()
        return (code if isinstance(code, int) else (0 if code is None else 1)), done.out, done.err

    call.db = db  # type: ignore[attr-defined] - the store URL, for reading back what was stored
    yield call
    signal.signal(signal.SIGTERM, before)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("assay: error: ")]


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_a_batch_that_reaches_no_agent_exits_1_naming_the_endpoint_and_the_cause(cli: Cli) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    began = time.monotonic()
    code, out, err = cli("run", "forge", "--agent", "openai:m", "--base-url", url, "--trials", "1", "--quiet",
                         "--json")
    assert time.monotonic() - began < 15
    assert code == 1 and "Traceback" not in err
    reason = f"agent endpoint {url} unreachable: connection refused"
    trials = [t for case in json.loads(out)["cases"] for t in case["trials"]]
    assert len(trials) == 5 and {(t["status"], t["reason"]) for t in trials} == {("error", reason)}
    [line] = _errors(err)
    assert reason in line and "no run could reach its agent" in line and "check the endpoint and run again" in line


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_score_and_submit_exit_1_with_one_line_per_reason_and_debrief_says_it_per_run(cli: Cli) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert cli("account", "create", "alice", "--public-handle", "alice")[0] == 0
    code, out, err = cli("submit", "academy", "--agent", "reference:steadfast", "--account", "alice", "--label",
                         "judged", "--judge", "openai:judge-1", "--judge-base-url", url, "--quiet", "--json")
    assert code == 1 and "Traceback" not in err
    view = json.loads(out)
    reason = f"judge endpoint {url} unreachable: connection refused"
    assert _errors(err) == [f"assay: error: {reason}; 20 run(s) not judged; `assay score {view['id']}` to retry"]
    assert view["status"] == "incomplete"

    began = time.monotonic()
    code, out, err = cli("score", view["id"])  # the stored endpoint, asked again: no public default
    assert time.monotonic() - began < 10
    assert code == 1 and _errors(err) == [
        f"assay: error: {reason}; 20 run(s) not judged; `assay score {view['id']}` to retry"]
    assert "0 of 20 recorded runs scored" in out

    code, out, err = cli("debrief", view["runs"][0]["run_id"])
    assert code == 0 and f"no judge score: {reason}" in out


def test_a_model_judge_with_no_endpoint_is_refused_in_one_line(cli: Cli) -> None:
    assert cli("account", "create", "alice", "--public-handle", "alice")[0] == 0
    code, _, err = cli("submit", "academy", "--agent", "reference:steadfast", "--account", "alice", "--label",
                       "x", "--judge", "openai:judge-1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "a model judge needs an endpoint" in err and "--judge" in err


def test_help_states_the_connect_bounds(cli: Cli) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    for command, flag in (("run", "--base-url"), ("submit", "--judge-base-url"), ("score", "--judge-base-url"),
                          ("play", "--base-url")):
        text = " ".join(re.sub("[│╭╮╰╯─]", " ", CliRunner().invoke(app, [command, "--help"]).output).split())
        assert flag in text and "5 seconds" in text, command


def test_a_release_pinning_a_model_judge_with_no_endpoint_is_refused_before_anything_is_stored(
        cli: Cli, tmp_path: Path) -> None:
    import shutil

    import sqlalchemy as sa

    import assay

    suite = tmp_path / "judged"
    shutil.copytree(Path(assay.__file__).resolve().parent / "suites" / "academy", suite)
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(text.replace("key: academy", "key: judged-academy")
                                      .replace("judge: {model: rules}", "judge: {model: openai:judge-1}"),
                                      encoding="utf-8")
    assert cli("suite", "release", str(suite))[0] == 0
    assert cli("account", "create", "alice", "--public-handle", "alice")[0] == 0
    code, _, err = cli("submit", "judged-academy", "--agent", "reference:steadfast", "--account", "alice",
                       "--label", "x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "a model judge needs an endpoint" in err
    engine = sa.create_engine(cli.db)  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM submissions")).scalar_one() == 0
    engine.dispose()
