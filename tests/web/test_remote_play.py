"""Remote play over HTTP: an agent on another machine plays the runs the server composed.

A submission with `agent: "remote"` is composed by the server; an agent key leases its runs one by
one (`POST /api/agent/runs/next`) and sends each run its assistant messages
(`POST /api/agent/runs/{id}/step`) until it is done. The engine applies them exactly as in-process
play does, so a run played remotely is the run played in-process with the same seed; every step is
recorded before it is applied, so a restarted server goes on where the run was, a retried step is
never applied twice, and a run left idle ends as a `timeout`. An agent sees what an in-process
agent sees — never the hidden truth, the checks or a seed — and only its own account's runs.

Everything here runs on SQLite and on PostgreSQL (`web_store`), with real keys (`service.keys`).
The last test runs the real `assay serve` and `assay play` as processes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from assay.agents.loader import load_agent
from assay.run.engine import Limits
from assay.service import remote, submissions
from assay.service.actors import OPERATOR, account_actor
from assay.service.suites import resolve_suite
from assay.store import Store, open_store
from assay.store.remote_schema import remote_steps
from assay.store.runs_repo import RunsRepo
from tests.support.clock import ManualClock, set_store_clock
from tests.support.forkserver import assay_command
from tests.run.test_hidden import Seen, secrets_of

from ._remote import (
    ONE_REP_FORGE,
    RemoteAgent,
    accounts_and_keys,
    answering,
    expected_score,
    in_process,
    one_rep_forge,
    same_as_stored,
    submit_remote,
    write_one_rep_forge,
)
from .conftest import assay_serve, bearer, make_app

#: The reference agent that plays each of the three submissions, by label.
AGENTS = {"diligent": "reference:diligent", "hasty": "reference:hasty", "overclaimer": "reference:overclaimer"}
LIST_ALERTS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "list_alerts", "arguments": "{}"}}]}


def _client(store: Store) -> TestClient:
    return TestClient(make_app(store, rate_limit=0))


def _n_steps(store: Store, run_id: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(remote_steps)
                                .where(remote_steps.c.run_id == run_id)).scalar_one())


def _remote_submission(store: Store, limits: Limits | None = None, label: str = "remote") -> str:
    """A remote submission of alice's to forge, composed by the service (with `limits`)."""
    return submissions.compose(store, "forge", factory=remote.remote_factory(), account="alice", label=label,
                               limits=limits, actor=account_actor("alice"))


# -- the whole flow ---------------------------------------------------------------------------


