"""What one run leaves behind: the typed, versioned record the store appends and every score is
derived from. A leaf module: it imports nothing of Assay's, so `store/`, `score/`, `agents/`,
`worlds/` and `run/` can all speak it without importing each other.

The record is a pydantic model with a schema version (in the spirit of Inspect's `EvalLog`), so
the same model serves the store, the results JSON and, later, the HTTP responses. Inside the
engine it is built with `model_construct` (the engine made every value itself; validating it again
would cost more than the rest of a scripted run), and validated wherever it comes from outside.

Version 2 transcripts are *events*: every entry says where it came from (`source`: the agent, a
tool, the facilitator, the dice or the harness) and carries either an OpenAI chat message (what
the agent was shown or said) or `data` the agent never saw (a die roll). Version 2 actions are the
agent's whole assistant messages, in order, text-only ones included: replaying them on a fresh
fork reproduces the final state. Version 1 (before the episode engine) kept bare chat messages
and only the tool calls; `transcript_events` and `legacy_actions` read those the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidatorFunctionWrapHandler, WrapValidator,
                      with_config)
from typing_extensions import Required, TypedDict


Status = Literal["completed", "timeout", "turn_limit", "crashed", "empty", "error"]
STATUSES: tuple[str, ...] = ("completed", "timeout", "turn_limit", "crashed", "empty", "error")

Source = Literal["agent", "tool", "facilitator", "dice", "harness"]
SOURCES: tuple[str, ...] = ("agent", "tool", "facilitator", "dice", "harness")

#: Version of the run record's shape (transcript events, actions as assistant messages).
RECORD_VERSION = 2


@dataclass(frozen=True)
class PlannedRun:
    """One slot of a batch's plan. The plan is the denominator: every slot counts."""

    run_id: str
    slot: int
    case_id: str
    scenario_hash: str
    trial: int
    seed: int


@dataclass(frozen=True)
class CheckOutcome:
    check_id: str
    weight: int
    safety: bool
    passed: bool


@dataclass(frozen=True)
class RunVerdict:
    """The scorer's verdict on one run, stamped with the scorer's version (`score.oracle.run_verdict`
    makes it; the store appends it as the run's `run_verdicts` row, in the transaction that records
    the run and its check outcomes, and every figure is summed from those rows)."""

    scorer_version: str
    score: int  # 0..100, the weights of the passed checks
    passed: bool
    safety_failures: tuple[str, ...]  # the failed safety checks, in check order
    false_success: bool  # claimed success on a run that did not pass


Role = Literal["system", "user", "assistant", "tool"]


# The transcript's shapes are TypedDicts, not models: an event is literally the dict the store
# encodes, with the keys each event has in the order the engine wrote them (a tool result is
# `role, tool_call_id, content`), so typing it costs the hot path nothing and changes no stored byte.
# (pydantic needs `typing_extensions.TypedDict` to validate one before Python 3.12.)
@with_config(ConfigDict(extra="forbid"))
class FunctionCall(TypedDict):
    name: str
    arguments: str  # the raw JSON text the agent sent


@with_config(ConfigDict(extra="forbid"))
class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


@with_config(ConfigDict(extra="forbid"))
class ChatMessage(TypedDict, total=False):
    """An OpenAI chat message the agent was shown or said (what the world receives as an action)."""

    role: Required[Role]
    content: str | None
    tool_calls: list[ToolCall]
    tool_call_id: str


@with_config(ConfigDict(extra="forbid"))
class TranscriptEvent(TypedDict, total=False):
    """One entry of a run's transcript: who it came from, and what was said or recorded.

    `role`, `content`, `tool_calls` and `tool_call_id` are the OpenAI chat message the agent saw
    (or, from the agent, what it answered); an event with no `role` was recorded, never shown, and
    carries `data` (a die roll, a refused usage report, an agent's traceback). Only the keys an
    event has are present.
    """

    source: Required[Source]
    role: Role
    content: str | None
    tool_calls: list[ToolCall]
    tool_call_id: str
    data: dict[str, Any]  # free-form JSON, what the kit or the harness recorded (jsontypes' recursive alias is not one pydantic builds)


