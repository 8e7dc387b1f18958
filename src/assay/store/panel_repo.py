"""Reads and appends for the human panel: categories, applications and reviews, models,
environments, runs, scorecards, and the panel board's rows.

Only INSERTs, each write one transaction; a refusal that depends on what is stored (a run that is
scored already, a run without scorecards) is re-checked inside that transaction under a lock on
the run (PostgreSQL: an advisory transaction lock; SQLite: BEGIN IMMEDIATE), so two writers
cannot both slip past it. The board's numbers are read from the panel views and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from assay.errors import Conflict, DomainError, NotFound
from assay.store.panel_schema import (
    admins,
    eval_categories,
    panel_applications,
    panel_board,
    panel_counted_cards,
    panel_current_decisions,
    panel_environments,
    panel_model_categories,
    panel_models,
    panel_preferences,
    panel_ratings,
    panel_reviews,
    panel_run_finalizations,
    panel_run_links,
    panel_run_medians,
    panel_runs,
    panel_scorecards,
)
from assay.store.repo import Repository, resolve_prefix
from assay.store.board_schema import submissions
from assay.store.schema import planned_runs, utcnow
from assay.store.schema import runs as assay_runs


# -- read models ----------------------------------------------------------------------------------
# One frozen dataclass per read, the column names as field names; the service reads them as they
# are. Numbers from the views are ints and floats on both backends (converted here, once).


@dataclass(frozen=True, slots=True)
class StoredCategory:
    """An evaluation category (`eval_categories`), `position` its place in the taxonomy."""

    slug: str
    name: str
    description: str
    position: int


@dataclass(frozen=True, slots=True)
class StoredApplication:
    """A panel application with the decision in force (`decision` None: pending) and who made it
    (`by_admin` None and `reviewer_email` None: the operator, or no decision)."""

    id: str
    email: str
    specialty: str
    years_experience: int
    statement: str
    created_at: datetime
    decision: str | None
    reviewed_at: datetime | None
    by_admin: str | None
    reviewer_email: str | None


@dataclass(frozen=True, slots=True)
class PanelModel:
    """A registered model (`panel_models`)."""

    id: int
    slug: str
    name: str
    vendor: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PanelEnvironment:
    """A registered environment (`panel_environments`); `spec` is what the panelists are told."""

    id: int
    slug: str
    name: str
    spec: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PanelRun:
    """A run with its model's and environment's slugs, `finalized_at` (None while pending), how many
    scorecards it holds (history included) and the Assay run it scored (None: it names none)."""

    id: str
    artifact_url: str
    created_at: datetime
    model: str
    environment: str
    finalized_at: datetime | None
    n_scorecards: int
    assay_run: str | None


@dataclass(frozen=True, slots=True)
class Scorecard:
    """A stored scorecard (`panel_scorecards`) with its ratings {category: 0..10}."""

    id: int
    run_id: str
    panelist_id: str
    comment: str
    minutes: int
    by_admin: str | None
    created_at: datetime
    ratings: dict[str, float]


@dataclass(frozen=True, slots=True)
class CountedPreference:
    """A preference by a panelist approved now, with the slugs of both runs' models."""

    id: int
    panelist_id: str
    run_a: str
    run_b: str
    preferred: str
    model_a: str
    model_b: str


@dataclass(frozen=True, slots=True)
class CountedRating:
    """One rating of a scorecard that counts (`panel_counted_cards`)."""

    model_id: int
    run_id: str
    card_id: int
    category: str
    rating: float


@dataclass(frozen=True, slots=True)
class BoardRow:
    """`panel_board`: per model with any counted scorecard, its runs, panelists and overall mean."""

    model_id: int
    slug: str
    name: str
    vendor: str
    n_runs: int
    n_panelists: int
    overall_rating: float


@dataclass(frozen=True, slots=True)
class ModelCategory:
    """`panel_model_categories`: per model and category, the mean of its runs' medians."""

    model_id: int
    category: str
    n_runs: int
    mean_rating: float


@dataclass(frozen=True, slots=True)
class LinkedMedian:
    """A category median of a scored panel run linked to an Assay run of a release's submission."""

    assay_run: str
    submission_id: str
    panel_run: str
    created_at: datetime
    category: str
    n_panelists: int
    median_rating: float


@dataclass(frozen=True, slots=True)
class ModelPanelist:
    """A distinct panelist whose scorecards count for a model: specialty and experience only."""

    model_id: int
    specialty: str
    years_experience: int


