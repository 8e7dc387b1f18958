"""The typed transcript stores the bytes the untyped one stored.

`transcript_pinned.json` was written by main's code path *before* the transcript was typed (commit
151ca7a, when `RunRecord.transcript` was `list[dict]`): for forge × `reference:diligent` and
`reference:hasty` and academy (a campaign: dice, facilitator lines) × `reference:pushover`, seed 3,
one trial of every case, the SHA-256 of each run's stored transcript and actions as SQLite keeps
their text, its final state hash, and the SHA-256 of its debrief JSON (`assay debrief --json`, run
id left out). Digests and exports are RFC 8785 canonical, so key order cannot move them; these are
the places where it could: the stored JSON text (a tool result's keys are `role, tool_call_id,
content`, not `TranscriptEvent`'s declaration order) and the debrief, which validates the transcript.
Every executor must give exactly those bytes; and every event a run stores fits `TranscriptEvent`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from assay.records import ChatMessage, RunRecord, TranscriptEvent, event_message, validate_transcript
from assay.service.actors import OPERATOR
from assay.service.results import debrief
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store import Store

PINNED = json.loads((Path(__file__).parent / "transcript_pinned.json").read_text())
BATCHES = (("forge", "reference:diligent"), ("forge", "reference:hasty"), ("academy", "reference:pushover"))


def _played(store: Store, executor: str) -> dict[str, dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for suite, agent in BATCHES:
        batch = run_suite(resolve_suite(suite), agent_spec=agent, trials=1, seed=3, workers=2, store=store,
                          executor=executor)
        with store.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT r.run_id, p.case_id, p.trial, CAST(r.transcript AS TEXT), CAST(r.actions AS TEXT), "
                "r.final_state_hash FROM runs r JOIN planned_runs p ON p.run_id = r.run_id WHERE p.batch_id = :b"),
                {"b": batch.batch_id}).all()
        for run_id, case, trial, transcript, actions, state_hash in rows:
            validate_transcript(json.loads(transcript))  # what the engine stores is what the type says
            TypeAdapter(list[ChatMessage]).validate_python(json.loads(actions))
            doc = debrief(store, run_id, actor=OPERATOR)
            shown = json.dumps({k: v for k, v in doc.items() if k != "run_id"}, ensure_ascii=False)
            seen[f"{suite}/{agent}/{case}/{trial}"] = {
                "transcript_sha256": hashlib.sha256(transcript.encode()).hexdigest(),
                "actions_sha256": hashlib.sha256(actions.encode()).hexdigest(),
                "final_state_hash": state_hash,
                "debrief_sha256": hashlib.sha256(shown.encode()).hexdigest()}
    return seen


@pytest.mark.parametrize("executor", ["threads", "async"])
def test_runs_store_and_show_the_pinned_transcript_bytes(sqlite_store: Store, executor: str) -> None:
    assert _played(sqlite_store, executor) == PINNED


_KEYS = ("role", "tool_call_id", "content")


@given(order=st.permutations(_KEYS), content=st.text(max_size=20))
def test_a_validated_transcript_keeps_each_events_keys_in_the_order_given(order: list[str], content: str) -> None:
    values = {"role": "tool", "tool_call_id": "call_1", "content": content}
    event: TranscriptEvent = {"source": "tool", **{k: values[k] for k in order}}  # type: ignore[misc]
    record = RunRecord(run_id="r", case_id="c", scenario_hash="h", trial=1, seed=0, status="completed",
                       transcript=[event])
    assert list(record.transcript[0]) == ["source", *order]
    assert list(json.loads(record.model_dump_json())["transcript"][0]) == ["source", *order]
    message = event_message(record.transcript[0])
    assert message is not None and list(message) == list(order)


@pytest.mark.parametrize("event", [
    {"role": "user", "content": "no source"},
    {"source": "agent", "role": "assistant", "content": "hi", "name": "an unknown key"},
    {"source": "oracle", "data": {}},
    {"source": "agent", "role": "narrator", "content": "hi"},
])
def test_what_is_not_a_transcript_event_is_refused(event: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        validate_transcript([event])
    with pytest.raises(ValidationError):
        RunRecord(run_id="r", case_id="c", scenario_hash="h", trial=1, seed=0, status="completed", transcript=[event])