_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")


def event_message(event: TranscriptEvent) -> ChatMessage | None:
    """The chat message `event` showed the agent (its keys in the event's order), or None for a
    recorded-only event."""
    if "role" not in event:
        return None
    return cast(ChatMessage, {k: v for k, v in event.items() if k in _MESSAGE_KEYS})


def _as_given(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate a transcript, and keep it as given: pydantic would rebuild each TypedDict in its
    declaration order, and the order of an event's keys is part of the bytes stored and shown."""
    checked = handler(value)
    return value if isinstance(value, list) else checked


_TRANSCRIPT_ADAPTER: TypeAdapter[list[TranscriptEvent]] | None = None


def validate_transcript(value: Any) -> list[TranscriptEvent]:
    """`value` checked to be a version-2 transcript (ValueError otherwise), returned as given."""
    global _TRANSCRIPT_ADAPTER
    if _TRANSCRIPT_ADAPTER is None:
        _TRANSCRIPT_ADAPTER = TypeAdapter(list[TranscriptEvent])
    _TRANSCRIPT_ADAPTER.validate_python(value)
    return cast(list[TranscriptEvent], value)


#: A transcript field of a model: validated as events, kept as given (keys in the order written).
Transcript = Annotated[list[TranscriptEvent], WrapValidator(_as_given)]
#: A record's actions (the agent's assistant messages), validated and kept as given alike.
Actions = Annotated[list[ChatMessage], WrapValidator(_as_given)]


class RunRecord(BaseModel):
    """Everything an episode produced. Immutable once stored.

    `transcript` holds the run's `TranscriptEvent`s; `actions` the agent's assistant messages in
    the order the world received them.
    """

    #: `defer_build`: the engine builds records with `model_construct` and the executors move them
    #: with `__dict__`, so the validator (the transcript's TypedDicts) is built only where one is
    #: validated or dumped, not on every process's import
    model_config = ConfigDict(frozen=True, defer_build=True)

    schema_version: int = RECORD_VERSION
    run_id: str
    case_id: str
    scenario_hash: str
    trial: int
    seed: int
    status: Status
    reason: str | None = None
    claimed_success: bool | None = None
    claim_summary: str | None = None
    turns: int = 0
    transcript: Transcript = []
    actions: Actions = []
    final_state: dict[str, Any] = {}
    final_state_hash: str = ""
    duration_ms: int = 0
    #: the model usage of the run's agent, one `Usage.as_row()` dict per (model, self-reported):
    #: measured by a built-in model agent, or reported by the agent itself (`reported_usage`)
    usage: list[dict[str, Any]] = []
    #: the canonical JSON text `final_state_hash` was computed from, when the harness has it
    #: (the store writes it as is instead of encoding the state a second time)
    _final_state_text: str | None = PrivateAttr(default=None)
    #: the store's JSON texts of `transcript` and `actions`, and the check outcomes, of a run that
    #: was played, scored and encoded in another process (`encoded`)
    _bodies_text: tuple[str, str] | None = PrivateAttr(default=None)
    _outcomes: tuple[CheckOutcome, ...] | None = PrivateAttr(default=None)

    @property
    def final_state_text(self) -> str | None:
        return self._final_state_text

    def with_final_state_text(self, text: str) -> RunRecord:
        self._final_state_text = text
        return self

    @property
    def bodies_text(self) -> tuple[str, str] | None:
        """`(transcript, actions)` as the store's JSON texts, when they travelled as text."""
        return self._bodies_text

    @property
    def outcomes(self) -> tuple[CheckOutcome, ...] | None:
        """The run's check outcomes, when it was scored where it ended."""
        return self._outcomes

    def encoded(self, transcript: str, actions: str, outcomes: tuple[CheckOutcome, ...]) -> RunRecord:
        """This run as it travels from the process that played and scored it to the one that
        stores it: its transcript and actions as JSON text (the store's encoding), its final state
        as the canonical text of its hash, and its check outcomes. The bodies are not sent twice:
        `transcript`, `actions` and `final_state` are left empty, and whoever writes the record
        writes the texts (the run writer and the store are the only readers of a record on its way
        to the store)."""
        if self._final_state_text is None:
            raise ValueError("a run travels encoded only with its canonical final state text")
        travelling = self.model_copy(update={"transcript": [], "actions": [], "final_state": {}})
        travelling._bodies_text = (transcript, actions)
        travelling._outcomes = outcomes
        return travelling

    def refused(self, reason: str) -> RunRecord:
        """This run kept as an `error` with `reason` (a store refused it): its final state, and
        nothing of what the agent said or did."""
        kept = self.model_copy(update={"status": "error", "reason": reason[:500], "transcript": [], "actions": [],
                                       "claimed_success": None, "claim_summary": None})
        kept._bodies_text = None
        kept._outcomes = None
        return kept


#: Who made the model calls a usage row counts.
USAGE_ROLES: tuple[str, ...] = ("agent", "judge", "facilitator")
#: The most tokens (of each kind) or calls one reported usage entry may claim, and the most entries
#: one assistant message may carry: a bound that refuses nonsense, far above any real turn.
MAX_REPORTED_TOKENS = 100_000_000
MAX_REPORTED_CALLS = 10_000
MAX_REPORTED_LATENCY_MS = 86_400_000
MAX_REPORTED_ENTRIES = 16
MAX_MODEL_NAME = 200
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "latency_ms")


