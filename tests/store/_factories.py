"""Small builders for store tests: valid rows with as little ceremony as the test needs."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from assay.records import CheckOutcome, PlannedRun, RunRecord, RunVerdict
from assay.score.oracle import run_verdict
from assay.store import Store
from assay.store.runs_repo import RunsRepo
from assay.store.rows import NewBatch


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def scenario(
    case_id: str = "estate-001",
    *,
    body: str = "v1",
    checks: str = "checks-a",
    frozen_on: str | None = None,
    document: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `Store.add_scenario_version`; `body` varies the content hash."""
    return {
        "case_id": case_id,
        "content_hash": sha(f"{case_id}:{body}:{checks}:{frozen_on}"),
        "checks_hash": sha(checks),
        "frozen_on": frozen_on,
        "kit": "estate",
        "title": f"Title of {case_id}",
        "language": "en",
        "document": document if document is not None else {"id": case_id, "body": body},
        "world_fingerprint": sha(f"world:{case_id}"),
    }


def new_id() -> str:
    return uuid.uuid4().hex


def batch_row(batch_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": batch_id or new_id(),
        "kind": "run",
        "suite_key": "forge",
        "suite_version": None,
        "agent_spec": "reference:noop",
        "agent_label": "noop",
        "config_signature": sha("noop"),
        "harness_version": "assay-harness/1",
        "trials": 2,
        "base_seed": 2**40 + 7,
    }
    row.update(overrides)
    return row


def plan(content_hash: str, case_id: str = "estate-001", n: int = 3) -> list[PlannedRun]:
    return [
        PlannedRun(
            run_id=new_id(),
            slot=i,
            case_id=case_id,
            scenario_hash=content_hash,
            trial=i,
            seed=2**62 + i,  # needs BIGINT on both backends
        )
        for i in range(n)
    ]


def record(slot: PlannedRun, status: str = "completed", **overrides: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "run_id": slot.run_id,
        "case_id": slot.case_id,
        "scenario_hash": slot.scenario_hash,
        "trial": slot.trial,
        "seed": slot.seed,
        "status": status,
        "reason": None,
        "claimed_success": True,
        "claim_summary": "restarted the service",
        "turns": 4,
        "transcript": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}],
        "actions": [{"tool": "restart", "arguments": {"service": "web"}}],
        "final_state": {"services": {"web": "up"}, "n": 1.5},
        "final_state_hash": sha(f"state:{slot.run_id}"),
        "duration_ms": 1234,
    }
    fields.update(overrides)
    return RunRecord.model_construct(**fields)  # store tests feed it any JSON, as a buggy kit might


CHECKS = [
    CheckOutcome(check_id="web_up", weight=3, safety=False, passed=True),
    CheckOutcome(check_id="a_no_data_loss", weight=1, safety=True, passed=False),
    CheckOutcome(check_id="m_ticket_closed", weight=2, safety=False, passed=True),
]


def scored(rec: RunRecord, checks: list[CheckOutcome]) -> tuple[RunRecord, list[CheckOutcome], RunVerdict]:
    """What `Store.add_runs` takes: a run, its check outcomes and the oracle's verdict on them."""
    return rec, checks, run_verdict(checks, rec.status, rec.claimed_success)


def seeded_batch(store: Store, n: int = 3) -> tuple[dict[str, Any], list[PlannedRun]]:
    """A stored scenario plus a stored batch of `n` planned slots (no runs yet)."""
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    batch = batch_row()
    planned = plan(kwargs["content_hash"], n=n)
    RunsRepo(store).add_batch(NewBatch(**batch), planned)
    return batch, planned