def test_a_remote_agent_plays_three_forge_submissions_exactly_as_in_process(web_store: Store, tmp_path: Path) -> None:
    """Three submissions (the cap) to forge's five cases, each played remotely to the end and every
    run compared with the in-process run of its seed. "Exactly as in process" holds run for run,
    so one rep of each case (15 runs, not 45) proves it as well as forge's three reps would."""
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    suite_key, suite_path = one_rep_forge(web_store, tmp_path)
    ids = {}
    for label in AGENTS:
        created = submit_remote(client, keys.alice_api, label, suite=suite_key, publish=True)
        assert created.status_code == 201, created.text
        assert created.json()["remote"] is True and created.json()["n_planned"] == 5
        ids[created.json()["id"]] = label
    # the cap: three per version
    assert submit_remote(client, keys.alice_api, "a-fourth", suite=suite_key).status_code == 409

    # an API key is refused on the agent routes, and bob's agent finds nothing of alice's
    assert client.post("/api/agent/runs/next", headers=bearer(keys.alice_api)).status_code == 401
    assert client.post("/api/agent/runs/next").status_code == 401
    assert client.post("/api/agent/runs/next", headers=bearer(keys.bob_agent)).status_code == 204

    by_label = {label: load_agent(spec) for label, spec in AGENTS.items()}
    agent = RemoteAgent(client, keys.alice_agent, lambda lease: by_label[ids[lease["submission_id"]]])
    assert agent.play_all() == 15
    assert len(set(agent.played)) == 15

    for submission_id, label in ids.items():
        view = client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.alice_api))
        assert view.status_code == 200
        owner = view.json()
        assert owner["status"] == "complete" and owner["finalised"] is True and owner["published"] is True
        assert len(owner["runs"]) == 5 and {r["run_id"] for r in owner["runs"]} <= set(agent.played)
        for run in owner["runs"]:  # every run is the run in-process play gives for its seed
            assert isinstance(run["seed"], int)  # the owner sees the seed
            expected = in_process(web_store, run["run_id"], AGENTS[label])
            same_as_stored(web_store, run["run_id"], expected)
            assert agent.statuses[run["run_id"]] == expected.status == run["status"]
            assert (run["score"], run["passed"]) == expected_score(web_store, run["run_id"], expected)
        # another account, or no key, finds no such submission
        assert client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.bob_api)).status_code == 404
        assert client.get(f"/api/submissions/{submission_id}").status_code == 401

    rates = {ids[e["submission_id"]]: e["pass_rate"]
             for e in client.get(f"/api/leaderboard/{suite_key}").json()["entries"] if e["submission_id"] in ids}
    assert rates["diligent"] == 1.0 and rates["overclaimer"] == 0.0
    board_text = client.get(f"/api/leaderboard/{suite_key}").text
    seeds = {str(r["seed"]) for s in ids for r in client.get(
        f"/api/submissions/{s}", headers=bearer(keys.alice_api)).json()["runs"]}
    assert not any(seed in board_text for seed in seeds)  # never a seed on the public board

    # nothing the agent was handed holds a hidden truth, a check, or a seed
    seen = Seen()
    for body in agent.seen:
        seen.add(body)
    assert seen.leaks(secrets_of(resolve_suite(str(suite_path)))) == []
    assert not any(seed in text for text in seen.raw for seed in seeds)
    assert client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).status_code == 204


def test_another_accounts_run_does_not_exist_for_an_agent(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    lease = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    run_id = lease["run_id"]
    for key in (keys.bob_agent,):
        refused = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": LIST_ALERTS},
                              headers=bearer(key))
        missing = client.post(f"/api/agent/runs/{'f' * 32}/step", json={"step": 1, "message": LIST_ALERTS},
                              headers=bearer(key))
        assert refused.status_code == missing.status_code == 404
        assert refused.json()["detail"].replace(run_id, "X") == missing.json()["detail"].replace("f" * 32, "X")
    assert client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": LIST_ALERTS},
                       headers=bearer(keys.alice_api)).status_code == 401
    assert _n_steps(web_store, run_id) == 0
    # a run of a submission the server plays itself is not a remote run either
    model_run = submissions.compose(web_store, "forge", factory=load_agent("reference:idle"), account="alice",
                                    label="idle", actor=OPERATOR)
    slot = RunsRepo(web_store).planned_runs(model_run)[0].run_id
    assert client.post(f"/api/agent/runs/{slot}/step", json={"step": 1, "message": LIST_ALERTS},
                       headers=bearer(keys.alice_agent)).status_code == 404


# -- durability -------------------------------------------------------------------------------


