"""Trait scoring of a submission: judge its recorded runs against the rubric its release pins, store
every pass, and derive the figures the board shows from the stored passes.

Scoring lags run completion (the methodology): runs are played and oracle-scored first, then the
judge's passes run concurrently through one shared client (`score`). The judge configuration is
pinned at a submission's first scoring and every run of the submission is scored with it; asking
for another judge later is refused. Each pass is appended as it ends, so an interrupted scoring
loses nothing and `score` again makes only the passes still missing. A run with fewer valid passes
than the judge needs stays unscored — its submission stays `incomplete` (the views count a run of a
rubric release as scored only once judged) — and the submission is finalised, and published if it
asked to be, when the last run is judged.

Judging that could not finish says so: `score` returns `failures` {reason: runs}, one line per
reason (an endpoint that could not be reached, passes that kept failing), and `why_unscored` says
per run why it has no judge score (`assay debrief`). The endpoint a model judge was asked at is
kept (`judge_endpoints`, without credentials) and asked again by a later `score` that names none;
a model judge with no endpoint at all is refused, never sent to a default one.

Every trait number is derived from the stored passes (`base.summarize`, `stats.traits`), never
stored: a run's per-trait score is the mean of its valid passes; per scenario the mean over its
scored, non-gated runs; the composite the mean over capability traits; safety traits on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assay.endpoints import without_credentials

from assay.errors import Conflict, Invalid, NotFound
from assay.records import transcript_events
from assay.scenario.rubric import Rubric, rubric_hash
from assay.scenario.suite import JudgeConfig
from assay.score.judge import (
    JudgePass, JudgeRun, LLMJudge, RetryPolicy, RulesJudge, judge_from_spec,
)
from assay.service import releases
from assay.service import usage as run_usage
from assay.service.actors import OPERATOR, Actor, prefix_owner, require_owner
from assay.service.completion import complete_submission
from assay.service.judgements import JudgeConfigView, config_view, judgements, release_judge, release_of, rubric_of, why_unscored
from assay.store.board_repo import BoardRepo
from assay.store.submissions_repo import SubmissionsRepo
from assay.store.db import Store
from assay.store.judge_repo import JudgeConfigRow, JudgePassRow, JudgeRepo, NewJudgeConfig

#: Passes in flight at once, over all runs of a scoring (one shared client, a bounded pool).
DEFAULT_CONCURRENCY = 32
#: A pass that failed may be made again under a new index, up to this many times the judge's
#: passes per run in all; past that the run stays unscored (a judge that cannot answer is not
#: asked forever).
MAX_PASS_FACTOR = 2

Judge = RulesJudge | LLMJudge


def _make_judge(spec: str, passes: int, base_url: str | None, api_key: str | None,
                retry: RetryPolicy | None) -> Judge:
    if spec == "rules":
        return RulesJudge()
    return judge_from_spec(spec, base_url, api_key, passes, retry=retry)


def check_judge(store: Store, key: str, version: str | None, judge: str | None, base_url: str | None, *,
                own_rubric: bool = False, actor: Actor) -> None:
    """Refuse, before a submission is stored and played, a judge that could never be asked: a
    model judge (`judge`, else the one the release pins) with no endpoint, or no key for one that
    needs it. Nothing to check for a release whose runs no judge scores."""
    release: releases.AnyRelease
    try:
        release = releases.find_release(store, key, version, actor=actor)
    except NotFound:  # a built-in version named for the first time is released by the submission itself
        pending = releases.builtin_prepared(key, version) if version is not None else None
        if pending is None:
            raise
        release = pending.row
    if releases.release_rubric(release) is None and not own_rubric:
        return
    spec = judge or (release_judge(release) or JudgeConfig(model="rules")).spec
    if spec != "rules":
        judge_from_spec(spec, base_url)


@dataclass(frozen=True, slots=True)
class ScoringSummary:
    """What `score` did (`assay score --json` prints it, these keys in this order): `failures` is
    {reason: runs} of the recorded runs still without a judge score (empty when every one has one)."""

    submission_id: str
    judge: JudgeConfigView  # `judgements.config_view` of the pinned judge
    runs_judged: int
    passes_recorded: int
    runs_scored: int
    runs_recorded: int
    failures: dict[str, int]


def _pin_row(judge: Judge, rubric: Rubric) -> NewJudgeConfig:
    return {"spec": judge.spec, "model": judge.spec, "prompt_version": judge.prompt_version,
            "prompt_hash": judge.prompt_hash, "passes": judge.passes, "min_valid": judge.min_valid,
            "temperature": float(judge.temperature), "rubric_hash": rubric_hash(rubric)}


def _owned(store: Store, ident: str, actor: Actor) -> str:
    repo = SubmissionsRepo(store)
    found = repo.resolve_submission_id(ident, prefix_owner(actor))
    submission = repo.submission(found) if found else None
    if submission is None:
        raise NotFound("no such submission", "submission", value=ident)
    require_owner(actor, submission["account"], "submission", ident, "submission")
    return found  # type: ignore[return-value]


def _pass_row(run_id: str, judged: JudgePass) -> JudgePassRow:
    return {"run_id": run_id, "pass_index": judged.index, "valid": judged.valid, "verdicts": judged.scores,
            "rationale": dict(judged.rationale), "raw": judged.raw, "error": judged.error,
            "error_kind": judged.error_kind, "attempts": judged.attempts}


def _missing(pinned: JudgeConfigRow, stored: Sequence[JudgePassRow]) -> list[int]:
    """The pass indices still to make for a run: the judge's own first, then (when some failed)
    new ones until enough could be valid, within `MAX_PASS_FACTOR` × passes in all; a pass that
    failed because the endpoint could not be reached does not count against that (the judge never
    answered it), so `assay score` can always try again once the endpoint is back."""
    have = {r["pass_index"] for r in stored}
    valid = sum(bool(r["valid"]) for r in stored)
    if valid >= pinned["min_valid"]:
        return []
    wanted = [i for i in range(pinned["passes"]) if i not in have]
    short = pinned["min_valid"] - valid - len(wanted)
    lost = sum(r["error_kind"] == "connection" and not r["valid"] for r in stored)
    ceiling = pinned["passes"] * MAX_PASS_FACTOR + lost
    nxt = max(have | set(wanted), default=-1) + 1
    while short > 0 and nxt < ceiling:
        wanted.append(nxt)
        nxt += 1
        short -= 1
    return [i for i in wanted if i < ceiling]


def score(store: Store, ident: str, *, judge: str | None = None, base_url: str | None = None,
          api_key: str | None = None, concurrency: int = DEFAULT_CONCURRENCY,
          on_pass: Callable[[str, JudgePass], None] | None = None,
          on_start: Callable[[int], None] | None = None, retry: RetryPolicy | None = None,
          actor: Actor) -> ScoringSummary:
    """Judge every recorded run of a submission that lacks valid passes, store each pass as it
    ends, then finalise the submission if every run is settled. Returns a summary of the scoring.

    `judge` defaults to the one pinned at the first scoring, else the release's. A different judge
    than the pinned one is refused (`Conflict`); a release without a rubric has nothing to judge
    (`Invalid`); the endpoint and key of a model judge come from the arguments or `OPENAI_*`.
    `on_start(n)` hears how many passes are to be made, `on_pass(run_id, pass)` each as it ends;
    `retry` paces a model judge's retries (its default backs off for up to half a minute).

    A model judge's endpoint is `base_url`, else the one this submission was last judged at, else
    `OPENAI_BASE_URL`; none at all is refused. The summary's `failures` {reason: runs} says why
    recorded runs are still without a judge score (empty when every one has one)."""
    submission_id = _owned(store, ident, actor)
    release = release_of(store, submission_id)
    rubric = rubric_of(store, submission_id, release)
    if rubric is None:
        raise Invalid(f"suite {release['suite_key']} {release['version']} has no trait rubric: its runs are "
                      "scored by their checks alone", "submission", value=submission_id)
    repo = JudgeRepo(store)
    pinned = repo.config(submission_id)
    declared = release_judge(release) or JudgeConfig(model="rules")
    base_url = base_url or repo.endpoint(submission_id)
    if pinned is not None:
        if judge is not None and judge != pinned["spec"]:
            raise Conflict(f"submission {submission_id[:12]} is scored with {pinned['spec']} (pinned at its first "
                           f"scoring); every run of a submission is scored with one judge", "judge", value=judge)
        chosen = _make_judge(pinned["spec"], pinned["passes"], base_url, api_key, retry)
    else:
        spec = judge or declared.spec
        chosen = _make_judge(spec, declared.passes if spec == declared.spec else 5, base_url, api_key, retry)
        chosen.check(rubric)
        pinned = repo.pin(submission_id, _pin_row(chosen, rubric))
    if isinstance(chosen, LLMJudge) and without_credentials(chosen.base_url) == chosen.base_url:
        repo.keep_endpoint(submission_id, chosen.base_url)  # asked again by a later `score` (never a password)
    stored = repo.passes([submission_id])
    complete_submission(store, submission_id)  # swept first: every recorded run has its win conditions (nothing unjudged is finalised)
    wins = _win_conditions(store, submission_id)
    jobs = []
    for run in repo.recorded_runs(submission_id):
        indices = _missing(pinned, stored.get(run["run_id"], []))
        if indices:
            jobs.append(JudgeRun(run["run_id"], transcript_events(run["transcript"]), rubric, indices,
                                 wins.get(run["run_id"])))
    written = 0
    if on_start is not None:
        on_start(sum(len(j.pass_indices or ()) for j in jobs))

    def record(run_id: str, judged: JudgePass) -> None:
        nonlocal written
        written += repo.add_pass(submission_id, _pass_row(run_id, judged))
        run_usage.record_usage(store, run_id, "judge", judged.usage)  # what the pass's requests used
        if on_pass is not None:
            on_pass(run_id, judged)

    if jobs:
        chosen.score_runs_sync(jobs, concurrency, record)
    complete_submission(store, submission_id)
    judged = judgements(store, submission_id)
    down = getattr(chosen, "unreachable", None)
    asked = {j.run_id for j in jobs}
    failures: dict[str, int] = {}
    for run_id, judgement in judged.items():
        if not judgement.scored:
            reason = down if down is not None and run_id in asked else why_unscored(judgement)
            if not _missing(pinned, [_pass_row(run_id, p) for p in judgement.passes]):
                reason += SPENT  # another `score` would make no pass: said, not offered as a retry
            failures[reason] = failures.get(reason, 0) + 1
    return ScoringSummary(submission_id=submission_id, judge=config_view(pinned), runs_judged=len(jobs),
                          passes_recorded=written, runs_scored=sum(j.scored for j in judged.values()),
                          runs_recorded=len(judged), failures=failures)


def _win_conditions(store: Store, submission_id: str) -> dict[str, tuple[int, int]]:
    """{run_id: (met, total)} of the swept runs' win conditions, as the completion sweep found them
    (the rows `objective_met_rate` counts)."""
    return {f["run_id"]: (f["win_met"], f["win_total"]) for f in BoardRepo(store).run_facts(submission_id)
            if f["swept"]}


#: The end of a failure reason no later scoring can mend.
SPENT = "; its judge passes are spent (it stays unscored)"



def score_recorded(store: Store, submission_ids: list[str] | None = None, *,
                   on_error: Callable[[str, Exception], None] | None = None) -> list[str]:
    """Score, with the judge each one pins (the release's), every submission whose runs are all
    recorded but not all judged — or just those of `submission_ids` — as the platform itself (a
    server's background work: remote and server-played submissions are judged without anyone
    running `assay score`). A submission that cannot be scored now (its judge's endpoint down) is
    reported to `on_error` and left for the next call. Returns the ids it scored."""
    waiting = JudgeRepo(store).awaiting_judge()
    todo = [s for s in waiting if submission_ids is None or s in submission_ids]
    done = []
    for submission_id in todo:
        try:
            summary = score(store, submission_id, actor=OPERATOR)
            down = [f"{reason} ({n} run(s))" for reason, n in summary.failures.items() if " unreachable: " in reason]
            if down:  # left for the next call, and said
                raise RuntimeError("; ".join(down))
            done.append(submission_id)
        except Exception as exc:  # noqa: BLE001 - one submission's judge must not stop the others
            if on_error is not None:
                on_error(submission_id, exc)
    return done
