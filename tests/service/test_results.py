"""Results are computed from what is stored, and the plan is the denominator (invariant 5).

A planned slot whose run never arrived (a worker died, a machine was lost) is still a planned run:
`results_json` shows it as a failed `error` trial, and every rate counts it. On both backends.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import uuid

import pytest

from assay import HARNESS_VERSION
from assay.agents.loader import load_agent
from assay.errors import BadInput
from assay.run.engine import Limits
from assay.run.executors.threads import ThreadExecutor
from assay.service.results import debrief, replay, results_json
from assay.run.executors import Task
from assay.service.execution import execute_tasks
from assay.service.runs import plan_batch
from assay.service.suites import record_scenarios, resolve_suite
from assay.store.repo import Store
from assay.store.runs_repo import RunsRepo
from assay.store.rows import NewBatch


def test_a_planned_run_that_never_arrived_counts_as_a_failed_error_trial(store: Store) -> None:
    bundle = resolve_suite("forge")
    factory = load_agent("reference:diligent")
    record_scenarios(store, bundle.scenarios)
    planned = plan_batch(bundle, trials=2, seed=0)
    batch_id = uuid.uuid4().hex
    RunsRepo(store).add_batch(
        NewBatch(id=batch_id, kind="run", suite_key=bundle.key, suite_version=bundle.version,
                 agent_spec=factory.spec, agent_label="diligent", config_signature=factory.config_signature,
                 harness_version=HARNESS_VERSION, trials=2, base_seed=0),
        planned,
    )
    arrived = [p for p in planned if p.trial == 1]  # every trial 2 is lost
    by_hash = {s.content_hash: s for s in bundle.scenarios}
    execute_tasks(store, by_hash, factory, [Task(by_hash[p.scenario_hash], p) for p in arrived], Limits(),
                  ThreadExecutor(2))

    results = results_json(store, batch_id, actor=OPERATOR)
    trials = [t for c in results["cases"] for t in c["trials"]]
    assert len(trials) == len(planned) == 10
    for t in trials:
        if t["trial"] == 1:
            assert t["status"] == "completed" and t["passed"] is True
        else:
            assert t["status"] == "error"
            assert t["reason"] == "no run was recorded for this planned slot"
            assert t["passed"] is False and t["score"] == 0 and t["claimed_success"] is None
            assert t["false_success"] is False
    assert all(c["consistent"] is False for c in results["cases"])
    s = results["summary"]
    assert s["trials"] == 10
    assert s["pass_rate"] == pytest.approx(0.5)
    assert s["consistency"] == 0.0
    assert s["pass_hat_k"] == {"1": pytest.approx(0.5), "2": 0.0}

    lost = next(t for t in trials if t["trial"] == 2)["run_id"]
    for look in (debrief, replay):
        with pytest.raises(BadInput, match="never produced a record"):
            look(store, lost, actor=OPERATOR)


def test_results_of_an_unknown_batch_is_bad_input(store: Store) -> None:
    with pytest.raises(BadInput, match="no such batch"):
        results_json(store, "0" * 32, actor=OPERATOR)


def test_results_debrief_and_replay_are_the_typed_models_the_contract_names(store: Store) -> None:
    """The JSON documents are dumps of `assay.records` models (the same ones the HTTP API will
    answer with): each validates back into its model unchanged, carries the schema version, and a
    document missing a contract key or with a stray one is refused by the model."""
    from assay.records import RESULTS_VERSION, BatchResults, Debrief, ReplayReport
    from assay.service.runs import run_suite

    bundle = resolve_suite("forge")
    result = run_suite(bundle, factory=load_agent("reference:diligent"), trials=1, seed=3, workers=2,
                       label="typed", limits=Limits(), store=store, executor=ThreadExecutor(2))
    doc = results_json(store, result.batch_id, actor=OPERATOR)
    assert doc["schema_version"] == RESULTS_VERSION
    assert BatchResults.model_validate(doc).as_json() == doc
    assert results_json(store, result.batch_id[:10], actor=OPERATOR) == doc  # a unique prefix names it too
    run_id = doc["cases"][0]["trials"][0]["run_id"]
    for model, view in ((Debrief, debrief(store, run_id, actor=OPERATOR)), (ReplayReport, replay(store, run_id, actor=OPERATOR))):
        assert model.model_validate(view).as_json() == view
    assert replay(store, run_id, actor=OPERATOR)["identical"] is True

    broken = {k: v for k, v in doc.items() if k != "summary"}
    with pytest.raises(ValueError, match="summary"):
        BatchResults.model_validate(broken)
    with pytest.raises(ValueError, match="surprise"):
        BatchResults.model_validate({**doc, "surprise": 1})
    schema = BatchResults.model_json_schema()
    trial_keys = set(schema["$defs"]["TrialResult"]["properties"])
    assert {"run_id", "trial", "seed", "status", "score", "passed", "safety_failures", "claimed_success",
            "false_success", "final_state_hash", "checks", "reason", "turns"} <= trial_keys


def test_a_debrief_names_the_paths_a_check_found_nothing_at(store: Store) -> None:
    """A check that failed because what it reads is not in the final state (a removed key) says so
    in the debrief; a check whose paths all resolve names none."""
    from assay.scenario.predicates import format_path, lookup, split_path
    from assay.service.results import _not_found
    from assay.service.runs import run_suite

    bundle = resolve_suite("forge")
    result = run_suite(bundle, factory=load_agent("reference:diligent"), trials=1, seed=3, workers=1,
                       label="not-found", limits=Limits(), store=store, executor=ThreadExecutor(1))
    run_id = results_json(store, result.batch_id, actor=OPERATOR)["cases"][0]["trials"][0]["run_id"]
    view = debrief(store, run_id, actor=OPERATOR)
    assert all(c["not_found"] == [] for c in view["checks"])
    run = RunsRepo(store).run(run_id)
    assert run is not None and run.scenario is not None
    check = next(c for c in run.scenario.document["checks"] if "path" in c["expect"])
    keys = split_path(check["expect"]["path"])
    state = run.final_state
    assert lookup(state, check["expect"]["path"]) is not None
    parent = lookup(state, format_path(keys[:-1])) if len(keys) > 1 else state
    del parent[keys[-1]]
    assert _not_found(check["expect"], state) == [check["expect"]["path"]]
