"""Reads and appends of trait judging: pinned judge configs and judge passes (`judge_schema`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from dataclasses import dataclass
from typing import Any, TypedDict

import sqlalchemy as sa

from assay.jsontypes import JsonObject, JsonValue

from assay.store.board_repo import BoardRepo
from assay.store.board_schema import board_run_facts
from assay.store.judge_schema import (
    batch_facilitators, judge_configs, judge_endpoints, judge_passes, submission_rubrics,
)
from assay.store.schema import planned_runs, runs, utcnow

# The judge's rows are TypedDicts, not dataclasses: the same rows are read by key from the store and,
# written as they are, from an export's judge tables (`service.verify`).


class NewJudgeConfig(TypedDict):
    """The judge a submission pins at its first scoring (a `judge_configs` row's values)."""

    spec: str
    model: str
    prompt_version: int
    prompt_hash: str
    passes: int
    min_valid: int
    temperature: float
    rubric_hash: str


class JudgeConfigRow(NewJudgeConfig):
    """A pinned judge as stored."""

    submission_id: str
    created_at: datetime


class JudgePassRow(TypedDict):
    """One judge pass of a run as stored (`verdicts` {trait: score} None unless valid, `rationale`
    {trait: why}, `raw` the judge's answer as given), without its submission and time."""

    run_id: str
    pass_index: int
    valid: bool
    verdicts: dict[str, float | None] | None
    rationale: dict[str, str]
    raw: str | None
    error: str | None
    error_kind: str | None
    attempts: int


class RecordedRun(TypedDict):
    """A recorded run with what a judge reads: its case, rep and transcript (as stored)."""

    run_id: str
    transcript: list[JsonValue]
    case_id: str
    rep: int


def _config(row: sa.Row[Any]) -> JudgeConfigRow:
    return JudgeConfigRow(submission_id=row.submission_id, spec=row.spec, model=row.model,
                          prompt_version=row.prompt_version, prompt_hash=row.prompt_hash, passes=row.passes,
                          min_valid=row.min_valid, temperature=row.temperature, rubric_hash=row.rubric_hash,
                          created_at=row.created_at)


PASS_COLUMNS = ("run_id", "pass_index", "valid", "verdicts", "rationale", "raw", "error", "error_kind", "attempts")


@dataclass(frozen=True, slots=True)
class OwnFacilitator:
    """A facilitator a batch brought of its own (`batch_facilitators`): its spec and endpoint, never a key."""

    spec: str
    base_url: str | None


class JudgeRepo(BoardRepo):
    """Append-only access to the judge's rows, over the board's engine and transactions."""

    def config(self, submission_id: str, conn: sa.Connection | None = None) -> JudgeConfigRow | None:
        query = sa.select(judge_configs).where(judge_configs.c.submission_id == submission_id)
        if conn is not None:
            row = conn.execute(query).first()
        else:
            with self.read() as c:
                row = c.execute(query).first()
        return _config(row) if row is not None else None

    def pin(self, submission_id: str, config: NewJudgeConfig) -> JudgeConfigRow:
        """Pin `config` as the submission's judge unless one is pinned already; the pinned one."""
        with self.write() as conn:
            self.lock(conn, "judge", submission_id)
            existing = self.config(submission_id, conn)
            if existing is not None:
                return existing
            conn.execute(sa.insert(judge_configs).values(submission_id=submission_id, **config, created_at=utcnow()))
            pinned = self.config(submission_id, conn)
        assert pinned is not None
        return pinned

    def endpoint(self, submission_id: str) -> str | None:
        """The endpoint the submission's model judge was last asked at (no credentials), or None."""
        with self.read() as conn:
            return conn.execute(sa.select(judge_endpoints.c.base_url)
                                .where(judge_endpoints.c.submission_id == submission_id)
                                .order_by(judge_endpoints.c.id.desc()).limit(1)).scalar_one_or_none()

    def keep_endpoint(self, submission_id: str, base_url: str) -> None:
        """Remember `base_url` (already without credentials) as the submission's judge endpoint,
        unless it is the one remembered last."""
        with self.write() as conn:
            self.lock(conn, "judge-endpoint", submission_id)
            last = conn.execute(sa.select(judge_endpoints.c.base_url)
                                .where(judge_endpoints.c.submission_id == submission_id)
                                .order_by(judge_endpoints.c.id.desc()).limit(1)).scalar_one_or_none()
            if last != base_url:
                conn.execute(sa.insert(judge_endpoints).values(submission_id=submission_id, base_url=base_url,
                                                               created_at=utcnow()))

    def add_pass(self, submission_id: str, row: JudgePassRow) -> bool:
        """Append one pass; False (nothing written) if that (run, pass index) is already recorded."""
        with self.write() as conn:
            self.lock(conn, "judge-pass", f"{row['run_id']}\x00{row['pass_index']}")
            seen = conn.execute(sa.select(judge_passes.c.id).where(
                judge_passes.c.run_id == row["run_id"], judge_passes.c.pass_index == row["pass_index"])).first()
            if seen is not None:
                return False
            conn.execute(sa.insert(judge_passes).values(submission_id=submission_id, **row, created_at=utcnow()))
        return True

    def passes(self, submission_ids: Iterable[str]) -> dict[str, list[JudgePassRow]]:
        """{run_id: its passes in pass order} over the runs of the submissions named."""
        ids = list(submission_ids)
        out: dict[str, list[JudgePassRow]] = {}
        if not ids:
            return out
        query = (sa.select(*(judge_passes.c[c] for c in PASS_COLUMNS))
                 .where(judge_passes.c.submission_id.in_(ids))
                 .order_by(judge_passes.c.run_id, judge_passes.c.pass_index))
        with self.read() as conn:
            for r in conn.execute(query):
                out.setdefault(r.run_id, []).append(JudgePassRow(
                    run_id=r.run_id, pass_index=r.pass_index, valid=r.valid, verdicts=r.verdicts,
                    rationale=r.rationale, raw=r.raw, error=r.error, error_kind=r.error_kind, attempts=r.attempts))
        return out

    def recorded_runs(self, submission_id: str) -> list[RecordedRun]:
        """The submission's recorded runs with what a judge reads: case, rep and transcript."""
        query = (
            sa.select(runs.c.run_id, runs.c.transcript, planned_runs.c.case_id, planned_runs.c.trial.label("rep"))
            .join(planned_runs, planned_runs.c.run_id == runs.c.run_id)
            .where(planned_runs.c.batch_id == submission_id)
            .order_by(planned_runs.c.slot)
        )
        with self.read() as conn:
            return [RecordedRun(run_id=r.run_id, transcript=r.transcript, case_id=r.case_id, rep=r.rep)
                    for r in conn.execute(query)]

    def awaiting_judge(self) -> list[str]:
        """Submissions whose every planned run is recorded and swept and some is not judged yet:
        what a server's background scoring picks up (oldest plan first)."""
        f = board_run_facts
        waiting = sa.func.sum(sa.case(((f.c.has_run == 1) & (f.c.judged == 0), 1), else_=0))
        query = (sa.select(f.c.submission_id).group_by(f.c.submission_id)
                 .having(sa.func.sum(f.c.swept) == sa.func.count(), waiting > 0)
                 .order_by(f.c.submission_id))
        with self.read() as conn:
            return [r.submission_id for r in conn.execute(query)]

    def batch_facilitator(self, batch_id: str) -> OwnFacilitator | None:
        """The facilitator a batch brought of its own, or None."""
        with self.read() as conn:
            row = conn.execute(sa.select(batch_facilitators.c.spec, batch_facilitators.c.base_url)
                               .where(batch_facilitators.c.batch_id == batch_id)).first()
        return OwnFacilitator(row.spec, row.base_url) if row is not None else None

    def submission_rubric(self, submission_id: str) -> JsonObject | None:
        """The rubric document a submission brought of its own (as stored: `Rubric` reads it), or None."""
        with self.read() as conn:
            return conn.execute(sa.select(submission_rubrics.c.document)
                                .where(submission_rubrics.c.submission_id == submission_id)).scalar_one_or_none()
