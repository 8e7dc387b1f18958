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

import re
from collections.abc import Callable
from typing import Any

from assay.endpoints import without_credentials

from assay.errors import Conflict, Invalid, NotFound
from assay.records import transcript_events
from assay.scenario.rubric import Rubric, rubric_hash
from assay.scenario.suite import JudgeConfig
from assay.score.judge import (
    JudgePass, JudgeRun, LLMJudge, RetryPolicy, RulesJudge, RunJudgement, judge_from_spec, summarize,
)
from assay.service import platform_config, releases
from assay.service import usage as run_usage
from assay.service.actors import Actor, prefix_owner, require_owner
from assay.stats.traits import TRAIT_PLACES, RunTraits, figures  # noqa: F401 - TRAIT_PLACES: read here by verify
from assay.store.board_repo import BoardRepo
from assay.store.db import Store
from assay.store.judge_repo import JudgeRepo

#: Passes in flight at once, over all runs of a scoring (one shared client, a bounded pool).
DEFAULT_CONCURRENCY = 32
#: A pass that failed may be made again under a new index, up to this many times the judge's
#: passes per run in all; past that the run stays unscored (a judge that cannot answer is not
#: asked forever).
MAX_PASS_FACTOR = 2

Judge = RulesJudge | LLMJudge


def release_judge(release: dict[str, Any]) -> JudgeConfig | None:
    """The judge a release pins (None for a release without one)."""
    return JudgeConfig.model_validate(release["judge"]) if release.get("judge") is not None else None


def judge_provenance(release: dict[str, Any]) -> dict[str, Any] | None:
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
    release = releases.find_release(store, key, version, actor=actor)
    if releases.release_rubric(release) is None and not own_rubric:
        return
    spec = judge or (release_judge(release) or JudgeConfig(model="rules")).spec
    if spec != "rules":
        judge_from_spec(spec, base_url)


def _pin_row(judge: Judge, rubric: Rubric) -> dict[str, Any]:
    return {"spec": judge.spec, "model": judge.spec, "prompt_version": judge.prompt_version,
            "prompt_hash": judge.prompt_hash, "passes": judge.passes, "min_valid": judge.min_valid,
            "temperature": float(judge.temperature), "rubric_hash": rubric_hash(rubric)}


def _release_of(store: Store, submission_id: str) -> dict[str, Any]:
    repo = BoardRepo(store)
    submission = repo.submission(submission_id)
    if submission is None:
        raise NotFound("no such submission", "submission", value=submission_id)
    release = repo.release_by_id(submission["release_id"])
    assert release is not None
    return release


def _owned(store: Store, ident: str, actor: Actor) -> str:
    repo = BoardRepo(store)
    found = repo.resolve_submission_id(ident, prefix_owner(actor))
    submission = repo.submission(found) if found else None
    if submission is None:
        raise NotFound("no such submission", "submission", value=ident)
    require_owner(actor, submission["account"], "submission", ident, "submission")
    return found  # type: ignore[return-value]


def rubric_of(store: Store, submission_id: str, release: dict[str, Any] | None = None) -> Rubric | None:
    """The rubric a submission's runs are judged against: its own (`--rubric`), else its release's."""
    own = JudgeRepo(store).submission_rubric(submission_id)
    if own is not None:
        return Rubric.model_validate(own)
    return releases.release_rubric(release if release is not None else _release_of(store, submission_id))


def needs_judging(store: Store, submission_id: str) -> bool:
    """Whether the submission's runs are scored by a judge (it or its release has a rubric)."""
    return rubric_of(store, submission_id) is not None


def _pass_row(run_id: str, judged: JudgePass) -> dict[str, Any]:
    return {"run_id": run_id, "pass_index": judged.index, "valid": judged.valid, "verdicts": judged.scores,
            "rationale": dict(judged.rationale), "raw": judged.raw, "error": judged.error,
            "error_kind": judged.error_kind, "attempts": judged.attempts}