def test_a_restarted_server_goes_on_where_the_run_was(web_store: Store, db_url: str) -> None:
    keys = accounts_and_keys(web_store)
    before = _client(web_store)
    assert submit_remote(before, keys.alice_api, "remote").status_code == 201
    lease = before.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    run_id, tools = lease["run_id"], lease["tools"]
    agent = load_agent("reference:diligent")()
    history, answers = list(lease["messages"]), []
    for index in (1, 2, 3):
        message = agent(history, tools)
        answer = before.post(f"/api/agent/runs/{run_id}/step", json={"step": index, "message": message},
                             headers=bearer(keys.alice_agent)).json()
        answers.append(answer)
        history = [*history, message, *answer["messages"]]
    web_store.close()  # the server goes away mid-run

    reopened = open_store(db_url)  # a new process: a new store, a new app, nothing in memory
    try:
        after = _client(reopened)
        again = after.post(f"/api/agent/runs/{run_id}/step", json={"step": 3, "message": message},
                           headers=bearer(keys.alice_agent))
        assert again.status_code == 200 and again.json() == answers[-1]  # its last answer, said again
        index, done = 4, False
        while not done:
            message = agent(history, tools)
            answer = after.post(f"/api/agent/runs/{run_id}/step", json={"step": index, "message": message},
                                headers=bearer(keys.alice_agent)).json()
            history = [*history, message, *answer["messages"]]
            done, index = answer["done"], index + 1
        assert answer["status"] == "completed"
        same_as_stored(reopened, run_id, in_process(reopened, run_id, "reference:diligent"))
        assert _n_steps(reopened, run_id) == index - 1
    finally:
        reopened.close()


