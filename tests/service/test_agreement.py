"""Judge–panel agreement end to end (issue 12, item 7), on SQLite and PostgreSQL: academy
submissions played by the reference players and scored by the `rules` judge; panel runs linked to
some of those Assay runs (`assay_run` on `create-run`, by id prefix) and scored by approved
panelists; then `assay agreement`'s figures equal the pure statistics recomputed here from the
stored rows (judge passes, scorecards, ratings, reviews), read with SQL of this test's own."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from assay.agents.loader import load_agent
from assay.errors import Forbidden, Invalid, NotFound
from assay.service import accounts, agreement, panel, releases, scoring, submissions
from assay.service.judgements import judgements
from assay.service.actors import ADMIN, OPERATOR, PUBLIC
from assay.stats import agreement as stats
from assay.store import Store, open_store
from assay.store.judge_repo import JudgeRepo
from tests.support.databases import backend_url

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`

#: trait → category, as academy 1.2 maps them
MAPPING = {"goal_pursuit": "task-completion", "no_unauthorized_disclosure_conduct": "confidentiality",
           "manipulation_resistance": "manipulation-resistance", "harmful_compliance_refusal": "safety",
           "policy_adherence_under_pressure": "instruction-following"}
PANELISTS = ("ana@example.org", "ben@example.org", "cy@example.org")
REJECTED = "dee@example.org"


@dataclass
class World:
    store: Store
    runs: dict[str, list[str]]  # agent → its recorded Assay run ids
    linked: dict[str, str]  # Assay run → the panel run that counts for it
    ignored: list[str]  # panel runs that must not count (pending, superseded)


def _panelist(store: Store, email: str, decision: str = "approve") -> None:
    made = panel.apply(store, {"email": email, "specialty": "game mastering", "years_experience": 9,
                               "statement": "I run tables."}, actor=PUBLIC)
    panel.review(store, made["id"], decision, actor=ADMIN)


def _ratings(judge: dict[str, float], salt: int, who: int) -> dict[str, float]:
    """A panelist's ratings near the judge's (× 10) but not on them, some categories left out (and
    those of the traits the run did not exercise: the judge has no number for them either)."""
    out = {}
    for i, (trait, category) in enumerate(MAPPING.items()):
        if (salt + who + i) % 5 == 0 or trait not in judge:
            continue  # a partial scorecard
        wobble = ((salt * 7 + who * 3 + i) % 5) - 2
        out[category] = float(min(10, max(0, round(judge[trait] * 10) + wobble)))
    return out


def _build(store: Store) -> World:
    accounts.create(store, "alice", "al", actor=OPERATOR)
    runs: dict[str, list[str]] = {}
    for agent in ("steadfast", "pushover"):
        sid = submissions.submit(store, "academy", factory=load_agent(f"reference:{agent}"), account="alice",
                                 label=agent, publish=False, workers=2, actor=OPERATOR)
        scoring.score(store, sid, actor=OPERATOR)
        runs[agent] = [r["run_id"] for r in JudgeRepo(store).recorded_runs(sid)]
        judged = judgements(store, sid)
        assert all(judged[r].scored for r in runs[agent])
    for email in PANELISTS:
        _panelist(store, email)
    _panelist(store, REJECTED)
    panel.register_model(store, "steady", "Steady", "Assay", actor=ADMIN)
    panel.register_environment(store, "academy", "Academy", "The academy campaigns.", actor=ADMIN)
    means = {r: j.scores for sid in _submission_ids(store) for r, j in judgements(store, sid).items()}
    chosen = runs["steadfast"][::4] + runs["pushover"][1::3]  # across scenarios and both players
    linked: dict[str, str] = {}
    ignored: list[str] = []
    for salt, run in enumerate(chosen):
        made = panel.create_run(store, "steady", "academy", f"https://artifacts.example.org/{run}", actor=ADMIN,
                                assay_run=run[:8])  # a unique prefix, resolved to the full id
        assert made["assay_run"] == run
        for who, email in enumerate(PANELISTS):
            if salt % 3 == 0 and who == 0:  # an earlier scorecard, replaced by the next one
                panel.record_score(store, made["run"], email, {c: 10.0 for c in MAPPING.values()}, actor=ADMIN)
            panel.record_score(store, made["run"], email, _ratings(means[run], salt, who), actor=ADMIN)
        panel.record_score(store, made["run"], REJECTED, {c: 0.0 for c in MAPPING.values()}, actor=ADMIN)
        panel.finalize_run(store, made["run"], actor=ADMIN)
        linked[run] = made["run"]
    # a second, later panel run of one Assay run: it replaces the first
    again = panel.create_run(store, "steady", "academy", "https://artifacts.example.org/again", actor=ADMIN,
                             assay_run=chosen[0])
    for who, email in enumerate(PANELISTS):
        panel.record_score(store, again["run"], email, _ratings(means[chosen[0]], 99, who), actor=ADMIN)
    panel.finalize_run(store, again["run"], actor=ADMIN)
    ignored.append(linked[chosen[0]])
    linked[chosen[0]] = again["run"]
    # a linked panel run never finalised: its scorecards do not count
    pending = panel.create_run(store, "steady", "academy", "https://artifacts.example.org/pending", actor=ADMIN,
                               assay_run=runs["steadfast"][1])
    panel.record_score(store, pending["run"], PANELISTS[0], {"safety": 3.0}, actor=ADMIN)
    ignored.append(pending["run"])
    return World(store, runs, linked, ignored)


def _submission_ids(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text("SELECT id FROM submissions ORDER BY id"))]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One database per backend for the module: two scored academy submissions and a panel."""
    with backend_url(request, tmp_path_factory.mktemp("agreement"), "agreement") as url:
        store = open_store(url)
        releases.bootstrap(store)
        try:
            yield _build(store)
        finally:
            store.close()


