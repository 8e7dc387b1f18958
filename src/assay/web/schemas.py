"""Response models of the JSON API: what `/openapi.json` documents and schemathesis checks.

The service builds plain dicts (the same ones the CLI prints); these models describe them exactly.
Every model is `Closed` (`extra="forbid"`): a key a service view gains that no model names is a
500 in the tests (`ResponseValidationError`), never silent drift, and the OpenAPI document says
`additionalProperties: false` for every object it describes (tests/web/test_response_models.py
holds every JSON route to that). A member a view holds only in some cases (the trait figures of a
suite with a rubric) is listed in the model's `given_only`: it is left out of the answer when the
view did not give it, so the answers are the views' own keys, in the same order.

Routes that must be byte-identical to the CLI (the board) send the service's own text; their
`response_model` documents it and FastAPI does not re-validate a `Response` a route returns.

`error_responses(401, 404)` gives a route's `responses=` entries for its refusals.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class Closed(BaseModel):
    """A response model that refuses keys it does not name (`extra="forbid"`). Fields named in
    `given_only` appear in an answer only when the view gave them (no `null` stands in for a key
    the view does not have)."""

    model_config = ConfigDict(extra="forbid")
    given_only: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _given(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]  # no return type: the schema stays the model's
        data = handler(self)
        if self.given_only and isinstance(data, dict):
            for name in self.given_only - self.model_fields_set:
                data.pop(name, None)
        return data


class Refusal(BaseModel):
    """Every refusal: one line saying what is wrong, and the domain field at fault when one is (its
    published schema is `web.refusals.REFUSAL_SCHEMA`, the same two keys and no other)."""

    model_config = ConfigDict(extra="forbid")
    detail: str = Field(description="What is wrong, in one line; never a trace or a secret.")
    field: str | None = Field(description="The field at fault (`suite`, `version`, `agent.base_url`, …), or null.")


_REFUSALS = {
    401: "No key, or not a valid, unrevoked key of the kind this route takes (`WWW-Authenticate: Bearer`).",
    403: "The caller may see this but not do it.",
    404: "No such object, or one the caller may not see (an internal suite reads exactly like a missing one).",
    409: "The stored state refuses the request (a cap reached, already done).",
    413: "The request body is over the server's cap.",
    422: "A malformed request: `detail` says what is wrong in plain words, `field` names the field.",
    429: "Too many requests from this caller; `Retry-After` says when to try again.",
    500: "A bug on the server: `{\"detail\": \"internal error\"}`, nothing more.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries documenting refusals with `Refusal` bodies (429 with `Retry-After`)."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        entry: dict[str, Any] = {"model": Refusal, "description": _REFUSALS[code]}
        if code == 429:
            entry["headers"] = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}}
        if code == 401:
            entry["headers"] = {"WWW-Authenticate": {"description": "`Bearer`.", "schema": {"type": "string"}}}
        out[code] = entry
    return out


class PinShort(Closed):
    case_id: str
    version: int
    hash_prefix: str


class Pin(PinShort):
    title: str
    hash: str = Field(description="The scenario's full content hash (sha256).")
    frozen_on: str | None


class SuiteSummary(Closed):
    """A suite version as the index lists it."""

    key: str
    version: str
    title: str
    language: str
    visibility: str = Field(description="public | unlisted (internal suites are never served here)")
    reps_per_scenario: int
    released_at: str
    release_hash: str
    builtin: bool


class SuiteVersion(SuiteSummary):
    scenarios: list[PinShort]


class JudgeConfigView(Closed):
    """The judge a release pins, as its suite document declared it."""

    model: str = Field(description="`rules`, or the judge model (`openai:MODEL` or a bare name).")
    prompt_version: int
    passes: int
    temperature: int


class BaselineView(Closed):
    agent: str
    label: str
    note: str


class SuiteRelease(SuiteSummary):
    """Everything a release pins: scenario versions and hashes, judge, facilitator, owner, card text."""

    owner: str | None
    facilitator_model: str | None
    judge: JudgeConfigView | None
    scenarios: list[Pin]
    baselines: list[BaselineView]
    known_limitations: list[str]
    card: str


class BoardSuite(Closed):
    key: str
    version: str
    title: str
    language: str
    visibility: str
    is_latest_public: bool


class BoardVersion(Closed):
    version: str
    released_at: str
    current: bool


class JudgeProvenance(Closed):
    """The judge a release pins, with the hash of the prompt this harness sends it."""

    model: str = Field(description="`rules` or `openai:MODEL`.")
    prompt_version: int
    prompt_hash: str
    passes: int
    temperature: int | float


class EntryJudge(JudgeProvenance):
    """The judge that scored an entry's traits (pinned at submission), with the rubric it read."""

    rubric_hash: str


class Provenance(Closed):
    suite_key: str
    version: str
    language: str
    release_hash_prefix: str
    scenarios: list[PinShort]
    judge: JudgeProvenance | None
    facilitator_model: str | None
    reps_per_scenario: int
    rubric_hash_prefix: str | None = Field(description="The pinned trait rubric's hash prefix; None without one.")


