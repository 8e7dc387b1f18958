"""The human panel: applications, the ingest state machine, the categories, and the panel board.

The third way to score a run (docs/architecture.md): vetted humans rate runs by category (0..10), and the
board shows, per model, the mean of its runs' per-category medians, with no number from fewer
than a quorum of panelists. Reference document 003 describes the pipeline; issue 11 pins it.

Who may do what (the actors' rules, `service.actors`):

- anyone (the public) applies to the panel (`apply`) and reads the categories and the board;
- the platform's staff (the operator, or an admin through a session) list and decide applications
  (`review`) and run every ingest step (`ingest`); `by` names the admin who did (None: the operator).

The ingest steps, each one refusal or one transaction:

- `register-model` (`slug`, `name`, `vendor`), `register-environment` (`slug`, `name`, `spec`);
- `create-run` (`model`, `environment` by slug, `artifact_url`, optionally `assay_run`: the id or a
  unique prefix of the recorded Assay run the panel scores, kept as a link for `assay agreement`)
  → a `pending` run;
- `record-score` (`run`, `panelist_email`, `ratings` {category: 0..10}, `comment`, `minutes`):
  the panelist is resolved by email among the applications, and anyone not approved now is refused
  with one refusal (pending, rejected and unknown alike); one scorecard per (run, panelist) counts —
  a new one replaces the earlier for the board, which stays as history; ratings outside 0..10, for
  unknown categories, or on a run that is scored already are refused; a scorecard may be partial;
- `finalize-run` (`run`) → `scored`, refused for a run with no scorecards. Only scored runs count;
- `record-preference` (`run_a`, `run_b`, `panelist_email`, `preferred` `a` | `b` | `tie`): an approved
  panelist's preference between two distinct runs of one environment (the same one refusal as
  `record-score` for anyone else); one counts per (panelist, unordered run pair) — a new one
  replaces the earlier for the board, which stays as history (issue 12, item 5).

The board carries intervals (a seeded two-stage bootstrap, `assay.stats.panel`), statistical
ranks on them, and `pairwise`: the Bradley–Terry ranking from the preferences.

The categories come from ONE taxonomy file, `panel_categories.yaml` beside this module: the store
is seeded from it (idempotently, on first need), and the pages read it through `categories`.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, StrictFloat, StrictInt, StrictStr, ValidationError
from pydantic.config import JsonDict

from assay.errors import BadInput, Forbidden, Invalid, NotFound
from assay.scenario.load import describe_error
from assay.scenario.yamlsafe import load_yaml_file
from assay.service import platform_config
from assay.service.actors import Actor, require_staff
from assay.service.admins import check_email
from assay.stats import panel as panel_stats
from assay.stats.ranks import statistical_ranks
from assay.store.db import Store
from assay.store.panel_repo import BoardRow, PanelRepo, PanelRun, StoredApplication, StoredCategory

TAXONOMY = Path(__file__).resolve().parent / "panel_categories.yaml"
SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
RATING_MIN, RATING_MAX = 0, 10
#: Places the board rounds its figures to.
PLACES = 2
RANKING = ("Ranked by overall: the mean over categories of the model's per-category means of its scored runs' "
           "medians (the median across the approved panelists who rated the run in that category; for an "
           "even count the mean of the two middle ratings). A model is ranked once at least {quorum} distinct "
           "approved panelists have scored its scored runs; below that it is provisional, counted but never "
           "given a number. Each figure carries a 95% percentile bootstrap interval (2,000 seeded resamples of the "
           "model's scored runs and, within each, of its scorecards); rank is 1 + the number of ranked models whose "
           "overall interval lies wholly above this one's, so models the data does not separate share a rank. "
           "A model whose cards come from fewer than two distinct panelists has no interval (the spread between "
           "panelists cannot be seen) and so no rank.")
PAIRWISE_RANKING = ("Pairwise: Bradley–Terry maximum-likelihood log-strengths from the approved panelists' "
                    "preferences between runs of one environment (a tie is half a win to each; the latest "
                    "preference per panelist and run pair counts). Strengths are comparable only on one scale: "
                    "the models tied together by a cycle of preferences (`scale`), centred to average 0; a "
                    "model no cycle ties to another has none. Each carries a 95% seeded bootstrap interval over "
                    "preferences, every resample in the same frame (none when too few resamples keep the scale "
                    "whole). Rank is 1 + the models above it: every model of a scale preferred over its own "
                    "(directly or through others, never the other way) and every model of its own scale whose "
                    "interval lies wholly above its; so a model that lost every comparison ranks below every "
                    "model it lost to. A model is ranked once preferences from at least {quorum} distinct "
                    "panelists involve it.")

DECISIONS = {"approve": "approved", "reject": "rejected"}


# -- what the service answers -----------------------------------------------------------------
# TypedDicts, not dataclasses: each is serialised as it is (the API's closed models in
# web/panel_api.py validate it, the pages read it), with fixed keys in this order.


class CategoryView(TypedDict):
    slug: str
    name: str
    description: str


class Created(TypedDict):
    id: str


class ApplicationView(TypedDict):
    id: str
    email: str
    specialty: str
    years_experience: int
    statement: str
    applied_at: str
    status: str
    reviewed_at: str | None
    reviewed_by: str | None


class ModelRegistered(TypedDict):
    model: str
    name: str
    vendor: str


class EnvironmentRegistered(TypedDict):
    environment: str
    name: str


class RunCreated(TypedDict):
    run: str
    status: str
    assay_run: NotRequired[str]


class ScoreRecorded(TypedDict):
    run: str
    scorecard: int
    status: str
    ratings: dict[str, float]


class RunFinalized(TypedDict):
    run: str
    status: str


class PreferenceRecorded(TypedDict):
    preference: int
    run_a: str
    run_b: str
    preferred: str


IngestResult = ModelRegistered | EnvironmentRegistered | RunCreated | ScoreRecorded | RunFinalized | PreferenceRecorded


class RunView(TypedDict):
    run: str
    model: str
    environment: str
    artifact_url: str
    status: str
    n_scorecards: int
    created_at: str
    assay_run: str | None


class ScorecardView(TypedDict):
    scorecard: int
    panelist_email: str | None
    ratings: dict[str, float]
    comment: str
    minutes: int
    recorded_at: str


class PanelistView(TypedDict):
    specialty: str
    years_experience: int


class PanelEntry(TypedDict):
    slug: str
    name: str
    vendor: str
    n_runs: int
    n_panelists: int
    overall_score: float
    category_scores: dict[str, float]
    panelists: list[PanelistView]
    overall_ci: list[float] | None
    category_ci: dict[str, list[float]]
    ci_reason: str | None
    rank: int | None


class Provisional(TypedDict):
    count: int


class PairwiseEntry(TypedDict):
    slug: str
    name: str
    strength: float | None
    ci: list[float] | None
    scale: list[str]
    rank: int
    n_comparisons: int
    note: NotRequired[str]


class PairwiseBoard(TypedDict):
    ranked: list[PairwiseEntry]
    provisional: Provisional
    quorum: int
    ranking: str


class PanelBoard(TypedDict):
    ranked: list[PanelEntry]
    provisional: Provisional
    quorum: int
    ranking: str
    pairwise: PairwiseBoard


# -- the taxonomy -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Category:
    slug: str
    name: str
    description: str


class _CategoryDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    slug: StrictStr = Field(pattern=SLUG.pattern)
    name: StrictStr = Field(min_length=1, max_length=80)
    description: StrictStr = Field(min_length=1, max_length=400)


class _TaxonomyDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    categories: list[_CategoryDoc] = Field(min_length=1)


def taxonomy(path: Path = TAXONOMY) -> tuple[Category, ...]:
    """The evaluation categories as the taxonomy file lists them, in its order."""
    try:
        doc = _TaxonomyDoc.model_validate(load_yaml_file(path))
    except ValidationError as exc:
        raise BadInput(describe_error(exc, model=_TaxonomyDoc), str(path)) from None
    slugs = [c.slug for c in doc.categories]
    if len(set(slugs)) != len(slugs):
        raise BadInput("a category slug is listed twice", str(path))
    return tuple(Category(c.slug, c.name, c.description) for c in doc.categories)


def seed_categories(store: Store, path: Path = TAXONOMY) -> int:
    """Store the taxonomy's categories the store does not hold yet; how many were added."""
    rows = [StoredCategory(c.slug, c.name, c.description, i) for i, c in enumerate(taxonomy(path), start=1)]
    repo = PanelRepo(store)
    if {r.slug for r in rows} <= repo.category_slugs():
        return 0
    return repo.seed_categories(rows)


