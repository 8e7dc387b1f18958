"""Invariant 4, deterministic worlds: the world derives only from the seed, and a replay proves it.

World RNG and clock derive from (run seed, scenario id, trial) by SHA-256 — never from Python's
`hash()`, wall time, global `random`, or the order in which workers happen to finish. Replaying a
run's recorded actions on a fresh fork reproduces its final state hash exactly; replaying anything
else does not.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import dataclasses
import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.records import PlannedRun
from assay.run.drivers import replay as replay_actions
from assay.run.engine import Episode, Limits, fork_world
from assay.service.results import replay, results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle, resolve_suite
from assay.canonical import canonical_hash
from assay.store.db import open_store
from assay.store.repo import Store
from assay.store.runs_repo import RunsRepo

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "misbehaving.py"
REPO = Path(__file__).resolve().parents[2]
DETERMINISTIC = ["reference:diligent", "reference:hasty"]


@pytest.fixture(scope="module")
def forge() -> SuiteBundle:
    return resolve_suite("forge")


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One SQLite store for the whole module: batches pile up in it as they would in a user's."""
    opened = open_store(f"sqlite:///{tmp_path_factory.mktemp('determinism') / 'assay.db'}")
    try:
        yield opened
    finally:
        opened.close()


def batch(store: Store, bundle: SuiteBundle, agent: str, *, seed: int = 0, trials: int = 2, workers: int = 3,
          limits: Limits | None = None) -> dict[str, Any]:
    result = run_suite(bundle, agent_spec=agent, trials=trials, seed=seed, workers=workers, store=store, limits=limits)
    return results_json(store, result.batch_id, actor=OPERATOR)


def outcomes(results: dict[str, Any]) -> dict[tuple[str, int], tuple[str, int, bool]]:
    """(case, trial) -> (final_state_hash, score, passed)."""
    return {(c["case_id"], t["trial"]): (t["final_state_hash"], t["score"], t["passed"])
            for c in results["cases"] for t in c["trials"]}


def without_time(value: Any) -> Any:
    """A state with the virtual clock and every timestamp taken out: what remains is the world itself."""
    if isinstance(value, dict):
        return {k: without_time(v) for k, v in value.items() if k not in ("clock", "t")}
    if isinstance(value, list):
        return [without_time(v) for v in value]
    return value


@pytest.mark.parametrize("agent", DETERMINISTIC)
def test_the_same_seed_gives_the_same_world_state_and_score(sqlite_store: Store, forge: SuiteBundle, agent: str) -> None:
    first = outcomes(batch(sqlite_store, forge, agent, seed=11, workers=1))
    second = outcomes(batch(sqlite_store, forge, agent, seed=11, workers=4))  # a different finishing order, too
    assert len(first) == len(forge.scenarios) * 2
    assert first == second


@pytest.mark.parametrize("agent", DETERMINISTIC)
def test_trials_of_a_case_are_distinct_draws_of_in_run_chance(sqlite_store: Store, forge: SuiteBundle, agent: str) -> None:
    """The trial number enters the derivation: same case, same seed, different trial, different clock."""
    got = outcomes(batch(sqlite_store, forge, agent))
    for case in forge.scenarios:
        assert got[(case.id, 1)][0] != got[(case.id, 2)][0], case.id
        assert got[(case.id, 1)][1:] == got[(case.id, 2)][1:], case.id


@pytest.mark.parametrize("agent", DETERMINISTIC)
def test_another_seed_only_jitters_the_virtual_clock(sqlite_store: Store, forge: SuiteBundle, agent: str) -> None:
    """The world is the scenario's; the run seed only decides how long each action takes.

    So a deterministic agent gets the same scores under any seed; its final states differ (the
    clock moved differently), but only in the clock and the timestamps it stamped.
    """
    a = batch(sqlite_store, forge, agent, seed=0)
    b = batch(sqlite_store, forge, agent, seed=12345)
    oa, ob = outcomes(a), outcomes(b)
    assert {k: v[1:] for k, v in oa.items()} == {k: v[1:] for k, v in ob.items()}
    assert all(oa[k][0] != ob[k][0] for k in oa), "an acting agent's clock should move differently under another seed"

    states_a = {(r.case_id, r.trial): r.final_state for r in RunsRepo(sqlite_store).runs_for_batch(a["batch_id"])}
    states_b = {(r.case_id, r.trial): r.final_state for r in RunsRepo(sqlite_store).runs_for_batch(b["batch_id"])}
    for key, state in states_a.items():
        assert state["clock"]["start"] == states_b[key]["clock"]["start"], key  # the scenario's own clock
        assert without_time(state) == without_time(states_b[key]), key