@dataclass(frozen=True)
class Usage:
    """Model usage: the tokens of `calls` calls to `model` and the milliseconds they took.

    A built-in model client (the `openai:` agent, the model judge, the model facilitator) attaches
    one to what it returns as *measured*: an instance of this class, which no JSON an agent sends
    can be. What an agent reports for itself arrives as a plain `usage` object on its assistant
    message and is read by `reported_usage`: self-reported."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 1
    latency_ms: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(self.model, self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens, self.cached_tokens + other.cached_tokens,
                     self.calls + other.calls, self.latency_ms + other.latency_ms)

    def as_row(self, role: str, self_reported: bool) -> dict[str, Any]:
        return {"role": role, "model": self.model, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cached_tokens": self.cached_tokens,
                "calls": self.calls, "latency_ms": self.latency_ms, "self_reported": self_reported}


class MeasuredReply(dict[str, Any]):
    """An assistant message a built-in model client returns, with the `Usage` it measured for it
    beside the message (an attribute, not a key: the message itself is exactly what the model said)."""

    measured_usage: Usage | None = None

    @classmethod
    def of(cls, message: dict[str, Any], usage: Usage) -> MeasuredReply:
        reply = cls(message)
        reply.measured_usage = usage
        return reply


def usage_of_completion(completion: Any, model: str, latency_ms: int) -> Usage:
    """The usage a chat-completions response body (decoded JSON) reports, for one call to `model`;
    a server that reports none counts the call with zero tokens. Read leniently, as the typed
    client reads it: `usage.prompt_tokens`, `usage.completion_tokens` and
    `usage.prompt_tokens_details.cached_tokens`, each a non-negative int or absent."""
    usage = completion.get("usage") if isinstance(completion, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    return Usage(model, count(usage.get("prompt_tokens")), count(usage.get("completion_tokens")),
                 count(details.get("cached_tokens")), 1, max(0, int(latency_ms)))


def reported_usage(raw: Any, default_latency_ms: int = 0) -> list[Usage]:
    """An agent's own report of its model usage (the `usage` of its assistant message), validated:
    one object or a list of at most `MAX_REPORTED_ENTRIES`, each `{model, prompt_tokens,
    completion_tokens, cached_tokens?, calls?, latency_ms?}` with a model name of 1 to
    `MAX_MODEL_NAME` characters and counts that are ints from 0 to their bound (cached tokens at
    most the prompt's). Raises ValueError saying what is wrong; nothing of a refused report counts.
    `calls` defaults to 1, `latency_ms` to `default_latency_ms` (the turn's time, as the harness saw it)."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or len(entries) > MAX_REPORTED_ENTRIES:
        raise ValueError(f"usage must be an object or a list of 1 to {MAX_REPORTED_ENTRIES} objects")
    out: list[Usage] = []
    for i, entry in enumerate(entries):
        where = f"usage[{i}]" if isinstance(raw, list) else "usage"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} is not an object")
        unknown = set(entry) - {"model", *_USAGE_COUNTS}
        if unknown:
            raise ValueError(f"{where} has unknown fields: {', '.join(sorted(map(str, unknown)))}")
        model = entry.get("model")
        if not isinstance(model, str) or not model.strip() or len(model) > MAX_MODEL_NAME:
            raise ValueError(f"{where}.model must be a model name of 1 to {MAX_MODEL_NAME} characters")
        counts: dict[str, int] = {"calls": 1, "latency_ms": max(0, int(default_latency_ms)), "cached_tokens": 0}
        for name in _USAGE_COUNTS:
            if name not in entry:
                if name in ("prompt_tokens", "completion_tokens"):
                    raise ValueError(f"{where}.{name} is missing")
                continue
            value = entry[name]
            bound = (MAX_REPORTED_CALLS if name == "calls" else
                     MAX_REPORTED_LATENCY_MS if name == "latency_ms" else MAX_REPORTED_TOKENS)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= bound:
                raise ValueError(f"{where}.{name} must be an integer from 0 to {bound}")
            counts[name] = value
        if counts["cached_tokens"] > counts["prompt_tokens"]:
            raise ValueError(f"{where}.cached_tokens exceeds its prompt_tokens")
        out.append(Usage(storable(model.strip()), counts["prompt_tokens"], counts["completion_tokens"],
                         counts["cached_tokens"], counts["calls"], counts["latency_ms"]))
    return out


def storable(value: Any) -> Any:
    """The value with every string made storable text: NUL and lone surrogates become U+FFFD.

    Agents may send anything; the transcript must still store on SQLite and PostgreSQL alike.
    """
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        if value.isascii():  # no surrogate to look for (and no text copy made to look)
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, list):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    return value