def _application(row: sa.Row[Any]) -> StoredApplication:
    return StoredApplication(row.id, row.email, row.specialty, row.years_experience, row.statement, row.created_at,
                             row.decision, row.reviewed_at, row.by_admin, row.reviewer_email)


def _run(row: sa.Row[Any]) -> PanelRun:
    return PanelRun(row.id, row.artifact_url, row.created_at, row.model, row.environment, row.finalized_at,
                    int(row.n_scorecards), row.assay_run)


class PanelRepo(Repository):
    """The panel's half of the store, over the same engine."""

    LOCKS = "panel"

    # -- categories -----------------------------------------------------------------------------

    def category_slugs(self) -> set[str]:
        with self.read() as conn:
            return {str(s) for s in conn.execute(sa.select(eval_categories.c.slug)).scalars()}

    def seed_categories(self, rows: Sequence[StoredCategory]) -> int:
        """Insert the categories whose slug is not stored yet (a stored one is never changed); how
        many were added."""
        with self.write() as conn:
            self.lock(conn, "categories", "seed")
            have = {str(s) for s in conn.execute(sa.select(eval_categories.c.slug)).scalars()}
            missing = [r for r in rows if r.slug not in have]
            if missing:
                now = utcnow()
                conn.execute(sa.insert(eval_categories), [{**asdict(r), "created_at": now} for r in missing])
        return len(missing)

    def categories(self) -> list[StoredCategory]:
        with self.read() as conn:
            rows = conn.execute(sa.select(eval_categories.c.slug, eval_categories.c.name,
                                          eval_categories.c.description, eval_categories.c.position)
                                .order_by(eval_categories.c.position, eval_categories.c.slug)).all()
        return [StoredCategory(r.slug, r.name, r.description, int(r.position)) for r in rows]

    # -- applications and reviews ---------------------------------------------------------------

    def add_application(self, *, application_id: str, email: str, specialty: str, years_experience: int,
                        statement: str) -> bool:
        """Store an application; False (and nothing stored) when this email has applied already."""
        try:
            with self.write() as conn:
                self.lock(conn, "application", email)
                if conn.execute(sa.select(panel_applications.c.id)
                                .where(panel_applications.c.email == email)).first() is not None:
                    return False
                conn.execute(sa.insert(panel_applications).values(
                    id=application_id, email=email, specialty=specialty, years_experience=years_experience,
                    statement=statement, created_at=utcnow()))
        except sa.exc.IntegrityError:  # the unique email, should a concurrent application win
            return False
        return True

    @staticmethod
    def _applications() -> sa.Select[Any]:
        reviewer = admins.alias("reviewer")
        return (sa.select(panel_applications, panel_current_decisions.c.decision,
                          panel_current_decisions.c.reviewed_at, panel_current_decisions.c.by_admin,
                          reviewer.c.email.label("reviewer_email"))
                .select_from(panel_applications
                             .outerjoin(panel_current_decisions,
                                        panel_current_decisions.c.application_id == panel_applications.c.id)
                             .outerjoin(reviewer, reviewer.c.id == panel_current_decisions.c.by_admin)))

    def applications(self) -> list[StoredApplication]:
        """Every application, oldest first, with the decision in force (None: pending)."""
        with self.read() as conn:
            rows = conn.execute(self._applications().order_by(panel_applications.c.created_at,
                                                              panel_applications.c.id)).all()
        return [_application(r) for r in rows]

    def application(self, application_id: str) -> StoredApplication | None:
        with self.read() as conn:
            row = conn.execute(self._applications().where(panel_applications.c.id == application_id)).first()
        return _application(row) if row is not None else None

    def approved_panelist(self, email: str) -> StoredApplication | None:
        """The application of this email when its decision in force is `approved`, else None."""
        with self.read() as conn:
            row = conn.execute(self._applications().where(panel_applications.c.email == email,
                                                          panel_current_decisions.c.decision == "approved")).first()
        return _application(row) if row is not None else None

    def add_review(self, application_id: str, decision: str, by_admin: str | None) -> StoredApplication:
        with self.write() as conn:
            if conn.execute(sa.select(panel_applications.c.id)
                            .where(panel_applications.c.id == application_id)).first() is None:
                raise NotFound("no such application", "application", value=application_id)
            conn.execute(sa.insert(panel_reviews).values(application_id=application_id, decision=decision,
                                                         by_admin=by_admin, reviewed_at=utcnow()))
        found = self.application(application_id)
        assert found is not None
        return found

    # -- models, environments, runs -------------------------------------------------------------

    def _add_named(self, table: sa.Table, noun: str, slug: str, values: dict[str, str]) -> sa.Row[Any]:
        try:
            with self.write() as conn:
                self.lock(conn, noun, slug)
                if conn.execute(sa.select(table.c.id).where(table.c.slug == slug)).first() is not None:
                    raise Conflict(f"a {noun} with this slug is registered already", "slug", value=slug)
                conn.execute(sa.insert(table).values(slug=slug, **values, created_at=utcnow()))
                row = conn.execute(sa.select(table).where(table.c.slug == slug)).one()
        except sa.exc.IntegrityError:
            raise Conflict(f"a {noun} with this slug is registered already", "slug", value=slug) from None
        return row

    def add_model(self, *, slug: str, name: str, vendor: str) -> PanelModel:
        row = self._add_named(panel_models, "model", slug, {"name": name, "vendor": vendor})
        return PanelModel(row.id, row.slug, row.name, row.vendor, row.created_at)

    def add_environment(self, *, slug: str, name: str, spec: str) -> PanelEnvironment:
        row = self._add_named(panel_environments, "environment", slug, {"name": name, "spec": spec})
        return PanelEnvironment(row.id, row.slug, row.name, row.spec, row.created_at)

    def add_run(self, *, run_id: str, model: str, environment: str, artifact_url: str,
                by_admin: str | None, assay_run: str | None = None) -> PanelRun:
        """Append a pending run; with `assay_run` (a recorded Assay run's id or unique prefix, the
        store's one prefix rule) also its link to that run, in the same transaction."""
        with self.write() as conn:
            model_id = conn.execute(sa.select(panel_models.c.id).where(panel_models.c.slug == model)).scalar()
            if model_id is None:
                raise NotFound("no such model (register it first)", "model", value=model)
            env_id = conn.execute(sa.select(panel_environments.c.id)
                                  .where(panel_environments.c.slug == environment)).scalar()
            if env_id is None:
                raise NotFound("no such environment (register it first)", "environment", value=environment)
            linked = self._assay_run(conn, assay_run) if assay_run is not None else None
            now = utcnow()
            conn.execute(sa.insert(panel_runs).values(id=run_id, model_id=model_id, environment_id=env_id,
                                                      artifact_url=artifact_url, by_admin=by_admin,
                                                      created_at=now))
            if linked is not None:
                conn.execute(sa.insert(panel_run_links).values(panel_run_id=run_id, assay_run_id=linked,
                                                               created_at=now))
        found = self.run(run_id)
        assert found is not None
        return found

    @staticmethod
    def _assay_run(conn: sa.Connection, ident: str) -> str:
        """The full id of the recorded Assay run `ident` names (id or unique prefix); refused with
        the field `assay_run` when it names none or is ambiguous."""
        try:
            found = resolve_prefix(conn, assay_runs.c.run_id, ident, "run")
        except DomainError as exc:
            raise type(exc)(exc.message, "assay_run", value=exc.value) from None
        if found is None:
            raise NotFound("no recorded Assay run has this id", "assay_run", value=ident)
        return found

    @staticmethod
    def _runs() -> sa.Select[Any]:
        n_cards = (sa.select(sa.func.count()).select_from(panel_scorecards)
                   .where(panel_scorecards.c.run_id == panel_runs.c.id).scalar_subquery())
        return (sa.select(panel_runs.c.id, panel_runs.c.artifact_url, panel_runs.c.created_at,
                          panel_models.c.slug.label("model"), panel_environments.c.slug.label("environment"),
                          panel_run_finalizations.c.finalized_at, n_cards.label("n_scorecards"),
                          panel_run_links.c.assay_run_id.label("assay_run"))
                .select_from(panel_runs
                             .join(panel_models, panel_models.c.id == panel_runs.c.model_id)
                             .join(panel_environments, panel_environments.c.id == panel_runs.c.environment_id)
                             .outerjoin(panel_run_finalizations, panel_run_finalizations.c.run_id == panel_runs.c.id)
                             .outerjoin(panel_run_links, panel_run_links.c.panel_run_id == panel_runs.c.id)))

    def run(self, run_id: str) -> PanelRun | None:
        """A run with its model and environment slugs, `finalized_at` (None while pending), how
        many scorecards it holds (history included) and the Assay run it scored (`assay_run`, or None)."""
        with self.read() as conn:
            row = conn.execute(self._runs().where(panel_runs.c.id == run_id)).first()
        return _run(row) if row is not None else None

    def runs(self) -> list[PanelRun]:
        with self.read() as conn:
            rows = conn.execute(self._runs().order_by(panel_runs.c.created_at, panel_runs.c.id)).all()
        return [_run(r) for r in rows]

    def models(self) -> list[PanelModel]:
        with self.read() as conn:
            return [PanelModel(r.id, r.slug, r.name, r.vendor, r.created_at)
                    for r in conn.execute(sa.select(panel_models).order_by(panel_models.c.slug))]

    def environments(self) -> list[PanelEnvironment]:
        with self.read() as conn:
            return [PanelEnvironment(r.id, r.slug, r.name, r.spec, r.created_at)
                    for r in conn.execute(sa.select(panel_environments).order_by(panel_environments.c.slug))]

    def _pending_run(self, conn: sa.Connection, run_id: str) -> None:
        self.lock(conn, "run", run_id)
        if conn.execute(sa.select(panel_runs.c.id).where(panel_runs.c.id == run_id)).first() is None:
            raise NotFound("no such run", "run", value=run_id)
        if conn.execute(sa.select(panel_run_finalizations.c.run_id)
                        .where(panel_run_finalizations.c.run_id == run_id)).first() is not None:
            raise Conflict("the run is scored already; its scorecards are final", "run", value=run_id)

    def add_scorecard(self, *, run_id: str, panelist_id: str, ratings: Mapping[str, float], comment: str,
                      minutes: int, by_admin: str | None) -> int:
        """Append a scorecard and its ratings to a pending run; its id."""
        with self.write() as conn:
            self._pending_run(conn, run_id)
            card_id = conn.execute(sa.insert(panel_scorecards).values(
                run_id=run_id, panelist_id=panelist_id, comment=comment, minutes=minutes, by_admin=by_admin,
                created_at=utcnow()).returning(panel_scorecards.c.id)).scalar_one()
            conn.execute(sa.insert(panel_ratings),
                         [{"card_id": card_id, "category": c, "rating": float(r)} for c, r in ratings.items()])
        return int(card_id)

    def finalize(self, run_id: str, by_admin: str | None) -> None:
        """Mark a pending run scored; a run without any scorecard is refused."""
        with self.write() as conn:
            self._pending_run(conn, run_id)
            if conn.execute(sa.select(panel_scorecards.c.id).where(panel_scorecards.c.run_id == run_id)
                            .limit(1)).first() is None:
                raise Conflict("a run with no scorecards cannot be scored", "run", value=run_id)
            conn.execute(sa.insert(panel_run_finalizations).values(run_id=run_id, by_admin=by_admin,
                                                                   finalized_at=utcnow()))

    def scorecards(self, run_id: str) -> list[Scorecard]:
        """Every scorecard of a run, history included, oldest first, with its ratings."""
        with self.read() as conn:
            cards = conn.execute(sa.select(panel_scorecards).where(panel_scorecards.c.run_id == run_id)
                                 .order_by(panel_scorecards.c.id)).all()
            ratings = conn.execute(sa.select(panel_ratings).where(
                panel_ratings.c.card_id.in_([c.id for c in cards]))).all() if cards else []
        by_card: dict[int, dict[str, float]] = {}
        for r in ratings:
            by_card.setdefault(int(r.card_id), {})[str(r.category)] = float(r.rating)
        return [Scorecard(c.id, c.run_id, c.panelist_id, c.comment, c.minutes, c.by_admin, c.created_at,
                          by_card.get(int(c.id), {})) for c in cards]

    # -- pairwise preferences -------------------------------------------------------------------

    def add_preference(self, *, panelist_id: str, run_a: str, run_b: str, preferred: str,
                       by_admin: str | None) -> int:
        """Append a preference between two runs (checked by the service: distinct, one environment;
        runs are never removed, so what was checked stays true); its id."""
        with self.write() as conn:
            return int(conn.execute(sa.insert(panel_preferences).values(
                panelist_id=panelist_id, run_a=run_a, run_b=run_b, preferred=preferred, by_admin=by_admin,
                created_at=utcnow()).returning(panel_preferences.c.id)).scalar_one())

    def counted_preferences(self) -> list[CountedPreference]:
        """Every preference by a panelist approved now, history included, oldest first, with the
        slugs of both runs' models (the latest per panelist and pair is picked by `stats.panel`)."""
        ra, rb = panel_runs.alias("ra"), panel_runs.alias("rb")
        ma, mb = panel_models.alias("ma"), panel_models.alias("mb")
        query = (sa.select(panel_preferences.c.id, panel_preferences.c.panelist_id, panel_preferences.c.run_a,
                           panel_preferences.c.run_b, panel_preferences.c.preferred,
                           ma.c.slug.label("model_a"), mb.c.slug.label("model_b"))
                 .select_from(panel_preferences
                              .join(ra, ra.c.id == panel_preferences.c.run_a)
                              .join(rb, rb.c.id == panel_preferences.c.run_b)
                              .join(ma, ma.c.id == ra.c.model_id)
                              .join(mb, mb.c.id == rb.c.model_id)
                              .join(panel_current_decisions,
                                    panel_current_decisions.c.application_id == panel_preferences.c.panelist_id))
                 .where(panel_current_decisions.c.decision == "approved")
                 .order_by(panel_preferences.c.id))
        with self.read() as conn:
            return [CountedPreference(int(r.id), str(r.panelist_id), str(r.run_a), str(r.run_b), str(r.preferred),
                                      str(r.model_a), str(r.model_b)) for r in conn.execute(query)]

    # -- the board ------------------------------------------------------------------------------

    def counted_ratings(self) -> list[CountedRating]:
        """Every rating of a scorecard that counts (`panel_counted_cards`): model, run, card,
        category, rating; what the board's medians are taken over, for its bootstrap."""
        query = (sa.select(panel_counted_cards.c.model_id, panel_counted_cards.c.run_id,
                           panel_counted_cards.c.card_id, panel_ratings.c.category, panel_ratings.c.rating)
                 .select_from(panel_counted_cards.join(panel_ratings,
                                                       panel_ratings.c.card_id == panel_counted_cards.c.card_id))
                 .order_by(panel_counted_cards.c.model_id, panel_counted_cards.c.run_id,
                           panel_counted_cards.c.card_id, panel_ratings.c.category))
        with self.read() as conn:
            return [CountedRating(int(r.model_id), str(r.run_id), int(r.card_id), str(r.category), float(r.rating))
                    for r in conn.execute(query)]

    def board_rows(self) -> list[BoardRow]:
        """`panel_board`: per model with any counted scorecard, its runs, panelists and overall mean."""
        with self.read() as conn:
            return [BoardRow(int(r.model_id), r.slug, r.name, r.vendor, int(r.n_runs), int(r.n_panelists),
                             float(r.overall_rating))
                    for r in conn.execute(sa.select(panel_board).order_by(panel_board.c.slug))]

    def model_categories(self) -> list[ModelCategory]:
        with self.read() as conn:
            return [ModelCategory(int(r.model_id), str(r.category), int(r.n_runs), float(r.mean_rating))
                    for r in conn.execute(sa.select(panel_model_categories))]

    def linked_medians(self, release_id: int) -> list[LinkedMedian]:
        """Per scored panel run linked to a run of a submission to release `release_id`, and per
        category: `assay_run`, `submission_id`, `panel_run`, `created_at` (the panel run's),
        `n_panelists` and `median_rating`, from `panel_run_medians` (counted scorecards only)."""
        query = (sa.select(panel_run_links.c.assay_run_id.label("assay_run"),
                           planned_runs.c.batch_id.label("submission_id"),
                           panel_run_medians.c.run_id.label("panel_run"), panel_runs.c.created_at,
                           panel_run_medians.c.category, panel_run_medians.c.n_panelists,
                           panel_run_medians.c.median_rating)
                 .select_from(panel_run_medians
                              .join(panel_run_links, panel_run_links.c.panel_run_id == panel_run_medians.c.run_id)
                              .join(panel_runs, panel_runs.c.id == panel_run_medians.c.run_id)
                              .join(planned_runs, planned_runs.c.run_id == panel_run_links.c.assay_run_id)
                              .join(submissions, submissions.c.id == planned_runs.c.batch_id))
                 .where(submissions.c.release_id == release_id)
                 .order_by(panel_run_links.c.assay_run_id, panel_runs.c.created_at, panel_run_medians.c.run_id,
                           panel_run_medians.c.category))
        with self.read() as conn:
            return [LinkedMedian(str(r.assay_run), str(r.submission_id), str(r.panel_run), r.created_at,
                                 str(r.category), int(r.n_panelists), float(r.median_rating))
                    for r in conn.execute(query)]

    def model_panelists(self) -> list[ModelPanelist]:
        """Per model, the distinct panelists whose scorecards count: only their specialty and years
        of experience, never a name or an email."""
        query = (sa.select(panel_counted_cards.c.model_id, panel_applications.c.id, panel_applications.c.specialty,
                           panel_applications.c.years_experience).distinct()
                 .select_from(panel_counted_cards.join(panel_applications,
                                                       panel_applications.c.id == panel_counted_cards.c.panelist_id)))
        with self.read() as conn:
            return [ModelPanelist(int(r.model_id), r.specialty, int(r.years_experience)) for r in conn.execute(query)]