def test_an_agent_that_never_acts_ends_in_the_initial_world_whatever_the_seed(sqlite_store: Store, forge: SuiteBundle) -> None:
    a = outcomes(batch(sqlite_store, forge, "reference:idle", seed=0))
    b = outcomes(batch(sqlite_store, forge, "reference:idle", seed=999))
    assert a == b
    for case in forge.scenarios:
        assert a[(case.id, 1)][0] == canonical_hash(case.initial_state) == a[(case.id, 2)][0]


@pytest.mark.heavy  # starts a process
def test_world_hashes_do_not_depend_on_pythons_hash_seed(forge: SuiteBundle, tmp_path: Path) -> None:
    """Two interpreters with different PYTHONHASHSEED (so different `hash()` of every str) agree."""
    script = (
        "import json, sys\n"
        "from assay.service.runs import run_suite\n"
        "from assay.service.results import results_json\nfrom assay.service.actors import OPERATOR\n"
        "from assay.store.db import open_store\n"
        "store = open_store(sys.argv[1])\n"
        "r = run_suite('forge', agent_spec='reference:hasty', trials=2, seed=7, workers=2, store=store)\n"
        "res = results_json(store, r.batch_id, actor=OPERATOR)\n"
        "print(json.dumps(sorted([c['case_id'], t['trial'], t['final_state_hash'], t['score']]"
        " for c in res['cases'] for t in c['trials'])))\n"
    )
    seen = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        url = f"sqlite:///{tmp_path / f'h{hash_seed}.db'}"
        proc = subprocess.run([sys.executable, "-c", script, url], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        seen.append(json.loads(proc.stdout))
    assert seen[0] == seen[1]
    assert len(seen[0]) == len(forge.scenarios) * 2


# -- replay ------------------------------------------------------------------------------------


REPLAYED = [
    "reference:diligent",
    "reference:hasty",
    "reference:overclaimer",
    "reference:idle",
    f"python:{AGENTS}:unknown_tools",   # an action the world refused by name
    f"python:{AGENTS}:bad_arguments",   # actions with raw-string and mistyped arguments
    f"python:{AGENTS}:chatty",          # turn_limit, no actions
    f"python:{AGENTS}:raises",          # crashed
    f"python:{AGENTS}:hangs_async",     # timeout
]


def test_replay_reproduces_every_stored_run_of_several_batches(sqlite_store: Store, forge: SuiteBundle) -> None:
    replayed = 0
    statuses = set()
    for agent in REPLAYED:
        results = batch(sqlite_store, forge, agent, seed=3, trials=2 if agent.startswith("reference:") else 1,
                        workers=4, limits=Limits(turn_limit=40, time_limit=0.5) if "hangs" in agent else None)
        for case in results["cases"]:
            for t in case["trials"]:
                report = replay(sqlite_store, t["run_id"], actor=OPERATOR)
                assert report["identical"] is True, (agent, case["case_id"], report["differences"])
                assert report["replayed_final_state_hash"] == t["final_state_hash"]
                assert report["world_fingerprint_matches"] is True
                assert report["differences"] == []
                statuses.add(t["status"])
                replayed += 1
    assert replayed == len(forge.scenarios) * (4 * 2 + 5)
    assert statuses == {"completed", "turn_limit", "crashed", "timeout"}


def test_replay_accepts_a_unique_run_id_prefix(sqlite_store: Store, forge: SuiteBundle) -> None:
    results = batch(sqlite_store, forge, "reference:diligent", trials=1)
    run_id = results["cases"][0]["trials"][0]["run_id"]
    assert replay(sqlite_store, run_id[:12], actor=OPERATOR)["run_id"] == run_id


# -- tampering is detected -------------------------------------------------------------------


def replay_hash(bundle: SuiteBundle, case_id: str, seed: int, trial: int, actions: list[dict[str, Any]]) -> str:
    loaded = next(s for s in bundle.scenarios if s.id == case_id)
    planned = PlannedRun("replay", 0, case_id, loaded.content_hash, trial, seed)
    episode = Episode(planned, fork_world(loaded, seed, trial), Limits(len(actions) + 1, float("inf")))
    return canonical_hash(replay_actions(episode, actions).world.state())


def tool_names(actions: list[dict[str, Any]]) -> list[str]:
    return [c["function"]["name"] for a in actions for c in a.get("tool_calls") or ()]


@pytest.fixture(scope="module")
def second_host_run(sqlite_store: Store, forge: SuiteBundle) -> dict[str, Any]:
    """Diligent's stored run of forge-second-host: it isolates web-02 and web-03, notifies security, finishes."""
    results = batch(sqlite_store, forge, "reference:diligent", seed=5, trials=1)
    t = next(c for c in results["cases"] if c["case_id"] == "forge-second-host")["trials"][0]
    stored = RunsRepo(sqlite_store).run(t["run_id"])
    assert stored is not None and stored.actions is not None
    assert tool_names(stored.actions)[-4:] == ["isolate_host", "isolate_host", "notify", "finish"]
    return dataclasses.asdict(stored)


def test_the_recorded_actions_replay_to_the_stored_hash(forge: SuiteBundle, second_host_run: dict[str, Any]) -> None:
    run = second_host_run
    assert replay_hash(forge, run["case_id"], run["seed"], run["trial"], run["actions"]) == run["final_state_hash"]


def _edit_arguments(action: dict[str, Any], edit: Any) -> None:
    fn = action["tool_calls"][0]["function"]
    args = json.loads(fn["arguments"])
    edit(args)
    fn["arguments"] = json.dumps(args)


def _tampered() -> dict[str, Any]:
    def last(actions: list[dict[str, Any]], tool: str) -> int:
        return max(i for i, a in enumerate(actions) if tool_names([a]) == [tool])

    def drop_last_act(actions: list[dict[str, Any]]) -> None:
        del actions[last(actions, "notify")]

    def isolate_the_wrong_host(actions: list[dict[str, Any]]) -> None:
        _edit_arguments(actions[last(actions, "isolate_host")], lambda a: a.update(host="web-01"))

    def one_more_look(actions: list[dict[str, Any]]) -> None:  # even a read moves the clock
        look = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "list_hosts", "arguments": "{}"}}]}
        actions.insert(last(actions, "finish"), look)

    def reworded_message(actions: list[dict[str, Any]]) -> None:
        _edit_arguments(actions[last(actions, "notify")], lambda a: a.update(message=a["message"] + " (edited)"))

    return {f.__name__: f for f in (drop_last_act, isolate_the_wrong_host, one_more_look, reworded_message)}


