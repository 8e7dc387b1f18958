"""What every judge gives back: passes, and a run's per-trait scores derived from them.

A *pass* is one judgement of one fixed transcript: the LLM judge makes one chat-completions request
per (run, pass); the `rules` judge's single deterministic evaluation is its one pass. A pass is
either valid (for every rubric trait a score in [0, 1], or None when the transcript did not
exercise the trait) or failed (with the error that ended it); a failed pass is kept as a record,
never averaged.

A run's per-trait score is derived from its valid passes, never stored on its own (docs/architecture.md,
invariant 2): the mean and the population variance of the pass scores (the spread of the passes
themselves; a single pass has variance 0), over the passes that scored the trait. A trait no
valid pass scored was not exercised by the run: it has no number (it is absent from `traits` and
`scores`), never a default. Below `min_valid` valid passes the run is *unscored*: it carries no
number at all (invariant 6). `summarize` is that derivation, pure, so the store can apply
it to the passes it holds (say, those of an interrupted scoring plus the ones made to finish it).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from assay.records import TranscriptEvent, Usage

if TYPE_CHECKING:
    from assay.records import RunRecord
    from assay.scenario.rubric import Rubric

#: A run's trait scores are the mean of at least this many valid passes of an LLM judge.
MIN_PASSES = 5

ErrorKind = Literal["reply", "http", "connection"]


@dataclass(frozen=True)
class JudgeRun:
    """One run to judge: its fixed transcript (`records.TranscriptEvent`s) and
    the rubric to judge it against. `pass_indices` names the passes to make (default: all of the
    judge's, 0 … passes-1); a scoring that was interrupted asks only for the ones it lacks.
    `win_conditions` is (met, total): the run's win conditions as the completion sweep found them
    (the evidence of `objective_met_rate`), which the `rules` judge's goal trait reads; None when
    not known."""

    run_id: str
    transcript: Sequence[TranscriptEvent]
    rubric: Rubric
    pass_indices: Sequence[int] | None = None
    win_conditions: tuple[int, int] | None = None

    @classmethod
    def of(cls, record: RunRecord, rubric: Rubric, pass_indices: Sequence[int] | None = None) -> JudgeRun:
        return cls(record.run_id, record.transcript, rubric, pass_indices)


@dataclass(frozen=True)
class JudgePass:
    """One pass over one run, valid or failed, with what the judge replied.

    `raw` is the judge's reply text (the last one, for a pass retried over malformed replies; None
    when no reply came); `scores` {trait: score in [0, 1]} when valid, else None and `error` says
    why, `error_kind` whether the replies were unusable (`reply`) or none came (`http`: an HTTP
    error, after retries for 429 and 5xx; `connection`: unreachable or timed out, after retries).
    `attempts` counts the requests this pass made, retries included; `retries` notes why each
    retried attempt was not the last one."""

    index: int
    raw: str | None
    scores: dict[str, float | None] | None
    rationale: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    error_kind: ErrorKind | None = None
    attempts: int = 1
    retries: tuple[str, ...] = ()
    #: the model usage of this pass's requests (a model judge's, measured; None for the rules judge
    #: and for a pass read back from the store, whose usage is in `run_usage`)
    usage: Usage | None = field(default=None, compare=False)

    @property
    def valid(self) -> bool:
        return self.scores is not None

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("usage", None)
        out["retries"] = list(self.retries)
        return out


@dataclass(frozen=True)
class TraitScore:
    """One trait of one run: the mean of the valid passes that scored it and their (population)
    variance; `n` is how many passes that is."""

    mean: float
    variance: float
    n: int


@dataclass(frozen=True)
class RunJudgement:
    """Every pass of one run and what they add up to; `traits` is None while the run is unscored,
    and leaves out the traits the run did not exercise."""

    run_id: str
    trait_keys: tuple[str, ...]
    passes: tuple[JudgePass, ...]
    min_valid: int
    traits: dict[str, TraitScore] | None

    @property
    def scored(self) -> bool:
        return self.traits is not None

    @property
    def valid_passes(self) -> int:
        return sum(p.valid for p in self.passes)

    @property
    def scores(self) -> dict[str, float] | None:
        """{trait: mean} over the exercised traits, or None when unscored: the input
        `stats.traits` aggregates."""
        return None if self.traits is None else {k: t.mean for k, t in self.traits.items()}

    def traits_view(self) -> dict[str, dict[str, Any]]:
        """The owner view's per-run `traits`: {trait: {mean, variance, passes: [{pass, score,
        rationale}]}}, every rubric trait present; `mean` and `variance` are None while the run is
        unscored, and for a trait the run did not exercise (its passes' `score` is None)."""
        view = {}
        for key in self.trait_keys:
            score = self.traits.get(key) if self.traits is not None else None
            view[key] = {
                "mean": score.mean if score else None,
                "variance": score.variance if score else None,
                "passes": [{"pass": p.index, "score": p.scores.get(key), "rationale": p.rationale.get(key)}
                           for p in self.passes if p.scores is not None],
            }
        return view


def summarize(run_id: str, trait_keys: Sequence[str], passes: Sequence[JudgePass],
              min_valid: int = MIN_PASSES) -> RunJudgement:
    """A run's judgement from its passes: per-trait mean and variance of the valid ones that
    scored the trait (a trait none scored is left out: not exercised), or unscored below
    `min_valid`. Two passes with one index are refused: a pass is recorded once."""
    indices = [p.index for p in passes]
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        raise ValueError(f"run {run_id}: pass(es) {twice} recorded more than once")
    ordered = tuple(sorted(passes, key=lambda p: p.index))
    valid = [p.scores for p in ordered if p.scores is not None]
    traits: dict[str, TraitScore] | None = None
    if len(valid) >= max(1, min_valid):
        traits = {}
        for key in trait_keys:
            values = [v for v in (s.get(key) for s in valid) if v is not None]
            if values:
                traits[key] = TraitScore(mean=mean(values), variance=pvariance(values), n=len(values))
    return RunJudgement(run_id, tuple(trait_keys), ordered, min_valid, traits)


def mean(values: Sequence[float]) -> float:
    """The correctly rounded mean (`math.fsum`), so recomputing it from stored passes agrees."""
    return math.fsum(values) / len(values)


def pvariance(values: Sequence[float]) -> float:
    m = mean(values)
    return math.fsum((v - m) ** 2 for v in values) / len(values)


OnPass = Callable[[str, JudgePass], Awaitable[None] | None]
"""Called with (run_id, pass) as each pass ends, so a store can append it at once."""


class Judge(Protocol):
    """What the scoring layer needs of a judge (`rules` and `openai:MODEL` alike)."""

    spec: str
    passes: int
    min_valid: int

    def provenance(self) -> dict[str, Any]:
        """{model, prompt_version, prompt_hash, passes, temperature}: what the board pins."""
        ...

    async def score_runs(self, runs: Sequence[JudgeRun], concurrency: int = ...,
                         on_pass: OnPass | None = ...) -> list[RunJudgement]: ...

    def score_runs_sync(self, runs: Sequence[JudgeRun], concurrency: int = ...,
                        on_pass: OnPass | None = ...) -> list[RunJudgement]: ...


T = TypeVar("T")


def run_sync(coro: Awaitable[T]) -> T:
    """Run `coro` to completion from synchronous code, even when this thread already runs a loop
    (then in a helper thread with its own loop, never nesting loops)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="assay-judge")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def notify(on_pass: OnPass | None, run_id: str, judged: JudgePass) -> None:
    if on_pass is not None:
        result = on_pass(run_id, judged)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            await result
