"""The estate kit moved onto the observation protocol with its hashes unchanged.

`forge_pinned.json` was written by the engine *before* the episode engine existed (commit
a50b416): for every reference agent, seeds 0 and 7, two trials of every forge case, the final
state hash, status, score, claim and turns. Every executor must give exactly those today.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
from pathlib import Path

import pytest

from assay.agents.reference import REFERENCE_AGENTS
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle
from assay.store import Store

PINNED = json.loads((Path(__file__).parent / "forge_pinned.json").read_text())


def test_scenario_hashes_are_unchanged(forge: SuiteBundle) -> None:
    assert forge.scenario_hashes() == PINNED["_scenario_hashes"]


@pytest.mark.parametrize("executor", ["threads", "async"])
def test_reference_agents_reach_the_pinned_final_states(forge: SuiteBundle, sqlite_store: Store, executor: str) -> None:
    seen = {}
    for name in REFERENCE_AGENTS:
        for seed in (0, 7):
            batch = run_suite(forge, agent_spec=f"reference:{name}", trials=2, seed=seed, workers=3,
                              store=sqlite_store, executor=executor)
            for case in results_json(sqlite_store, batch.batch_id, actor=OPERATOR)["cases"]:
                for t in case["trials"]:
                    seen[f"{name}/{seed}/{case['case_id']}/{t['trial']}"] = {
                        k: t[k] for k in ("final_state_hash", "status", "score", "passed", "claimed_success", "turns")}
    expected = {k: v for k, v in PINNED.items() if not k.startswith("_")}
    assert seen == expected