@pytest.mark.parametrize("tamper", list(_tampered()))
def test_a_replay_of_tampered_actions_diverges(forge: SuiteBundle, second_host_run: dict[str, Any], tamper: str) -> None:
    run = second_host_run
    actions = copy.deepcopy(run["actions"])
    _tampered()[tamper](actions)
    assert actions != run["actions"]
    assert replay_hash(forge, run["case_id"], run["seed"], run["trial"], actions) != run["final_state_hash"]


@pytest.mark.parametrize(("seed_delta", "trial_delta"), [(1, 0), (0, 1)], ids=["other-seed", "other-trial"])
def test_a_replay_under_another_seed_or_trial_diverges(forge: SuiteBundle, second_host_run: dict[str, Any],
                                                       seed_delta: int, trial_delta: int) -> None:
    run = second_host_run
    other = replay_hash(forge, run["case_id"], run["seed"] + seed_delta, run["trial"] + trial_delta, run["actions"])
    assert other != run["final_state_hash"]


def test_a_version_1_record_replays_to_the_same_hash(forge: SuiteBundle, second_host_run: dict[str, Any]) -> None:
    """Rows stored before the episode engine kept only the applied tool calls, as {tool, arguments}:
    read through `legacy_actions`, they replay on today's engine to the hash they were stored with."""
    from assay.records import legacy_actions, transcript_events

    run = second_host_run
    v1 = [{"tool": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
          for a in run["actions"] for c in a["tool_calls"] if c["function"]["name"] != "finish"]
    assert replay_hash(forge, run["case_id"], run["seed"], run["trial"], legacy_actions(v1)) == run["final_state_hash"]
    old_transcript = [{k: v for k, v in e.items() if k != "source"} for e in run["transcript"]]
    assert transcript_events(old_transcript) == run["transcript"]
