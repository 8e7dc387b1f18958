"""Response models of the JSON API: what `/openapi.json` documents and schemathesis checks.

The service builds plain dicts (the same ones the CLI prints); these models describe them, and
routes that must be byte-identical to the CLI (the board) send the service's own text and name
the model in `responses=` only. Every model allows extra keys: a later issue that adds a field to
a service view (traits, digests) must not make the API refuse its own answer.

`error_responses(401, 404)` gives a route's `responses=` entries for its refusals.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


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


class PinShort(_Open):
    case_id: str
    version: int
    hash_prefix: str


class Pin(PinShort):
    title: str
    hash: str = Field(description="The scenario's full content hash (sha256).")
    frozen_on: str | None


class SuiteSummary(_Open):
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


class SuiteRelease(SuiteSummary):
    """Everything a release pins: scenario versions and hashes, judge, facilitator, owner, card text."""

    owner: str | None
    facilitator_model: str | None
    judge: dict[str, Any] | None
    scenarios: list[Pin]
    baselines: list[dict[str, Any]]
    known_limitations: list[str]
    card: str


class BoardSuite(_Open):
    key: str
    version: str
    title: str
    language: str
    visibility: str
    is_latest_public: bool


class BoardVersion(_Open):
    version: str
    released_at: str
    current: bool


class Provenance(_Open):
    suite_key: str
    version: str
    language: str
    release_hash_prefix: str
    scenarios: list[PinShort]
    judge: dict[str, Any] | None
    facilitator_model: str | None
    reps_per_scenario: int


class BoardEntry(_Open):
    """One submission on the board. Rates are None where nothing counts yet (no number from too
    little); each `<rate>_ci` is its 95% interval, clustered by case. Never a seed."""

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
    usage: dict[str, Any] | None = Field(default=None, description=(
        "Model usage over the entry's runs. An entry by its id (`GET /api/entries/{id}`) gives the whole "
        "block: by role (agent, judge, facilitator) and in total, each with tokens, calls, latency, whether "
        "any was self-reported, the models and the cost in USD at the prices in force when it was recorded "
        "(`cost_usd` None, with `cost_reason`, when a model has no price). A board (`GET /api/leaderboard/"
        "{key}`) shows only `total`, with its tokens, calls, `self_reported`, `cost_usd` and `cost_reason`."))
    cost_per_run_usd: float | None = Field(default=None, description="The total cost over the planned runs.")


class BoardPage(_Open):
    """Which page of a board this is (only when one was asked for: `limit`, `cursor` or `q`)."""

    limit: int | None
    search: str | None
    next_cursor: str | None = Field(description="The next page's `cursor`; None on the last page.")


class Board(_Open):
    """Exactly what `assay board KEY --json` prints."""

    suite: BoardSuite
    versions: list[BoardVersion]
    provenance: Provenance
    ranking: str = Field(description="The ranking rule, in words.")
    entries: list[BoardEntry]
    page: BoardPage | None = None


class PublishedEntry(_Open):
    """One published entry by its submission id: a listed one (as its board shows it, ranked) or
    an unlisted one (bring-your-own, published by id, never listed or ranked)."""

    suite: BoardSuite
    provenance: Provenance
    listed: bool = Field(description="False for an entry published unlisted: reachable only by its id.")
    entry: BoardEntry


class Card(_Open):
    """A suite version's eval card; `markdown` is what `assay card KEY --version V` prints."""

    key: str
    version: str
    markdown: str