# -- the stored numbers, read with this test's own SQL ----------------------------------------------


def _stored_judge_means(store: Store) -> dict[str, dict[str, float]]:
    """{run: {trait: mean over its valid passes}} from `judge_passes` alone."""
    verdicts: dict[str, list[dict[str, float]]] = {}
    with store.engine.connect() as conn:
        for run_id, valid, found in conn.execute(sa.text("SELECT run_id, valid, verdicts FROM judge_passes")):
            if valid:
                verdicts.setdefault(run_id, []).append(found if isinstance(found, dict) else __import__("json").loads(found))
    return {run: {t: statistics.fmean(v[t] for v in vs) for t, x in vs[0].items() if x is not None}  # null: not exercised
            for run, vs in verdicts.items()}


def _stored_panel_medians(store: Store, panel_run: str) -> dict[str, float]:
    """{category: median} of a scored panel run: the latest card per panelist approved now."""
    with store.engine.connect() as conn:
        cards = conn.execute(sa.text(
            "SELECT c.id, c.panelist_id FROM panel_scorecards c WHERE c.run_id = :r ORDER BY c.id"),
            {"r": panel_run}).all()
        latest = {panelist: card for card, panelist in cards}  # later ids overwrite earlier
        decisions = dict(conn.execute(sa.text("SELECT application_id, decision FROM panel_reviews ORDER BY id")).all())
        counted = [card for panelist, card in latest.items() if decisions.get(panelist) == "approved"]
        ratings: dict[str, list[float]] = {}
        for card in counted:
            for category, rating in conn.execute(sa.text("SELECT category, rating FROM panel_ratings WHERE card_id = :c"),
                                                 {"c": card}):
                ratings.setdefault(category, []).append(float(rating))
    return {c: statistics.median(v) for c, v in ratings.items()}


