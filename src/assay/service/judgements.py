"""Judgements, read: the judge a release pins, the rubric a submission is judged against, and every
figure derived from the stored judge passes (`base.summarize`, `stats.traits`), never stored: a
run's per-trait score is the mean of its valid passes; per scenario the mean over its scored,
non-gated runs; the composite the mean over capability traits; safety traits on their own.

Making the passes is `service/scoring.py` (the use case, above completion); this module only reads
them, so the board's figures (`service/board.py`) and the completion that refreshes them sit below
the command that scores.
"""

from __future__ import annotations

import re
from typing import TypedDict, cast

from assay.errors import NotFound
from assay.scenario.rubric import Rubric
from assay.scenario.suite import JudgeConfig
from assay.score.judge import JudgePass, LLMJudge, RulesJudge, RunJudgement, summarize
from assay.score.judge.base import ErrorKind
from assay.jsontypes import JsonObject
from assay.service import platform_config, releases
from assay.stats.traits import RunTraits, figures
from assay.store.board_repo import BoardRepo
from assay.store.releases_repo import AnyRelease, ReleaseRow, ReleasesRepo
from assay.store.submissions_repo import SubmissionRow, SubmissionsRepo
from assay.store.db import Store
from assay.store.judge_repo import JudgeConfigRow, JudgePassRow, JudgeRepo

class JudgeProvenance(TypedDict):
    """The board's `provenance.judge` (a TypedDict: it is written into the board as it is)."""

    model: str
    prompt_version: int
    prompt_hash: str
    passes: int
    temperature: float


class JudgeConfigView(TypedDict):
    """A pinned judge as the board and `assay score` show it (written as it is)."""

    model: str
    prompt_version: int
    prompt_hash: str
    passes: int
    temperature: float
    rubric_hash: str


def release_judge(release: AnyRelease) -> JudgeConfig | None:
    """The judge a release pins (None for a release without one)."""
    return JudgeConfig.model_validate(release["judge"]) if release.get("judge") is not None else None


def judge_provenance(release: ReleaseRow) -> JudgeProvenance | None:
    """The board's `provenance.judge`: {model, prompt_version, prompt_hash, passes, temperature} of
    the judge the release pins, with the hash of the prompt this harness sends that judge."""
    config = release_judge(release)
    if config is None:
        return None
    spec = config.spec
    hashed = RulesJudge.prompt_hash if spec == "rules" else LLMJudge.prompt_hash
    version = RulesJudge.prompt_version if spec == "rules" else config.prompt_version
    return {"model": spec, "prompt_version": version, "prompt_hash": hashed,
            "passes": config.passes, "temperature": config.temperature}


def submission_and_release(store: Store, submission_id: str) -> tuple[SubmissionRow, ReleaseRow]:
    """A submission and the release it was made against; NotFound when there is no such submission."""
    submission = SubmissionsRepo(store).submission(submission_id)
    if submission is None:
        raise NotFound("no such submission", "submission", value=submission_id)
    release = ReleasesRepo(store).release_by_id(submission["release_id"])
    assert release is not None
    return submission, release


def release_of(store: Store, submission_id: str) -> ReleaseRow:
    return submission_and_release(store, submission_id)[1]


def rubric_of(store: Store, submission_id: str, release: ReleaseRow | None = None) -> Rubric | None:
    """The rubric a submission's runs are judged against: its own (`--rubric`), else its release's."""
    own = JudgeRepo(store).submission_rubric(submission_id)
    if own is not None:
        return Rubric.model_validate(own)
    return releases.release_rubric(release if release is not None else release_of(store, submission_id))


def needs_judging(store: Store, submission_id: str) -> bool:
    """Whether the submission's runs are scored by a judge (it or its release has a rubric)."""
    return rubric_of(store, submission_id) is not None


def stored_pass(row: JudgePassRow) -> JudgePass:
    return JudgePass(index=row["pass_index"], raw=row["raw"], scores=row["verdicts"] if row["valid"] else None,
                     rationale=dict(row["rationale"] or {}), error=row["error"],
                     error_kind=cast(ErrorKind | None, row["error_kind"]),  # as the judge wrote it
                     attempts=row["attempts"])


_ATTEMPTS = re.compile(r" \(after \d+ attempts\)$")


def why_unscored(judgement: RunJudgement) -> str:
    """Why a run has no judge score, in one line (the last failed pass's error, without counts, so
    runs that failed alike read alike); `not judged yet` when no pass was made."""
    failed = [p for p in judgement.passes if not p.valid]
    if not judgement.passes:
        return "not judged yet"
    if not failed:
        return f"only {judgement.valid_passes} of the {judgement.min_valid} valid judge passes it needs"
    last = failed[-1]
    if last.error_kind == "connection":
        return _ATTEMPTS.sub("", last.error or "the judge endpoint could not be reached")
    return f"judge passes failed ({_ATTEMPTS.sub('', last.error or last.error_kind or 'no reason recorded')})"


def config_view(pinned: JudgeConfigRow) -> JudgeConfigView:
    return {"model": pinned["model"], "prompt_version": pinned["prompt_version"],
            "prompt_hash": pinned["prompt_hash"], "passes": pinned["passes"],
            "temperature": int(pinned["temperature"]) if float(pinned["temperature"]).is_integer()
            else pinned["temperature"], "rubric_hash": pinned["rubric_hash"]}


def judgements(store: Store, submission_id: str) -> dict[str, RunJudgement]:
    """{run_id: its judgement} over the submission's recorded runs, from the stored passes."""
    repo = JudgeRepo(store)
    pinned = repo.config(submission_id)
    rubric = rubric_of(store, submission_id)
    if rubric is None:
        return {}
    stored = repo.passes([submission_id])
    min_valid = pinned["min_valid"] if pinned is not None else 1
    return {run["run_id"]: summarize(run["run_id"], rubric.keys,
                                     [stored_pass(r) for r in stored.get(run["run_id"], [])], min_valid)
            for run in repo.recorded_runs(submission_id)}


def trait_figures(store: Store, submission_id: str) -> JsonObject:
    """A submission's trait figures, derived from its stored passes (`stats.traits.figures`):
    `composite`, `traits` {capability trait: mean}, `safety` {safety trait: mean} (None for a trait
    measured on no scenario), `trait_n` {trait: on how many scenarios it was measured}, the
    stability verdict with its safety-variance fields, per-case composites (`composite_by_case`,
    for intervals) and the pinned `judge`. Empty for a release without a rubric."""
    rubric = rubric_of(store, submission_id)
    if rubric is None:
        return {}
    judged = judgements(store, submission_id)
    facts = BoardRepo(store).run_facts(submission_id)
    runs = [RunTraits(f["case_id"], judged[f["run_id"]].scores if f["run_id"] in judged else None, bool(f["gated"]))
            for f in facts]
    threshold = platform_config.get(store, platform_config.SAFETY_VARIANCE)["unstable_range_threshold"]
    pinned = JudgeRepo(store).config(submission_id)
    return {**figures(runs, rubric.capability_keys, rubric.safety_keys, threshold=float(threshold),
                      cases=sorted({f["case_id"] for f in facts})),
            "judge": config_view(pinned) if pinned is not None else None}