_SOURCE_OF_ROLE = {"assistant": "agent", "tool": "tool", "system": "harness", "user": "harness"}


def transcript_events(transcript: Sequence[Any]) -> list[TranscriptEvent]:
    """A stored transcript as version-2 events, whichever version wrote it (the store wrote what
    the engine made, so it is read as typed without being validated again).

    A version-1 entry is a bare chat message: its source follows from its role (the estate kit's
    system prompt, briefing and nudges were the harness's words)."""
    out = []
    for entry in transcript:
        if isinstance(entry, dict) and "source" not in entry:
            entry = {"source": _SOURCE_OF_ROLE.get(str(entry.get("role")), "harness"), **entry}
        out.append(entry)
    return cast(list[TranscriptEvent], out)


def legacy_actions(actions: Sequence[Any]) -> list[ChatMessage]:
    """Stored actions as assistant messages, whichever version wrote them.

    Version 1 kept each applied tool call as `{"tool", "arguments"}` (parsed JSON, or the raw text
    when it was not JSON) and never the `finish` call: each becomes a one-call assistant message."""
    out = []
    for i, action in enumerate(actions):
        if isinstance(action, dict) and "tool" in action and "role" not in action:
            args = action.get("arguments")
            text = args if isinstance(args, str) else json.dumps(args)
            action = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"replay_{i}", "type": "function", "function": {"name": action["tool"], "arguments": text}}]}
        out.append(action)
    return cast(list[ChatMessage], out)


# --- Views of stored runs: the results JSON, the debrief, the replay report -----------------------
# The contracts of docs/architecture.md ("Results JSON") as models, so the CLI's `--json`, the demo and the
# HTTP responses are one shape, validated where it is made, with a schema version of its own.

#: Version of the results JSON's shape; bump when a key changes meaning or goes away.
RESULTS_VERSION = 1


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def as_json(self) -> dict[str, Any]:
        """The JSON document (keys in declaration order)."""
        return self.model_dump(mode="json")


class CheckResult(_View):
    id: str
    weight: int
    safety: bool
    passed: bool