def _counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        names = sa.inspect(conn).get_table_names()
        return {t: int(conn.execute(sa.text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one()) for t in names}


# -- the report ------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_figures_equal_the_statistics_recomputed_from_the_stored_rows(world: World) -> None:
    report = agreement.agreement(world.store, "academy", actor=OPERATOR)
    assert (report["suite"], report["version"]) == ("academy", "1.2") and report["mapping"] == MAPPING
    assert report["judge"]["model"] == "rules" and report["note"] is None and report["excluded_runs"] == 0
    assert report["n_linked_runs"] == len(world.linked)
    judge = _stored_judge_means(world.store)
    medians = {run: _stored_panel_medians(world.store, panel_run) for run, panel_run in world.linked.items()}
    defined = 0
    for pair in report["pairs"]:
        trait, category = pair["trait"], pair["category"]
        pairs = [(judge[run][trait] * 10, medians[run][category]) for run in sorted(world.linked)
                 if category in medians[run] and trait in judge[run]]
        found = stats.agreement(pairs, seed=agreement.pair_seed("academy", "1.2", trait, category))
        assert pair["n"] == len(pairs) == found.n
        for name, figure, interval in (("spearman", found.spearman, found.spearman_ci),
                                       ("alpha", found.alpha, found.alpha_ci)):
            expected = None if figure.value is None else round(figure.value, 4)
            assert pair[name] == expected, (trait, name)
            assert pair[f"{name}_ci"] == (None if interval.interval is None
                                          else [round(v, 4) for v in interval.interval])
            assert pair[f"{name}_ci_reason"] == interval.reason  # a withheld interval says why
            if figure.value is None:
                assert figure.reason in pair["notes"]
            if interval.reason is not None:
                assert interval.reason in pair["notes"]
        defined += pair["spearman"] is not None and pair["alpha"] is not None
    assert defined >= 3  # the data are not degenerate: most pairs have numbers
    assert agreement.agreement(world.store, "academy", "1.2", actor=OPERATOR) == report  # every read alike


def test_the_runs_behind_the_report_are_the_linked_scored_ones(world: World) -> None:
    rows = agreement.agreement_runs(world.store, "academy", actor=OPERATOR)
    assert {r["run"]: r["panel_run"] for r in rows} == world.linked
    assert not {r["panel_run"] for r in rows} & set(world.ignored)
    for r in rows:  # the rejected panelist's zeros and the replaced scorecard's tens never count
        assert r["panel"] == _stored_panel_medians(world.store, r["panel_run"])


def test_reading_agreement_writes_nothing_and_only_the_staff_may(world: World) -> None:
    before = _counts(world.store)
    agreement.agreement(world.store, "academy", actor=OPERATOR)
    agreement.agreement(world.store, "academy", actor=ADMIN)
    assert _counts(world.store) == before
    with pytest.raises(Forbidden):
        agreement.agreement(world.store, "academy", actor=PUBLIC)


def test_a_suite_with_no_mapping_or_no_shared_runs_says_so_without_numbers(world: World) -> None:
    forge = agreement.agreement(world.store, "forge", actor=OPERATOR)
    assert forge["pairs"] == [] and "maps no trait" in forge["note"]
    with pytest.raises(NotFound):
        agreement.agreement(world.store, "no-such-suite", actor=OPERATOR)
    with pytest.raises(NotFound) as version:
        agreement.agreement(world.store, "academy", "9.9", actor=OPERATOR)
    assert version.value.field == "version"


def test_no_shared_runs_gives_pairs_without_numbers(store: Store) -> None:
    releases.bootstrap(store)
    report = agreement.agreement(store, "academy", actor=OPERATOR)
    assert "no run of academy 1.2" in report["note"]
    assert [p["n"] for p in report["pairs"]] == [0] * len(MAPPING)
    assert all(p["spearman"] is None and p["alpha"] is None and p["spearman_ci"] is None and p["notes"]
               for p in report["pairs"])


# -- create-run with assay_run ---------------------------------------------------------------------


def test_create_run_refuses_an_assay_run_it_cannot_name_and_stores_nothing(world: World) -> None:
    before = _counts(world.store)
    for ident, kind in (("f" * 32, NotFound), ("abc", NotFound), ("", Invalid)):
        with pytest.raises(kind) as refused:
            panel.create_run(world.store, "steady", "academy", "https://x.example.org/a", actor=ADMIN,
                             assay_run=ident)
        assert refused.value.field == "assay_run"
    with pytest.raises(Invalid) as step:
        panel.ingest(world.store, {"action": "create-run", "model": "steady", "environment": "academy",
                                   "artifact_url": "https://x.example.org/a", "assay_run": 7}, actor=ADMIN)
    assert step.value.field == "assay_run"
    assert _counts(world.store) == before


def test_the_link_is_in_the_run_view_and_append_only(world: World) -> None:
    views = {v["run"]: v for v in panel.runs(world.store, actor=ADMIN)}
    for run, panel_run in world.linked.items():
        assert views[panel_run]["assay_run"] == run
    with world.store.engine.connect() as conn:
        unlinked = conn.execute(sa.text("SELECT COUNT(*) FROM panel_runs WHERE id NOT IN "
                                        "(SELECT panel_run_id FROM panel_run_links)")).scalar_one()
    assert unlinked == 0 or all(v["assay_run"] is None for v in views.values() if v["run"] not in
                                {*world.linked.values(), *world.ignored})
    for statement in ("UPDATE panel_run_links SET assay_run_id = assay_run_id", "DELETE FROM panel_run_links"):
        with pytest.raises(sa.exc.IntegrityError, match="append-only"):
            with world.store.engine.begin() as conn:
                conn.execute(sa.text(statement))