def categories(store: Store) -> list[CategoryView]:
    """The evaluation categories (`slug`, `name`, `description`), in the taxonomy's order."""
    seed_categories(store)
    return [{"slug": c.slug, "name": c.name, "description": c.description} for c in PanelRepo(store).categories()]


# -- text -------------------------------------------------------------------------------------


def _text(value: str, field: str, *, max_length: int, required: bool = True) -> str:
    """Text a database can hold, stored as given (never interpreted): no NUL, no lone surrogate."""
    if "\x00" in value:
        raise Invalid("text may not contain the NUL character", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid("text must be valid Unicode (no lone surrogates)", field) from None
    if required and not value.strip():
        raise Invalid("may not be empty", field)
    if len(value) > max_length:
        raise Invalid(f"at most {max_length} characters", field)
    return value


def _slug(value: str, field: str) -> str:
    if not SLUG.match(value):
        raise Invalid("a slug is 1-64 characters of a-z, 0-9 and '-' (not at either end)", field, value=value)
    return value


def _validated(model: type[BaseModel], payload: Any) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first.get("loc") else None
        raise Invalid(describe_error(exc, model=model), field) from None


# -- applications -----------------------------------------------------------------------------


#: Documented (not enforced: `_text` does, with the same rule) in the published schema: some
#: character that is not white space, and no NUL anywhere.
_NON_BLANK: JsonDict = {"pattern": "^[^\\x00]*[^\\s\\x00][^\\x00]*$"}


def _whole(value: Any) -> Any:
    """A JSON number that is a whole number (27.0 is an integer to JSON Schema) as an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class Application(BaseModel):
    """A panel application as the public sends it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    email: StrictStr = Field(max_length=254, json_schema_extra={"format": "email"})
    specialty: StrictStr = Field(min_length=1, max_length=200, json_schema_extra=_NON_BLANK)
    years_experience: StrictInt = Field(ge=0, le=80)
    statement: StrictStr = Field(min_length=1, max_length=5000, json_schema_extra=_NON_BLANK)

    _years = field_validator("years_experience", mode="before")(_whole)


def apply(store: Store, payload: Mapping[str, Any], *, actor: Actor) -> Created:
    """Apply to the panel: `{"id": …}`. An email that applied already gets an answer of the same
    shape, with an id that names nothing, and nothing is stored: the answer never says who applied."""
    del actor  # anyone may apply
    form = _validated(Application, dict(payload))
    email = check_email(form.email)
    specialty = _text(form.specialty, "specialty", max_length=200)
    statement = _text(form.statement, "statement", max_length=5000)
    application_id = secrets.token_hex(8)
    PanelRepo(store).add_application(application_id=application_id, email=email, specialty=specialty,
                                     years_experience=form.years_experience, statement=statement)
    return {"id": application_id}


def application_view(row: StoredApplication) -> ApplicationView:
    """An application as the staff see it: who, what, and the decision in force."""
    decision = row.decision
    reviewed = row.reviewed_at
    return {
        "id": row.id,
        "email": row.email,
        "specialty": row.specialty,
        "years_experience": row.years_experience,
        "statement": row.statement,
        "applied_at": row.created_at.isoformat(),
        "status": decision or "pending",
        "reviewed_at": reviewed.isoformat() if reviewed is not None else None,
        "reviewed_by": (row.reviewer_email or "operator") if decision else None,
    }


def applications(store: Store, *, actor: Actor) -> list[ApplicationView]:
    """Every application, oldest first (the staff only: it names applicants)."""
    require_staff(actor, "read panel applications", "application")
    return [application_view(r) for r in PanelRepo(store).applications()]


def review(store: Store, application_id: str, decision: str, *, actor: Actor, by: str | None = None) -> ApplicationView:
    """Approve or reject an application (`decision` `approve` | `reject`), recorded with the
    reviewing admin and the time; the latest decision is in force (a panelist may be rejected later,
    and their scorecards then stop counting)."""
    require_staff(actor, "decide panel applications", "application")
    if decision not in DECISIONS:
        raise Invalid("a decision is approve or reject", "decision", value=decision)
    try:
        return application_view(PanelRepo(store).add_review(application_id, DECISIONS[decision], by))
    except NotFound:
        # an email that applied again was answered with an id naming nothing (the answer never
        # says who applied): say so, and where the real application is
        raise NotFound("no application has this id; an email that applies again is answered with an id that "
                       "names nothing, so decide its first application, listed with its email among the "
                       "applications", "application", value=application_id) from None


# -- ingest -----------------------------------------------------------------------------------


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RegisterModel(_Step):
    action: Literal["register-model"]
    slug: StrictStr = Field(max_length=64)
    name: StrictStr = Field(max_length=200)
    vendor: StrictStr = Field(max_length=200)


class RegisterEnvironment(_Step):
    action: Literal["register-environment"]
    slug: StrictStr = Field(max_length=64)
    name: StrictStr = Field(max_length=200)
    spec: StrictStr = Field(max_length=20000, description=(
        "what the panelists are told the environment is: the task, the world, and what a good run does "
        "(plain text or Markdown, up to 20,000 characters)"))


class CreateRun(_Step):
    action: Literal["create-run"]
    model: StrictStr = Field(max_length=64)
    environment: StrictStr = Field(max_length=64)
    artifact_url: StrictStr = Field(max_length=2048)
    assay_run: StrictStr | None = Field(None, max_length=64, description=(
        "the Assay run this panel run scores (its id or a unique prefix), so the judge's trait scores "
        "and the panel's medians can be compared on it (`assay agreement`)"))


class RecordScore(_Step):
    action: Literal["record-score"]
    run: StrictStr = Field(max_length=64)
    panelist_email: StrictStr = Field(max_length=254)
    ratings: dict[StrictStr, StrictInt | StrictFloat]
    comment: StrictStr = Field("", max_length=20000)
    minutes: StrictInt = Field(0, ge=0, le=100_000)

    _minutes = field_validator("minutes", mode="before")(_whole)


class FinalizeRun(_Step):
    action: Literal["finalize-run"]
    run: StrictStr = Field(max_length=64)


class RecordPreference(_Step):
    action: Literal["record-preference"]
    run_a: StrictStr = Field(max_length=64)
    run_b: StrictStr = Field(max_length=64)
    panelist_email: StrictStr = Field(max_length=254)
    preferred: Literal["a", "b", "tie"]


IngestStep = Annotated[Union[RegisterModel, RegisterEnvironment, CreateRun, RecordScore, FinalizeRun,
                             RecordPreference],
                       Field(discriminator="action")]
"""Every step, told apart by `action` (its JSON schema is what `/openapi.json` documents)."""
STEPS: dict[str, type[_Step]] = {"register-model": RegisterModel, "register-environment": RegisterEnvironment,
                                 "create-run": CreateRun, "record-score": RecordScore, "finalize-run": FinalizeRun,
                                 "record-preference": RecordPreference}
ACTIONS = tuple(STEPS)


def ingest(store: Store, payload: Mapping[str, Any], *, actor: Actor, by: str | None = None) -> IngestResult:
    """One step of the ingest state machine, chosen by `payload["action"]`, its fields beside it."""
    require_staff(actor, "ingest benchmark data", "action")
    if not isinstance(payload, Mapping):
        raise Invalid("an ingest step is a JSON object with an action", "action")
    action = payload.get("action")
    if action not in ACTIONS:
        raise Invalid(f"action must be one of: {', '.join(ACTIONS)}", "action",
                      value=str(action) if isinstance(action, str) else None)
    step = _validated(STEPS[action], dict(payload))
    if isinstance(step, RegisterModel):
        return register_model(store, step.slug, step.name, step.vendor, actor=actor)
    if isinstance(step, RegisterEnvironment):
        return register_environment(store, step.slug, step.name, step.spec, actor=actor)
    if isinstance(step, CreateRun):
        return create_run(store, step.model, step.environment, step.artifact_url, actor=actor, by=by,
                          assay_run=step.assay_run)
    if isinstance(step, RecordScore):
        return record_score(store, step.run, step.panelist_email, step.ratings, step.comment, step.minutes,
                            actor=actor, by=by)
    if isinstance(step, RecordPreference):
        return record_preference(store, step.run_a, step.run_b, step.panelist_email, step.preferred,
                                 actor=actor, by=by)
    return finalize_run(store, step.run, actor=actor, by=by)


def register_model(store: Store, slug: str, name: str, vendor: str, *, actor: Actor) -> ModelRegistered:
    require_staff(actor, "register models", "slug")
    row = PanelRepo(store).add_model(slug=_slug(slug, "slug"), name=_text(name, "name", max_length=200),
                                     vendor=_text(vendor, "vendor", max_length=200))
    return {"model": row.slug, "name": row.name, "vendor": row.vendor}


def register_environment(store: Store, slug: str, name: str, spec: str, *, actor: Actor) -> EnvironmentRegistered:
    require_staff(actor, "register environments", "slug")
    row = PanelRepo(store).add_environment(slug=_slug(slug, "slug"), name=_text(name, "name", max_length=200),
                                           spec=_text(spec, "spec", max_length=20000))
    return {"environment": row.slug, "name": row.name}


def _url(value: str) -> str:
    value = _text(value, "artifact_url", max_length=2048)
    if not re.match(r"^https?://[^\s/$.?#][^\s]*$", value, re.IGNORECASE):
        raise Invalid("an artifact URL is an http(s) URL", "artifact_url", value=value)
    return value


def run_view(row: PanelRun) -> RunView:
    return {"run": row.id, "model": row.model, "environment": row.environment,
            "artifact_url": row.artifact_url, "status": "scored" if row.finalized_at is not None else "pending",
            "n_scorecards": row.n_scorecards, "created_at": row.created_at.isoformat(),
            "assay_run": row.assay_run}


def create_run(store: Store, model: str, environment: str, artifact_url: str, *, actor: Actor,
               by: str | None = None, assay_run: str | None = None) -> RunCreated:
    """A new `pending` run of `model` on `environment`; with `assay_run`, linked to the recorded
    Assay run it scores (its full id or a unique prefix; refused, with the field `assay_run`, when
    it names no recorded run or more than one)."""
    require_staff(actor, "create runs", "run")
    if assay_run is not None:
        assay_run = _text(assay_run, "assay_run", max_length=64)
    row = PanelRepo(store).add_run(run_id=secrets.token_hex(8), model=_slug(model, "model"),
                                   environment=_slug(environment, "environment"), artifact_url=_url(artifact_url),
                                   by_admin=by, assay_run=assay_run)
    out: RunCreated = {"run": row.id, "status": "pending"}
    if row.assay_run is not None:
        out["assay_run"] = row.assay_run
    return out


def _ratings(store: Store, ratings: Mapping[str, Any]) -> dict[str, float]:
    if not ratings:
        raise Invalid("a scorecard rates at least one category", "ratings")
    known = {c["slug"] for c in categories(store)}
    clean: dict[str, float] = {}
    for slug, value in ratings.items():
        if slug not in known:
            raise Invalid("not an evaluation category (see /api/benchmark/categories)", "ratings", value=slug)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not RATING_MIN <= value <= RATING_MAX:
            raise Invalid(f"a rating is a number from {RATING_MIN} to {RATING_MAX}", "ratings", value=f"{slug}: {value}")
        clean[slug] = float(value)
    return clean


def panelist_refusal() -> Forbidden:
    """The one refusal for anyone who is not an approved panelist: pending, rejected or unknown."""
    return Forbidden("only an approved panelist may hold a scorecard", "panelist_email")


def record_score(store: Store, run: str, panelist_email: str, ratings: Mapping[str, Any], comment: str = "",
                 minutes: int = 0, *, actor: Actor, by: str | None = None) -> ScoreRecorded:
    """Record an approved panelist's scorecard for a pending run; the latest one per panelist counts."""
    require_staff(actor, "record scorecards", "run")
    clean = _ratings(store, ratings)
    comment = _text(comment, "comment", max_length=20000, required=False)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 0:
        raise Invalid("minutes is a whole number of at least 0", "minutes")
    repo = PanelRepo(store)
    found = repo.run(run)
    if found is None:
        raise NotFound("no such run", "run", value=run)
    try:
        email = check_email(panelist_email)
    except Invalid:
        raise panelist_refusal() from None
    panelist = repo.approved_panelist(email)
    if panelist is None:
        raise panelist_refusal()
    card = repo.add_scorecard(run_id=found.id, panelist_id=panelist.id, ratings=clean, comment=comment,
                              minutes=minutes, by_admin=by)
    return {"run": found.id, "scorecard": card, "status": "pending", "ratings": clean}


def finalize_run(store: Store, run: str, *, actor: Actor, by: str | None = None) -> RunFinalized:
    """Mark a run `scored`: from now on its scorecards count on the board and no more are taken."""
    require_staff(actor, "finalize runs", "run")
    PanelRepo(store).finalize(run, by)
    return {"run": run, "status": "scored"}


def record_preference(store: Store, run_a: str, run_b: str, panelist_email: str, preferred: str, *,
                      actor: Actor, by: str | None = None) -> PreferenceRecorded:
    """Record an approved panelist's preference between two distinct runs of one environment;
    the latest one per (panelist, unordered pair) counts on the pairwise board."""
    require_staff(actor, "record preferences", "run_a")
    if preferred not in ("a", "b", "tie"):
        raise Invalid("preferred is a, b or tie", "preferred", value=str(preferred))
    repo = PanelRepo(store)
    first = repo.run(run_a)
    if first is None:
        raise NotFound("no such run", "run_a", value=run_a)
    second = repo.run(run_b)
    if second is None:
        raise NotFound("no such run", "run_b", value=run_b)
    if first.id == second.id:
        raise Invalid("a run is not compared with itself: run_a and run_b must differ", "run_b", value=run_b)
    if first.environment != second.environment:
        raise Invalid(f"both runs must be on the same environment (run_a is on {first.environment}, "
                      f"run_b on {second.environment})", "run_b", value=run_b)
    try:
        email = check_email(panelist_email)
    except Invalid:
        raise panelist_refusal() from None
    panelist = repo.approved_panelist(email)
    if panelist is None:
        raise panelist_refusal()
    preference = repo.add_preference(panelist_id=panelist.id, run_a=first.id, run_b=second.id,
                                     preferred=preferred, by_admin=by)
    return {"preference": preference, "run_a": first.id, "run_b": second.id, "preferred": preferred}


def runs(store: Store, *, actor: Actor) -> list[RunView]:
    """Every run with its status (the staff's view of the pipeline)."""
    require_staff(actor, "list runs", "run")
    return [run_view(r) for r in PanelRepo(store).runs()]


def scorecards(store: Store, run: str, *, actor: Actor) -> list[ScorecardView]:
    """A run's scorecards, history included (the staff only: they name panelists)."""
    require_staff(actor, "read scorecards", "run")
    repo = PanelRepo(store)
    if repo.run(run) is None:
        raise NotFound("no such run", "run", value=run)
    by_id = {a.id: a.email for a in repo.applications()}
    return [{"scorecard": c.id, "panelist_email": by_id.get(c.panelist_id), "ratings": c.ratings,
             "comment": c.comment, "minutes": c.minutes, "recorded_at": c.created_at.isoformat()}
            for c in repo.scorecards(run)]


# -- the board --------------------------------------------------------------------------------


def quorum(store: Store) -> int:
    return int(platform_config.get(store, platform_config.PANEL_QUORUM)["min_panelists"])


def _figure(value: float) -> float:
    return round(float(value), PLACES)


def board(store: Store, *, actor: Actor) -> PanelBoard:
    """The public panel board: `ranked` models (quorum met) with their figures, and `provisional`,
    only a count. Panelists appear by specialty and years of experience only."""
    del actor  # the board is public; nothing on it names a panelist
    need = quorum(store)
    repo = PanelRepo(store)
    order = {c["slug"]: i for i, c in enumerate(categories(store))}
    by_model: dict[int, dict[str, float]] = {}
    for mean in repo.model_categories():
        by_model.setdefault(mean.model_id, {})[mean.category] = _figure(mean.mean_rating)
    panelists: dict[int, list[PanelistView]] = {}
    for p in repo.model_panelists():
        panelists.setdefault(p.model_id, []).append({"specialty": p.specialty, "years_experience": p.years_experience})
    ranked: list[PanelEntry] = []
    provisional = 0
    counted: list[tuple[BoardRow, dict[str, float]]] = []
    for row in repo.board_rows():
        if row.n_panelists < need:
            provisional += 1
            continue
        scores = by_model.get(row.model_id, {})
        counted.append((row, {k: scores[k] for k in sorted(scores, key=lambda s: (order.get(s, len(order)), s))}))
    if counted:
        cards = _counted_cards(repo)
        for row, category_scores in counted:
            found = _intervals(cards.get(row.model_id, {}), row)
            ranked.append({
                "slug": row.slug,
                "name": row.name,
                "vendor": row.vendor,
                "n_runs": row.n_runs,
                "n_panelists": row.n_panelists,
                "overall_score": _figure(row.overall_rating),
                "category_scores": category_scores,
                "panelists": sorted(panelists.get(row.model_id, []),
                                    key=lambda p: (p["specialty"], p["years_experience"])),
                "overall_ci": None if found.overall is None else _interval(found.overall),
                "category_ci": {c: _interval(found.categories[c]) for c in category_scores if c in found.categories},
                "ci_reason": found.reason,
                "rank": None,  # None: no interval, so no rank (`ci_reason` says why)
            })
    ranked.sort(key=lambda e: (-e["overall_score"], e["slug"]))
    placed = [(e["slug"], e["overall_ci"]) for e in ranked if e["overall_ci"] is not None]
    ranks = dict(zip((slug for slug, _ in placed), statistical_ranks([(ci[0], ci[1]) for _, ci in placed]),
                     strict=True))
    for entry in ranked:
        entry["rank"] = ranks.get(entry["slug"])
    return {"ranked": ranked, "provisional": {"count": provisional}, "quorum": need,
            "ranking": RANKING.format(quorum=need), "pairwise": pairwise(repo)}


def _interval(lo_hi: tuple[float, float]) -> list[float]:
    return [_figure(lo_hi[0]), _figure(lo_hi[1])]


#: {model id: {run id: {card id: {category: rating}}}} over the ratings that count.
_Cards = dict[int, dict[str, dict[int, dict[str, float]]]]


def _counted_cards(repo: PanelRepo) -> _Cards:
    """The very ratings the board's views count (`panel_counted_cards`), by model, run and card."""
    cards: _Cards = {}
    for r in repo.counted_ratings():
        cards.setdefault(r.model_id, {}).setdefault(r.run_id, {}).setdefault(r.card_id, {})[r.category] = r.rating
    return cards


def _intervals(runs_of: dict[str, dict[int, dict[str, float]]], row: BoardRow) -> panel_stats.PanelIntervals:
    """A ranked model's intervals: the seeded two-stage bootstrap over its counted ratings; the
    overall one None and no category one, with the reason in words, where the data cannot support one."""
    found = panel_stats.bootstrap_panel([list(by_card.values()) for _, by_card in sorted(runs_of.items())],
                                        panelists=row.n_panelists, seed=panel_stats.seed_for(row.slug))
    if found is None:  # a ranked model always has counted ratings; never a bare number anyway
        found = panel_stats.PanelIntervals(None, {}, "no counted rating: no interval")
    return found


def pairwise(repo: PanelRepo) -> PairwiseBoard:
    """The Bradley–Terry board: `ranked` [{slug, name, strength, ci, scale, rank, n_comparisons, (note)}]
    and `provisional` {count}, over the latest preference per (approved panelist, run pair)."""
    rows = [panel_stats.PreferenceRow(id=r.id, panelist=r.panelist_id, run_a=r.run_a, run_b=r.run_b,
                                      model_a=r.model_a, model_b=r.model_b, preferred=r.preferred)
            for r in repo.counted_preferences()]
    entries, provisional = panel_stats.pairwise_board(panel_stats.latest_preferences(rows))
    names = {m.slug: m.name for m in repo.models()}
    ranked: list[PairwiseEntry] = []
    for e in entries:
        out: PairwiseEntry = {
            "slug": e["model"], "name": names.get(e["model"], e["model"]),
            "strength": round(e["strength"], 3) if e["strength"] is not None else None,
            "ci": [round(v, 3) for v in e["ci"]] if e["ci"] is not None else None,
            "scale": e["scale"], "rank": e["rank"], "n_comparisons": e["n_comparisons"],
        }
        if "note" in e:
            out["note"] = e["note"]
        ranked.append(out)
    return {"ranked": ranked, "provisional": {"count": len(provisional)},
            "quorum": panel_stats.PAIRWISE_QUORUM,
            "ranking": PAIRWISE_RANKING.format(quorum=panel_stats.PAIRWISE_QUORUM)}