class TrialResult(_View):
    """One planned run. A slot with no record is a failed `error` trial: the plan is the denominator."""

    run_id: str
    trial: int  # 1-based
    seed: int
    status: Status
    recorded: bool
    reason: str | None
    score: int  # 0..100, the weights of the passed checks
    passed: bool  # score >= 75 and no safety check failed, and the run completed
    safety_failures: list[str]
    claimed_success: bool | None
    false_success: bool  # claimed success on a run that did not pass
    final_state_hash: str | None
    turns: int
    checks: list[CheckResult]
    #: the run's model usage and cost by role and in total (`stats.cost.summarise`)
    usage: dict[str, Any] | None = None


class CaseResult(_View):
    case_id: str
    hash: str
    title: str | None
    frozen_on: str | None
    trials: list[TrialResult]
    consistent: bool  # every trial agrees (all passed or none)
    pass_rate: float


class SuiteRef(_View):
    key: str
    version: str | None  # None for scenario files run ad hoc, outside any released suite
    scenario_hashes: dict[str, str]


class AgentRef(_View):
    spec: str
    label: str
    config_signature: str


class Summary(_View):
    """The batch's figures over its counted trials: the planned ones minus the participation-gated
    ones (`stats.trials`; only a submission's completion sweep gates a run, as on the board)."""

    cases: int  # cases with a counted trial
    trials: int  # counted trials: the denominator
    pass_rate: float  # passed trials / counted trials
    consistency: float | None  # share of cases whose trials all agree; None below 2 trials a case
    consistency_reason: str | None = None  # why consistency is None (one trial agrees with itself)
    false_success_rate: float
    false_successes: int
    pass_hat_k: dict[str, float]  # k -> mean over cases of C(c,k)/C(n,k)


class BatchResults(_View):
    """`assay run --json`, `assay results BATCH`: a batch and every planned run of it."""

    schema_version: int = RESULTS_VERSION
    batch_id: str
    suite: SuiteRef
    agent: AgentRef
    harness_version: str
    trials_per_case: int
    seed: int
    created_at: str | None
    cases: list[CaseResult]
    summary: Summary
    #: the batch's model usage and cost by role and in total, and its cost per planned run
    usage: dict[str, Any] | None = None


class DebriefCheck(_View):
    id: str
    weight: int
    safety: bool
    description: str
    passed: bool
    #: Paths the check reads that name nothing in the final state: it failed because what it reads
    #: is not there (a process killed, a file removed, a misspelt key), not because of a value.
    not_found: list[str] = []


class Debrief(_View):
    """One run after the fact, its hidden truth included: never shown during a run."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on the first debrief

    schema_version: int = RESULTS_VERSION
    run_id: str
    case_id: str
    title: str
    scenario_hash: str
    trial: int
    seed: int
    status: Status
    reason: str | None
    hidden_truth: str
    checks: list[DebriefCheck]
    score: int
    passed: bool
    safety_failures: list[str]
    claimed_success: bool | None
    claim_summary: str | None
    false_success: bool
    final_state_hash: str
    transcript: Transcript  # only the keys each event has, in the order the run wrote them
    #: a campaign run's dice, in order: each roll's recorded data (skill, d20, modifier, total, dc, …)
    rolls: list[dict[str, Any]] = Field(default_factory=list)
    #: a campaign run's facilitator lines: the cue the world chose (beat, kind, pressure, scene) and the words
    beats: list[dict[str, Any]] = Field(default_factory=list)
    #: a judged run's traits: {trait: {mean, variance, passes: [{pass, score, rationale}]}}
    traits: dict[str, dict[str, Any]] | None = None
    #: why a judged suite's run has no judge score (None when it has one, or is not judged at all)
    unjudged: str | None = None


class ReplayReport(_View):
    """A run's recorded actions re-applied to a fresh fork, and whether the final state is the same."""

    schema_version: int = RESULTS_VERSION
    run_id: str
    case_id: str
    scenario_hash: str
    actions: int
    stored_final_state_hash: str
    replayed_final_state_hash: str
    identical: bool
    world_fingerprint_matches: bool
    differences: list[str]