def test_a_retried_step_is_answered_again_and_never_applied_twice(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    lease = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()
    run_id, tools = lease["run_id"], lease["tools"]
    agent = load_agent("reference:diligent")()
    history, index = list(lease["messages"]), 1

    def post(body: dict[str, Any]) -> Any:
        return client.post(f"/api/agent/runs/{run_id}/step", json=body, headers=bearer(keys.alice_agent))

    while True:
        message = agent(history, tools)
        first = post({"step": index, "message": message})
        assert first.status_code == 200
        for _ in range(2):  # the answer was lost, say: the same step again, twice
            assert post({"step": index, "message": message}).json() == first.json()
        assert _n_steps(web_store, run_id) == index
        history = [*history, message, *first.json()["messages"]]
        if first.json()["done"]:
            break
        if index == 2:
            other = post({"step": 2, "message": LIST_ALERTS})  # another message for a step taken
            assert other.status_code == 409 and other.json()["field"] == "step"
            gap = post({"step": index + 2, "message": LIST_ALERTS})
            assert gap.status_code == 409 and f"next step is {index + 1}" in gap.json()["detail"]
        index += 1
    # the world met every answer once: the run is the in-process run
    same_as_stored(web_store, run_id, in_process(web_store, run_id, "reference:diligent"))
    after_end = post({"step": index + 1, "message": LIST_ALERTS})
    assert after_end.status_code == 200 and after_end.json()["done"] is True
    assert after_end.json()["status"] == "completed" and after_end.json()["messages"] == []
    assert _n_steps(web_store, run_id) == index


def test_a_step_without_a_number_or_as_a_bare_message_is_the_next_one(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    run_id = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()["run_id"]
    url, auth = f"/api/agent/runs/{run_id}/step", bearer(keys.alice_agent)
    assert client.post(url, json={"message": LIST_ALERTS}, headers=auth).json()["step"] == 1
    bare = client.post(url, json=LIST_ALERTS, headers=auth)  # the contract's shape: the message itself
    assert bare.status_code == 200 and bare.json()["step"] == 2
    assert [m["role"] for m in bare.json()["messages"]] == ["tool"]
    assert _n_steps(web_store, run_id) == 2


# -- what ends a run --------------------------------------------------------------------------


def test_a_run_left_idle_past_its_time_ends_as_a_timeout(web_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()  # leases, steps and the sweeper read the store's clock: time passes when told
    set_store_clock(monkeypatch, clock)
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    submission_id = _remote_submission(web_store, Limits(turn_limit=40, time_limit=0.5))
    auth = bearer(keys.alice_agent)

    # an agent that answers too late: its step ends the run as the engine's timeout
    late = client.post("/api/agent/runs/next", headers=auth).json()
    assert late["limits"] == {"turn_limit": 40, "time_limit": 0.5}
    clock.advance(0.7)
    answer = client.post(f"/api/agent/runs/{late['run_id']}/step", json={"step": 1, "message": LIST_ALERTS},
                         headers=auth).json()
    assert (answer["done"], answer["status"], answer["messages"]) == (True, "timeout", [])

    # an agent that never comes back: the next lease (or the server's sweeper) ends its run
    gone = client.post("/api/agent/runs/next", headers=auth).json()
    step = client.post(f"/api/agent/runs/{gone['run_id']}/step", json={"step": 1, "message": LIST_ALERTS},
                       headers=auth).json()
    assert step["status"] == "running"
    clock.advance(0.7)
    following = client.post("/api/agent/runs/next", headers=auth).json()
    assert following["run_id"] not in (late["run_id"], gone["run_id"])
    statuses = {r["run_id"]: r["status"] for r in submissions.results(web_store, submission_id, actor=OPERATOR)["runs"]}
    assert statuses[late["run_id"]] == statuses[gone["run_id"]] == "timeout"
    assert statuses[following["run_id"]] == "pending"
    stored = RunsRepo(web_store).run(gone["run_id"])
    assert stored is not None and stored.turns == 1 and "time limit" in (stored.reason or "")
    # the agent's late answer is told the run is over; nothing is applied
    late_answer = client.post(f"/api/agent/runs/{gone['run_id']}/step", json={"step": 2, "message": LIST_ALERTS},
                              headers=auth).json()
    assert (late_answer["done"], late_answer["status"]) == (True, "timeout")
    assert remote.expire_idle(web_store) == 0  # the run just leased is not late yet: nothing to end
    clock.advance(0.7)  # once it is past its time limit, it alone is late
    assert remote.expire_idle(web_store) == 1 and RunsRepo(web_store).run(following["run_id"]).status == "timeout"  # type: ignore[union-attr]


def test_a_malformed_message_is_the_runs_empty_exactly_as_in_process(web_store: Store) -> None:
    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    auth = bearer(keys.alice_agent)
    deep: Any = []
    for _ in range(50):  # deeper than any message (MAX_DEPTH), yet under the body's nesting cap
        deep = [deep]
    # nested past the body's cap (web.guards.MAX_JSON_DEPTH): refused before it is parsed, and
    # the run it was sent to is untouched (still at its first step)
    abyss: Any = []
    for _ in range(600):
        abyss = [abyss]
    run_id = client.post("/api/agent/runs/next", headers=auth).json()["run_id"]
    refused = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": abyss}, headers=auth)
    assert refused.status_code == 422 and refused.json()["field"] == "body"
    assert RunsRepo(web_store).run(run_id).status is None  # type: ignore[union-attr]
    answer = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": "hello"}, headers=auth)
    assert (answer.json()["done"], answer.json()["status"]) == (True, "empty")
    same_as_stored(web_store, run_id, in_process(web_store, run_id, answering("hello")))
    for junk in ("hello", None, [1, 2], {"role": "user", "content": "hi"}, {"role": "assistant", "content": ""},
                 {"role": "assistant", "content": deep}):
        run_id = client.post("/api/agent/runs/next", headers=auth).json()["run_id"]
        answer = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": junk}, headers=auth)
        assert answer.status_code == 200
        assert (answer.json()["done"], answer.json()["status"]) == (True, "empty")
        same_as_stored(web_store, run_id, in_process(web_store, run_id, answering(junk)))

    # an unknown tool, or arguments that are not JSON: a tool error, and the run goes on
    run_id = client.post("/api/agent/runs/next", headers=auth).json()["run_id"]
    bad = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "rm_rf", "arguments": "{not json"}}]}
    answer = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 1, "message": bad}, headers=auth).json()
    assert (answer["done"], answer["status"]) == (False, "running")
    assert answer["messages"][0]["role"] == "tool" and answer["messages"][0]["tool_call_id"] == "x1"
    assert "error" in answer["messages"][0]["content"].lower()

    # the agent says it failed on its side: the run is `crashed`, as an agent that raises in-process
    crashed = client.post(f"/api/agent/runs/{run_id}/step", json={"step": 2, "error": "ValueError: oops"},
                          headers=auth).json()
    assert (crashed["done"], crashed["status"]) == (True, "crashed")
    assert "ValueError: oops" in crashed["reason"]  # the player is told why, as the owner is
    stored = RunsRepo(web_store).run(run_id)
    assert stored is not None and "ValueError: oops" in (stored.reason or "")
    view = submissions.results(web_store, stored.batch_id, actor=OPERATOR)
    assert next(r for r in view["runs"] if r["run_id"] == run_id)["reason"] == stored.reason
    assert all(r["reason"] is None for r in view["runs"] if r["status"] == "completed")


