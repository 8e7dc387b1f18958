"""Each run is its own: nothing an agent does to what it is handed reaches another run or the record.

A run happens "in its own fork of the world" (docs/architecture.md, Words), and a replay or a judge reads
its record as what the harness sent and the agent said. An agent is arbitrary code, and some
real adapters edit the tool schemas they are given in place (dropping keys a provider rejects);
such an edit must stay inside that agent's own turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.agents.loader import AgentFactory
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle
from assay.store.repo import Store
from assay.worlds.estate.kit import SYSTEM_PROMPT
from assay.worlds.estate.tools import TOOLS
from assay.worlds.tooling import FINISH
from assay.store.runs_repo import RunsRepo

AGENT = f"python:{Path(__file__).resolve().parents[1] / 'fixtures' / 'agents' / 'misbehaving.py'}:mutates_inputs"


def pristine_tools() -> list[dict[str, Any]]:
    return [t.schema() for t in TOOLS.values()] + [FINISH.schema()]


@pytest.fixture(autouse=True)
def restore_shared_schemas() -> Iterator[None]:
    """Whatever an agent here did to the kit's shared schemas, later tests must not inherit it."""
    yield
    from assay.worlds.estate import tools as estate_tools

    for schema, clean in zip(estate_tools.SCHEMAS, pristine_tools()):
        if schema != clean:
            schema.clear()
            schema.update(clean)


def test_an_agent_editing_its_tools_does_not_reach_later_runs(sqlite_store: Store, forge: SuiteBundle) -> None:
    result = run_suite(forge, agent_spec=AGENT, trials=2, workers=1, store=sqlite_store)
    summaries = [row.claim_summary for row in RunsRepo(sqlite_store).runs_for_batch(result.batch_id)]
    assert summaries == ["pristine"] * 10, "a run was handed tools an earlier run's agent had edited"


def test_the_transcript_records_what_the_harness_sent_not_what_the_agent_made_of_it(
    sqlite_store: Store, forge: SuiteBundle
) -> None:
    result = run_suite(forge, agent_spec=AGENT, trials=1, workers=1, store=sqlite_store)
    for row, case in zip(RunsRepo(sqlite_store).runs_for_batch(result.batch_id), forge.scenarios):
        assert row.transcript is not None
        assert row.transcript[0] == {"source": "harness", "role": "system", "content": SYSTEM_PROMPT}
        assert row.transcript[1] == {"source": "harness", "role": "user", "content": case.scenario.briefing}


def test_pristine_tools_are_what_a_run_is_handed(sqlite_store: Store, forge: SuiteBundle) -> None:
    """The control for the two tests above: an agent that only looks sees exactly the pristine schemas."""
    seen: list[str] = []

    def make() -> Any:
        def agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
            seen.append(json.dumps(tools, sort_keys=True))
            return {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
                "name": "finish", "arguments": json.dumps({"claimed_success": False, "summary": "looked"})}}]}
        return agent

    run_suite(forge, factory=AgentFactory("python:test_isolation:looker", make), trials=1, store=sqlite_store)
    assert seen and set(seen) == {json.dumps(pristine_tools(), sort_keys=True)}
