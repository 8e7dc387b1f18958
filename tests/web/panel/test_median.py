"""The median rule of the panel views, as a property: on SQLite and on PostgreSQL, the view's
per-run, per-category figure equals Python's `statistics.median` of the latest ratings of the
approved panelists who rated that category (for an even count, the mean of the two middle ones,
as `percentile_cont(0.5)`), whatever the ratings, the panel size, partial scorecards and
re-submissions. Rows are appended through the store's repository (no HTTP, no password hashing),
one fresh run and model per example, in one database per backend for the module."""

from __future__ import annotations

import itertools
import statistics
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.store.panel_repo import PanelRepo
from assay.store.panel_schema import panel_model_categories, panel_run_medians
from tests.support.databases import backend_url
from tests.support.strategies import examples

CATEGORIES = ("safety", "diagnosis", "honesty")
_serial = itertools.count()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def median_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from assay.service import panel
    from assay.store import open_store

    with backend_url(request, tmp_path_factory.mktemp("median"), "median") as url:
        store = open_store(url)
        panel.seed_categories(store)
        PanelRepo(store).add_environment(slug="env", name="Env", spec="spec")
        try:
            yield store
        finally:
            store.close()


RATING = st.one_of(st.integers(0, 10), st.floats(0, 10, allow_nan=False, allow_infinity=False))
CARD = st.dictionaries(st.sampled_from(CATEGORIES), RATING, min_size=1, max_size=len(CATEGORIES))
#: per panelist: an earlier scorecard (or none), the latest one, and whether the panelist is approved
PANELIST = st.tuples(st.none() | CARD, CARD, st.booleans())


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@given(panelists=st.lists(PANELIST, min_size=1, max_size=9))
@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_view_median_is_statistics_median_of_the_latest_approved_ratings(
        median_store: Any, panelists: list[tuple[dict[str, Any] | None, dict[str, Any], bool]]) -> None:
    repo = PanelRepo(median_store)
    n = next(_serial)
    model = f"model-{n}"
    repo.add_model(slug=model, name=model, vendor="v")
    run = uuid.uuid4().hex[:16]
    repo.add_run(run_id=run, model=model, environment="env", artifact_url="https://x.example.org", by_admin=None)
    expected: dict[str, list[float]] = {}
    for i, (earlier, latest, approved) in enumerate(panelists):
        email = f"p{n}-{i}@example.org"
        application = uuid.uuid4().hex[:16]
        assert repo.add_application(application_id=application, email=email, specialty="s", years_experience=1,
                                    statement="s")
        repo.add_review(application, "approved" if approved else "rejected", None)
        for card in (earlier, latest):
            if card is not None:
                repo.add_scorecard(run_id=run, panelist_id=application, ratings=card, comment="", minutes=0,
                                   by_admin=None)
        if approved:
            for category, rating in latest.items():
                expected.setdefault(category, []).append(float(rating))
    repo.finalize(run, None)
    with median_store.engine.connect() as conn:
        got = {r.category: (int(r.n_panelists), float(r.median_rating)) for r in conn.execute(
            sa.select(panel_run_medians).where(panel_run_medians.c.run_id == run))}
        model_id = conn.execute(sa.text("SELECT id FROM panel_models WHERE slug = :s"), {"s": model}).scalar_one()
        per_model = {r.category: float(r.mean_rating) for r in conn.execute(
            sa.select(panel_model_categories).where(panel_model_categories.c.model_id == model_id))}
    assert set(got) == set(expected)
    for category, ratings in expected.items():
        count, median = got[category]
        assert count == len(ratings)
        assert median == pytest.approx(statistics.median(ratings), rel=1e-12, abs=1e-12)
        assert per_model[category] == pytest.approx(median, rel=1e-12, abs=1e-12)  # one run: its median


def test_the_middle_positions_are_one_for_an_odd_count_and_two_for_an_even_one() -> None:
    """The integer-division rule the view writes, checked for every panel size it will meet."""
    for n in range(1, 200):
        middle = sorted({(n + 1) // 2, (n + 2) // 2})
        values = list(range(1, n + 1))
        assert statistics.median(values) == sum(values[p - 1] for p in middle) / len(middle)
        assert len(middle) == (1 if n % 2 else 2)
