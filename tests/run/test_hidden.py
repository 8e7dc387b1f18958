"""Invariant 3, hidden stays hidden: nothing an agent can see carries the hidden truth or the checks.

The hidden truth and the checks live in objects the agent loop never receives. These tests do not
take that on trust: they record every byte an agent is handed on every turn (the messages and
the tool schemas, exactly as a python agent receives them, and exactly as an OpenAI-compatible
endpoint receives them over HTTP) and scan it for the hidden truth, each substantial sentence of
it, every check's id and description, and every serialization of every check's predicate.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
import re
from typing import Any

import pytest

from assay.agents.loader import AgentFactory, load_agent
from assay.service.results import debrief, results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle
from assay.store.repo import Store
from assay.store.runs_repo import RunsRepo

try:  # `python -m pytest` puts the repo root on sys.path; a bare `pytest` only tests/
    from tests.support.fake_openai import FakeOpenAI, assistant, tool_call
except ModuleNotFoundError:  # pragma: no cover
    from support.fake_openai import FakeOpenAI, assistant, tool_call  # type: ignore[no-redef]

SENTENCE_MIN = 30


# -- what must never be seen -----------------------------------------------------------------


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _fragments(text: str) -> list[str]:
    """The text itself and every sentence (or `;`-clause) of it longer than SENTENCE_MIN characters."""
    flat = re.sub(r"\s+", " ", text).strip()
    parts = re.split(r"(?<=[.!?;])\s+", flat)
    return [flat, *[p for p in parts if len(p) > SENTENCE_MIN]]


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _serializations(value: Any) -> tuple[str, ...]:
    """The predicate as JSON in every spelling a leak could take (key order, spacing, nulls)."""
    out = set()
    for v in (value, _without_none(value)):
        for sort_keys in (False, True):
            for separators in ((", ", ": "), (",", ":")):
                for ensure_ascii in (False, True):
                    out.add(json.dumps(v, sort_keys=sort_keys, separators=separators, ensure_ascii=ensure_ascii))
    return tuple(sorted(out))


Secret = tuple[str, str, tuple[str, ...]]
"""(case id, what it is, the spellings of it: finding any one of them is a leak)."""


def secrets_of(bundle: SuiteBundle) -> list[Secret]:
    """Everything of each case that only a debrief may show."""
    found: list[Secret] = []
    for case in bundle.scenarios:
        doc = case.document
        for frag in _fragments(doc["hidden_truth"]):
            found.append((case.id, "hidden_truth", (frag,)))
        for item in [*doc["checks"], *doc.get("win_conditions", [])]:
            found.append((case.id, "check id", (item["id"],)))
            found.append((case.id, "check description", (item["description"],)))
            found.append((case.id, "check expect", _serializations(item["expect"])))
    return found


class Seen:
    """Everything an agent was handed, searchable raw and with its strings decoded."""

    def __init__(self) -> None:
        self.raw: list[str] = []
        self.strings: list[str] = []

    def add(self, value: Any) -> None:
        self.raw.append(json.dumps(value))
        self.raw.append(json.dumps(value, ensure_ascii=False))
        self._collect(value)

    def _collect(self, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                self._collect(k)
                self._collect(v)
        elif isinstance(value, list):
            for v in value:
                self._collect(v)
        elif isinstance(value, str):
            self.strings.append(value)
            try:  # tool results and tool-call arguments are JSON inside a string
                inner = json.loads(value)
            except ValueError:
                return
            if isinstance(inner, dict | list):
                self._collect(inner)

    def leaks(self, secrets: list[Secret]) -> list[tuple[str, str, str]]:
        """(case id, what, the spelling found) for every secret that appears anywhere."""
        raw = "\n".join(self.raw)
        raw_lower = raw.lower()
        text = _squash("\n".join(self.strings))
        found = []
        for cid, what, spellings in secrets:
            hit = next((s for s in spellings if s in raw or s.lower() in raw_lower or _squash(s) in text), None)
            if hit is not None:
                found.append((cid, what, hit))
        return found


def test_the_scan_would_find_a_leak(forge: SuiteBundle) -> None:
    """A positive control: the debrief does hold every secret, so a scanner that misses them is broken."""
    secrets = secrets_of(forge)
    for case in forge.scenarios:  # every case has its truth, sentences of it, and checks to look for
        kinds = [what for cid, what, _ in secrets if cid == case.id]
        assert kinds.count("hidden_truth") >= 3, case.id
        assert kinds.count("check id") == kinds.count("check description") == kinds.count("check expect") >= 3
    seen = Seen()
    seen.add([{"role": "tool", "content": json.dumps(case.document)} for case in forge.scenarios])
    assert [(cid, what) for cid, what, _ in seen.leaks(secrets)] == [(cid, what) for cid, what, _ in secrets]


# -- python agents ---------------------------------------------------------------------------


def recording(cls: type, seen: Seen) -> Any:
    """A fresh recording agent per run that records what it receives and delegates to `cls`."""

    def make() -> Any:
        inner = cls()

        def agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            seen.add(messages)
            seen.add(tools)
            return inner(messages, tools)

        return agent

    return make


@pytest.mark.parametrize("name", ["diligent", "hasty", "overclaimer", "idle"])
def test_a_python_agent_never_receives_the_hidden_truth_or_the_checks(
    sqlite_store: Store, forge: SuiteBundle, name: str
) -> None:
    seen = Seen()
    reference = load_agent(f"reference:{name}").make  # the class the loader instantiates per run
    factory = AgentFactory(f"python:test_hidden:recording_{name}", recording(reference, seen))
    result = run_suite(forge, factory=factory, trials=2, workers=2, store=sqlite_store)

    results = results_json(sqlite_store, result.batch_id, actor=OPERATOR)
    trials = [t for c in results["cases"] for t in c["trials"]]
    assert {t["status"] for t in trials} == {"completed"}
    assert len(seen.raw) >= 2 * len(trials)  # it really was called, every run
    assert seen.leaks(secrets_of(forge)) == []

    # and the debrief, after the run, does reveal them: the scan above looked for real text
    shown = Seen()
    shown.add(debrief(sqlite_store, trials[0]["run_id"], actor=OPERATOR))
    assert shown.leaks([s for s in secrets_of(forge) if s[0] == results["cases"][0]["case_id"]])


def test_the_stored_transcript_holds_nothing_hidden_either(sqlite_store: Store, forge: SuiteBundle) -> None:
    """The transcript is what the agent saw and said; a debrief adds the truth beside it, not in it."""
    result = run_suite(forge, agent_spec="reference:diligent", trials=1, store=sqlite_store)
    seen = Seen()
    for row in RunsRepo(sqlite_store).runs_for_batch(result.batch_id):
        seen.add(row.transcript)
    assert seen.leaks(secrets_of(forge)) == []


# -- the openai adapter, over HTTP -----------------------------------------------------------


def _script(request: dict[str, Any]) -> dict[str, Any]:
    """Look at the alerts once, then finish: what a minimal model might do."""
    said = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if said == 0:
        return assistant(tool_calls=[tool_call("list_alerts", {})])
    return assistant(tool_calls=[tool_call("finish", {"claimed_success": True, "summary": "Looked; fine."})])


def test_an_openai_endpoint_never_receives_the_hidden_truth_or_the_checks(sqlite_store: Store, forge: SuiteBundle) -> None:
    with FakeOpenAI(_script) as server:
        result = run_suite(forge, agent_spec="openai:test-model", trials=1, workers=2, store=sqlite_store,
                           agent_options={"base_url": server.base_url, "api_key": "sk-test-hidden"})
        requests = list(server.requests)
        assert server.responder_errors == []

    results = results_json(sqlite_store, result.batch_id, actor=OPERATOR)
    trials = [t for c in results["cases"] for t in c["trials"]]
    assert [t["status"] for t in trials] == ["completed"] * len(forge.scenarios)
    assert len(requests) == 2 * len(forge.scenarios)
    names = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"list_alerts", "finish"} <= names

    seen = Seen()
    for body in requests:
        seen.add(body)
    assert seen.leaks(secrets_of(forge)) == []
