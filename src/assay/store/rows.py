"""Typed read models of the core repository: what `RunsRepo.batch`, `RunsRepo.planned_runs`,
`RunsRepo.runs_for_batch` and `RunsRepo.run` hand back.

Frozen dataclasses, one per read, with the column names as field names, so a caller reads
`batch.suite_key` (checked by the type checker) where it read `batch["suite_key"]`, and the
service returns them as they are. Values are the same on SQLite and PostgreSQL (ints, bools,
timezone-aware datetimes, JSON as Python values). A stored transcript is typed as
`TranscriptEvent`s (`StoredRun.events`), whichever record version wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.jsontypes import JsonObject
from assay.records import CheckOutcome, Status, TranscriptEvent, transcript_events


@dataclass(frozen=True, slots=True)
class NewBatch:
    """A batch as it is planned (`RunsRepo.add_batch`): every `batches` column but `created_at`."""

    id: str
    kind: str  # "run" or "submission"
    suite_key: str
    suite_version: str | None
    agent_spec: str
    agent_label: str
    config_signature: str
    harness_version: str
    trials: int
    base_seed: int


@dataclass(frozen=True, slots=True)
class Batch(NewBatch):
    """A batch (a `run` of the CLI or a `submission`) as `batches` holds it."""

    created_at: datetime


@dataclass(frozen=True, slots=True)
class AgentRow:
    """How a batch's agent is loaded again, as it is planned (`batch_agents` but its batch id and
    time): the spec another process loads, the loader's options (never an API key), the limits."""

    load_spec: str
    options: JsonObject
    turn_limit: int
    time_limit: float


@dataclass(frozen=True, slots=True)
class BatchAgent:
    """How a batch's agent is loaded again (`batch_agents`): its spec, the loader's options (never
    an API key) and the limits its runs are played under."""

    batch_id: str
    load_spec: str
    options: JsonObject  # the loader's options, as stored (free-form: each loader reads its own)
    turn_limit: int
    time_limit: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PlannedSlot:
    """One planned run of a batch: its slot, run id, scenario and seed."""

    batch_id: str
    slot: int
    run_id: str
    case_id: str
    scenario_hash: str
    trial: int
    seed: int


@dataclass(frozen=True, slots=True)
class StoredVerdict:
    """A run's verdict row (`run_verdicts`): the scorer's decision, stamped with its version."""

    scorer_version: str
    score: int
    passed: bool
    safety_failures: int  # how many safety checks failed
    false_success: bool


@dataclass(frozen=True, slots=True)
class NewScenario:
    """A scenario document to record (`RunsRepo.add_scenario_versions`): `scenario_versions`' columns
    but the id, the version number (the repository gives it) and the time."""

    case_id: str
    content_hash: str
    checks_hash: str
    frozen_on: str | None
    kit: str
    title: str
    language: str
    document: JsonObject
    world_fingerprint: str


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """A batch as `RunsRepo.batch_listing` lists it: newest first, with its counts and `status`
    (`complete` once every slot is recorded and the batch was completed, else `pending`). Field
    order is the JSON's (`assay batches --json`)."""

    id: str
    kind: str
    suite_key: str
    suite_version: str | None
    agent_spec: str
    agent_label: str
    trials: int
    created_at: datetime
    n_planned: int
    n_recorded: int
    status: str


@dataclass(frozen=True, slots=True)
class ScenarioVersion:
    """A stored scenario version (`scenario_versions`): the document every run of it played."""

    id: int
    case_id: str
    version: int
    content_hash: str
    checks_hash: str
    frozen_on: str | None
    kit: str
    title: str
    language: str
    document: JsonObject  # the scenario document as written (its model: `scenario.Scenario`)
    world_fingerprint: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredRun(PlannedSlot):
    """A planned slot with its run, if one was recorded (`status` None: never recorded, every run
    field None, no checks, no verdict). `final_state`, `transcript` and `actions` are None when
    the read left the bodies out (`runs_for_batch(bodies=False)`). `scenario` is the scenario
    version's row where the read joined it (`RunsRepo.run`)."""

    status: Status | None = None
    reason: str | None = None
    claimed_success: bool | None = None
    claim_summary: str | None = None
    turns: int | None = None
    final_state_hash: str | None = None
    final_state: JsonObject | None = None  # a world's state: free-form
    transcript: list[JsonObject] | None = None  # as the record version wrote it (`events` types it)
    actions: list[JsonObject] | None = None
    duration_ms: int | None = None
    created_at: datetime | None = None
    schema_version: int | None = None
    checks: tuple[CheckOutcome, ...] = ()
    verdict: StoredVerdict | None = None
    scenario: ScenarioVersion | None = field(default=None)

    @property
    def recorded(self) -> bool:
        return self.status is not None

    @property
    def events(self) -> list[TranscriptEvent]:
        """The transcript as typed events (a version-1 transcript read as version 2), each the
        stored dict as it is: the keys in the order the run wrote them."""
        return transcript_events(self.transcript or [])


def _names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


_BATCH = _names(Batch)
_AGENT = _names(BatchAgent)
_SLOT = _names(PlannedSlot)
_RUN = tuple(n for n in _names(StoredRun) if n not in {"checks", "verdict", "scenario"})
_SCENARIO = _names(ScenarioVersion)


def batch_of(row: sa.Row[Any]) -> Batch:
    m = row._mapping
    return Batch(*(m[n] for n in _BATCH))


def agent_of(row: sa.Row[Any]) -> BatchAgent:
    m = row._mapping
    return BatchAgent(*(m[n] for n in _AGENT))


def slot_of(row: sa.Row[Any]) -> PlannedSlot:
    m = row._mapping
    return PlannedSlot(*(m[n] for n in _SLOT))


def scenario_of(row: sa.Row[Any]) -> ScenarioVersion:
    m = row._mapping
    return ScenarioVersion(*(m[n] for n in _SCENARIO))


def check_of(row: sa.Row[Any]) -> CheckOutcome:
    return CheckOutcome(row.check_id, int(row.weight), bool(row.safety), bool(row.passed))


def verdict_of(row: sa.Row[Any] | None) -> StoredVerdict | None:
    if row is None:
        return None
    return StoredVerdict(row.scorer_version, int(row.score), bool(row.passed), int(row.safety_failures),
                         bool(row.false_success))


def run_of(row: sa.Row[Any], checks: list[CheckOutcome], verdict: StoredVerdict | None,
           scenario: ScenarioVersion | None = None) -> StoredRun:
    """A slot row joined with its run's columns (those the query selected; the rest None, as for
    `bodies=False`). The row is read once into a dict: a row's own `get` of a column it does not
    hold raises and catches inside, which a results view of thousands of runs paid per field."""
    get: Callable[[str], Any] = dict(row._mapping).get
    return StoredRun(**{n: get(n) for n in _RUN}, checks=tuple(checks), verdict=verdict, scenario=scenario)
