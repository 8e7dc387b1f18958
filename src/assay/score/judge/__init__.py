"""Trait judges: `rules` (deterministic, from the rubric's evidence; the offline default) and
`openai:MODEL` (a model behind an OpenAI-compatible endpoint, denoised over ≥ 5 passes).

Both give the same things back (`base`): per run a `RunJudgement` of `JudgePass`es and, once
enough passes are valid, per-trait `TraitScore`s (mean and variance of the passes). Both expose
`spec`, `passes`, `min_valid`, `provenance()` (the board's `provenance.judge`), `check(rubric)`
(refuse at configuration what they cannot judge), `score_runs(runs, concurrency, on_pass)` (async)
and `score_runs_sync(...)`.
"""

from __future__ import annotations

from assay.errors import Invalid
from assay.score.judge.base import (
    MIN_PASSES,
    Judge,
    JudgePass,
    JudgeRun,
    RunJudgement,
    TraitScore,
    summarize,
)
from assay.score.judge.llm import JUDGE_PROMPT_VERSION, LLMJudge, RetryPolicy, prompt_hash
from assay.score.judge.rules import RulesJudge, rules_scores

__all__ = [
    "JUDGE_PROMPT_VERSION",
    "MIN_PASSES",
    "Judge",
    "JudgePass",
    "JudgeRun",
    "LLMJudge",
    "RetryPolicy",
    "RulesJudge",
    "RunJudgement",
    "TraitScore",
    "judge_from_spec",
    "prompt_hash",
    "rules_scores",
    "summarize",
]


def judge_from_spec(spec: str, base_url: str | None = None, api_key: str | None = None,
                    passes: int = MIN_PASSES, *, retry: RetryPolicy | None = None,
                    timeout: float = 120.0) -> RulesJudge | LLMJudge:
    """The judge a spec names: `rules` or `openai:MODEL`.

    `passes` is checked for every spec, at configuration: fewer than `MIN_PASSES` is refused
    (`Invalid`, field `judge_passes`) even for `rules`, whose one deterministic evaluation is its
    whole judgement, so a refused `--judge-passes` does not depend on which judge it came with.
    An unknown spec is refused naming it (field `judge`); `base_url` and `api_key` fall back to
    `OPENAI_BASE_URL` and `OPENAI_API_KEY`, and a missing key is refused unless the endpoint is
    loopback.
    """
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < MIN_PASSES:
        raise Invalid(f"a run's trait scores are the mean of at least {MIN_PASSES} judge passes; "
                      f"{passes!r} is too few", "judge_passes")
    if spec == "rules":
        return RulesJudge()
    kind, sep, model = spec.partition(":")
    if kind == "openai" and sep:
        if not model:
            raise Invalid("the judge's model name is empty (use openai:MODEL)", "judge", value=spec)
        return LLMJudge(model, base_url=base_url, api_key=api_key, passes=passes, retry=retry, timeout=timeout)
    raise Invalid(f"unknown judge '{spec}'; use 'rules' or 'openai:MODEL'", "judge")
