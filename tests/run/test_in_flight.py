"""`--workers N` is the number of runs in flight: a batch of N model runs has N calls open at the
endpoint at once, whether it plays on one event loop, on child processes' loops or on Ray.

The local endpoint holds every call until `WANT` are open together (or it gives up waiting), so
the test counts what was open at once; it measures no time."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from assay.agents.loader import load_agent
from assay.records import RunRecord
from assay.run.engine import Limits
from assay.run.executors import Task
from assay.run.executors.aio import AsyncExecutor
from assay.run.executors.procs import ProcessAsyncExecutor
from assay.service.runs import plan_batch
from assay.service.suites import SuiteBundle

try:  # `python -m pytest` puts the repo root on sys.path; a bare `pytest` only tests/
    from tests.support.fake_openai import FakeOpenAI, assistant, tool_call
except ModuleNotFoundError:  # pragma: no cover
    from support.fake_openai import FakeOpenAI, assistant, tool_call  # type: ignore[no-redef]

WANT = 100
#: A bound on how long the endpoint holds a call waiting for the others: only a broken executor
#: ever reaches it (the count it leaves is then below WANT, and the test says so).
PATIENCE_S = 180.0  # a bound on waiting, never a timed assertion: a loaded CI machine with a Ray per worker needed more than 60 s


class Gate:
    """A responder that answers nobody until `want` calls are open together."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.open = 0
        self.most = 0
        self.calls = 0
        self._cond = threading.Condition()

    def __call__(self, _request: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            self.calls += 1
            self.open += 1
            self.most = max(self.most, self.open)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.most >= self.want, timeout=PATIENCE_S)
            self.open -= 1
        return assistant(tool_calls=[tool_call("finish", {"claimed_success": False, "summary": "held"})])


def tasks(forge: SuiteBundle, runs: int) -> list[Task]:
    by_hash = {s.content_hash: s for s in forge.scenarios}
    planned = plan_batch(forge, -(-runs // len(forge.scenarios)), 0)[:runs]
    return [Task(by_hash[p.scenario_hash], p) for p in planned]


def play(executor: Any, forge: SuiteBundle, gate: Gate) -> list[RunRecord]:
    seen: list[RunRecord] = []
    with FakeOpenAI(gate) as server:
        agent = load_agent("openai:fake-model", base_url=server.base_url)
        executor.execute(tasks(forge, WANT), agent, Limits(), lambda record, _steps: seen.append(record))
    return seen


@pytest.mark.heavy  # starts a process
@pytest.mark.parametrize("executor", [AsyncExecutor(WANT), ProcessAsyncExecutor(WANT, 2)],
                         ids=["one-loop", "two-processes"])
def test_a_batch_of_n_runs_at_n_workers_has_n_calls_in_flight(forge: SuiteBundle, executor: Any) -> None:
    gate = Gate(WANT)
    seen = play(executor, forge, gate)
    assert len(seen) == WANT and gate.calls == WANT
    assert gate.most == WANT
    assert {r.status for r in seen} == {"completed"}