# -- the real processes -----------------------------------------------------------------------


def _assay(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*assay_command(), *args], env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.mark.heavy  # starts a process
def test_assay_play_plays_a_remote_submission_against_assay_serve(tmp_path: Path) -> None:
    """The real processes, on forge's five cases at one rep each (`forge-1`): what is proved here
    is the processes' part (the CLI, the server, their messages), which five runs show as well as
    fifteen; run-for-run equality with in-process play is the in-process tests' work above."""
    db = f"sqlite:///{tmp_path / 'assay.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "OPENAI_"))}
    env.update(ASSAY_DB=db, ASSAY_SECRET="e2e-secret-" + "x" * 32, NO_COLOR="1")
    _assay("suite", "release", str(write_one_rep_forge(tmp_path)), env=env)
    _assay("account", "create", "alice", "--public-handle", "alice-h", env=env)
    api_key = _assay("key", "create", "--account", "alice", "--kind", "api", env=env).stdout.strip().splitlines()[-1]
    agent_key = _assay("key", "create", "--account", "alice", "--kind", "agent", env=env).stdout.strip().splitlines()[-1]

    missing = _assay("play", "--server", "http://127.0.0.1:1", "--agent", "reference:diligent", env=env, check=False)
    assert missing.returncode == 2 and "ASSAY_AGENT_KEY" in missing.stderr and "Traceback" not in missing.stderr

    with assay_serve(None, tmp_path / "serve.log", env=env, probe="/api/suites") as base:
        with httpx2.Client(base_url=base, timeout=30) as http:
            created = http.post("/api/submissions", headers=bearer(api_key),
                                json={"suite": ONE_REP_FORGE, "label": "my-remote-agent", "agent": "remote", "publish": True})
            assert created.status_code == 201, created.text
            submission_id = created.json()["id"]

            played = _assay("play", "--server", base, "--agent", "reference:diligent",
                            env={**env, "ASSAY_AGENT_KEY": agent_key})
            assert played.stderr.count("· completed ·") == 5, played.stderr  # a line per run off a terminal
            assert "5 remote run(s) played" in played.stdout

            owner = http.get(f"/api/submissions/{submission_id}", headers=bearer(api_key)).json()
            assert owner["status"] == "complete" and owner["pass_rate"] == 1.0
            assert {r["status"] for r in owner["runs"]} == {"completed"}
            entries = http.get(f"/api/leaderboard/{ONE_REP_FORGE}").json()["entries"]
            assert [e["agent_label"] for e in entries if e["submission_id"] == submission_id] == ["my-remote-agent"]
            page = http.get(f"/suites/{ONE_REP_FORGE}")
            assert page.status_code == 200 and "my-remote-agent" in page.text

            again = _assay("play", "--server", base, "--agent", "reference:diligent",
                           env={**env, "ASSAY_AGENT_KEY": agent_key})
            assert "no run was pending" in again.stdout
            wrong = _assay("play", "--server", base, "--agent", "reference:diligent",
                           env={**env, "ASSAY_AGENT_KEY": api_key}, check=False)
            assert wrong.returncode == 2 and "401" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_release_worded_by_a_model_is_played_remotely_with_each_line_asked_once(
        web_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release that pins a model facilitator, played by a remote agent over HTTP: the server
    replays the run at every step, yet asks its facilitator endpoint once for each line, and the
    agent reads the model's lines."""
    import shutil

    import yaml

    import assay
    from assay.service import releases, scoring
    from assay.service.execution import FACILITATOR_BASE_URL_ENV
    from tests.support.fake_judge_server import FakeJudgeServer, content

    suite = tmp_path / "academy-gm"
    shutil.copytree(Path(assay.__file__).resolve().parent / "suites" / "academy", suite)
    doc = yaml.safe_load((suite / "suite.yaml").read_text(encoding="utf-8"))
    doc.update(key="academy-gm", version="1.0", reps_per_scenario=1, facilitator_model="openai:gm-1")
    (suite / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    releases.release_path(web_store, str(suite), actor=OPERATOR)
    keys, client = accounts_and_keys(web_store), _client(web_store)

    def gm(call: Any) -> Any:
        return content("(the model) " + call.body["messages"][-1]["content"].split(":\n\n", 1)[1])

    with FakeJudgeServer(gm) as server:
        monkeypatch.setenv(FACILITATOR_BASE_URL_ENV, server.base_url)
        created = submit_remote(client, keys.alice_api, "remote gm", suite="academy-gm")
        assert created.status_code == 201, created.text
        agent = RemoteAgent(client, keys.alice_agent, lambda lease: load_agent("reference:steadfast"))
        assert agent.play_all() == 4
        asked = len(server.calls)
    submission_id = created.json()["id"]
    scoring.score(web_store, submission_id, actor=OPERATOR)
    owner = client.get(f"/api/submissions/{submission_id}", headers=bearer(keys.alice_api)).json()
    assert owner["status"] == "complete" and owner["facilitator_models"] == ["openai:gm-1"]
    lines = []
    for run in owner["runs"]:
        record = RunsRepo(web_store).run(run["run_id"])
        assert record is not None and record.status == "completed" and record.transcript is not None
        lines += [e["content"] for e in record.transcript if e.get("source") == "facilitator" and e.get("role") == "user"]
    assert lines and all(line.startswith("(the model)") for line in lines) and asked == len(lines)
    # what the agent read was the model's words, the opening included
    read = [m["content"] for body in agent.seen for m in body.get("messages", []) if m.get("role") == "user"]
    assert set(lines) <= set(read)


def test_a_remote_agent_may_report_its_usage_which_is_recorded_self_reported(web_store: Store) -> None:
    from assay.store.usage_repo import UsageRepo

    keys = accounts_and_keys(web_store)
    client = _client(web_store)
    assert submit_remote(client, keys.alice_api, "remote").status_code == 201
    run_id = client.post("/api/agent/runs/next", headers=bearer(keys.alice_agent)).json()["run_id"]
    url, auth = f"/api/agent/runs/{run_id}/step", bearer(keys.alice_agent)
    used = {"model": "remote-model", "prompt_tokens": 120, "completion_tokens": 8}
    assert client.post(url, json={"step": 1, "message": {**LIST_ALERTS, "usage": used}}, headers=auth).status_code == 200
    finish = {"role": "assistant", "content": None, "usage": {**used, "cached_tokens": 20}, "tool_calls": [
        {"id": "f", "type": "function", "function": {"name": "finish",
                                                     "arguments": '{"claimed_success": false, "summary": "x"}'}}]}
    answer = client.post(url, json={"step": 2, "message": finish}, headers=auth).json()
    assert answer["done"] is True
    (row,) = UsageRepo(web_store).for_runs([run_id])
    assert (row["role"], row["model"], row["prompt_tokens"], row["completion_tokens"], row["cached_tokens"],
            row["calls"], row["self_reported"]) == ("agent", "remote-model", 240, 16, 20, 2, True)