def _stored_pass(row: dict[str, Any]) -> JudgePass:
    return JudgePass(index=row["pass_index"], raw=row["raw"], scores=row["verdicts"] if row["valid"] else None,
                     rationale=dict(row["rationale"] or {}), error=row["error"], error_kind=row["error_kind"],
                     attempts=row["attempts"])


def _missing(pinned: dict[str, Any], stored: list[dict[str, Any]]) -> list[int]:
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
          actor: Actor) -> dict[str, Any]:
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
    from assay.service.submissions import complete  # submissions calls back into scoring

    submission_id = _owned(store, ident, actor)
    release = _release_of(store, submission_id)
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
    complete(store, submission_id)  # swept first: every recorded run has its win conditions (nothing unjudged is finalised)
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
    complete(store, submission_id)
    judged = judgements(store, submission_id)
    down = getattr(chosen, "unreachable", None)
    asked = {j.run_id for j in jobs}
    failures: dict[str, int] = {}
    for run_id, judgement in judged.items():
        if not judgement.scored:
            reason = down if down is not None and run_id in asked else why_unscored(judgement)
            if not _missing(pinned, [_pass_fields(p) for p in judgement.passes]):
                reason += SPENT  # another `score` would make no pass: said, not offered as a retry
            failures[reason] = failures.get(reason, 0) + 1
    return {"submission_id": submission_id, "judge": _config_view(pinned), "runs_judged": len(jobs),
            "passes_recorded": written, "runs_scored": sum(j.scored for j in judged.values()),
            "runs_recorded": len(judged), "failures": failures}


def _win_conditions(store: Store, submission_id: str) -> dict[str, tuple[int, int]]:
    """{run_id: (met, total)} of the swept runs' win conditions, as the completion sweep found them
    (the rows `objective_met_rate` counts)."""
    return {f["run_id"]: (f["win_met"], f["win_total"]) for f in BoardRepo(store).run_facts(submission_id)
            if f["swept"]}


#: The end of a failure reason no later scoring can mend.
SPENT = "; its judge passes are spent (it stays unscored)"


def _pass_fields(judged: JudgePass) -> dict[str, Any]:
    return {"pass_index": judged.index, "valid": judged.valid, "error_kind": judged.error_kind}


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


def score_recorded(store: Store, submission_ids: list[str] | None = None, *,
                   on_error: Callable[[str, Exception], None] | None = None) -> list[str]:
    """Score, with the judge each one pins (the release's), every submission whose runs are all
    recorded but not all judged — or just those of `submission_ids` — as the platform itself (a
    server's background work: remote and server-played submissions are judged without anyone
    running `assay score`). A submission that cannot be scored now (its judge's endpoint down) is
    reported to `on_error` and left for the next call. Returns the ids it scored."""
    from assay.service.actors import OPERATOR

    waiting = JudgeRepo(store).awaiting_judge()
    todo = [s for s in waiting if submission_ids is None or s in submission_ids]
    done = []
    for submission_id in todo:
        try:
            summary = score(store, submission_id, actor=OPERATOR)
            down = [f"{reason} ({n} run(s))" for reason, n in summary["failures"].items() if " unreachable: " in reason]
            if down:  # left for the next call, and said
                raise RuntimeError("; ".join(down))
            done.append(submission_id)
        except Exception as exc:  # noqa: BLE001 - one submission's judge must not stop the others
            if on_error is not None:
                on_error(submission_id, exc)
    return done


def _config_view(pinned: dict[str, Any]) -> dict[str, Any]:
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
                                     [_stored_pass(r) for r in stored.get(run["run_id"], [])], min_valid)
            for run in repo.recorded_runs(submission_id)}


def trait_figures(store: Store, submission_id: str) -> dict[str, Any]:
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
            "judge": _config_view(pinned) if pinned is not None else None}