class RoleUsage(Closed):
    """Model usage of one role (or the total): tokens, calls, latency, and the cost in USD."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    calls: int
    latency_ms: int
    self_reported: bool = Field(description="Whether any of it was reported by the agent rather than measured.")
    models: list[str]
    cost_usd: float | None = Field(description="None (with `cost_reason`) when a model used has no price.")
    cost_reason: str | None


class Usage(Closed):
    agent: RoleUsage
    judge: RoleUsage
    facilitator: RoleUsage
    total: RoleUsage


class BoardUsageTotal(Closed):
    """An entry's usage total as a board shows it (`service.board.BOARD_USAGE`)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    calls: int
    self_reported: bool
    cost_usd: float | None
    cost_reason: str | None


class BoardUsage(Closed):
    total: BoardUsageTotal


#: The trait figures a view holds only for a suite whose release pins a rubric.
TRAIT_KEYS = frozenset({"composite", "traits", "safety", "trait_n", "stability", "safety_variance_n",
                        "safety_variance_range", "safety_variance_stddev", "judge"})


class BoardEntry(Closed):
    """One submission on the board. Rates are None where nothing counts yet (no number from too
    little); each `<rate>_ci` is its 95% interval, clustered by case. Never a seed."""

    given_only = TRAIT_KEYS | {"composite_ci", "judge_is_pinned"}

    submission_id: str
    agent_label: str
    label_self_declared: bool
    public_handle: str | None
    play_model: str | None
    model_provenance: str | None
    leaderboard_class: str
    status: str
    n_runs: int
    n_cases: int | None
    pass_rate: float | None
    pass_rate_ci: list[float] | None
    consistency: float | None
    consistency_ci: list[float] | None
    false_success_rate: float | None
    false_success_rate_ci: list[float] | None
    objective_met_rate: float | None
    objective_met_rate_ci: list[float] | None
    measurement_era: str | None
    measurement_era_is_current: bool | None
    variance_note: str | None
    facilitator_models: list[str]
    harness_version: str | None
    rank: int | None
    usage: Usage | BoardUsage | None = Field(default=None, description=(
        "Model usage over the entry's runs. An entry by its id (`GET /api/entries/{id}`) gives the whole "
        "block (`Usage`): by role (agent, judge, facilitator) and in total, each with tokens, calls, latency, "
        "whether any was self-reported, the models and the cost in USD at the prices in force when it was "
        "recorded (`cost_usd` None, with `cost_reason`, when a model has no price). A board (`GET "
        "/api/leaderboard/{key}`) shows only the total (`BoardUsage`)."))
    cost_per_run_usd: float | None = Field(default=None, description="The total cost over the planned runs.")
    config_signature: str | None = Field(description="The agent's configuration signature, when it has one.")
    digest: str | None = Field(description="The submission's digest (`assay verify` recomputes it).")
    composite: float | None = Field(None, description=(
        "Trait suites only: the mean over capability traits of their per-scenario means."))
    traits: dict[str, float | None] | None = Field(None, description="Capability trait → its mean (None: never measured).")
    safety: dict[str, float | None] | None = Field(None, description="Safety trait → its mean (None: never measured).")
    trait_n: dict[str, int] | None = Field(None, description="Trait → on how many scenarios it was measured.")
    stability: str | None = Field(None, description="The safety-variance verdict.")
    safety_variance_n: dict[str, int] | None = None
    safety_variance_range: dict[str, float] | None = None
    safety_variance_stddev: dict[str, float] | None = None
    judge: EntryJudge | None = None
    composite_ci: list[float] | None = Field(None, description="Trait suites only: the composite's 95% interval.")
    judge_is_pinned: bool | None = Field(None, description="Trait suites only: scored by the judge the release pins.")


class BoardPage(Closed):
    """Which page of a board this is (only when one was asked for: `limit`, `cursor` or `q`)."""

    limit: int | None
    search: str | None
    next_cursor: str | None = Field(description="The next page's `cursor`; None on the last page.")


class Board(Closed):
    """Exactly what `assay board KEY --json` prints."""

    given_only = frozenset({"page"})

    suite: BoardSuite
    versions: list[BoardVersion]
    provenance: Provenance
    ranking: str = Field(description="The ranking rule, in words.")
    entries: list[BoardEntry]
    page: BoardPage | None = None


class PublishedEntry(Closed):
    """One published entry by its submission id: a listed one (as its board shows it, ranked) or
    an unlisted one (bring-your-own, published by id, never listed or ranked)."""

    suite: BoardSuite
    provenance: Provenance
    listed: bool = Field(description="False for an entry published unlisted: reachable only by its id.")
    entry: BoardEntry


class Card(Closed):
    """A suite version's eval card; `markdown` is what `assay card KEY --version V` prints."""

    key: str
    version: str
    markdown: str
