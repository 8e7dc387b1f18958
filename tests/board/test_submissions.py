"""Submissions: the server's plan, the cap, publication, status and class (issue 3, parts 2, 4, 5)."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.errors import BadInput
from assay.service import accounts, completion, platform_config, releases, submissions
from assay.service.board import board, board_text
from assay.service.cards import card
from assay.store import Store
from assay.store.runs_repo import RunsRepo

from ._support import account, flaky, mini_suite, recounted_ranks, row_counts, submit


@pytest.fixture
def mini(store: Store, tmp_path: Path) -> Store:
    """The mini suite released (2 scenarios × 2 reps), `alice` with a handle, `owner` without."""
    releases.release_path(store, str(mini_suite(tmp_path / "mini")), actor=OPERATOR)
    account(store, "alice", "Alice")
    account(store, "owner")
    return store


def entries(store: Store, key: str = "mini") -> dict[str, dict]:
    return {e["submission_id"]: e for e in board(store, key, actor=OPERATOR)["entries"]}


# -- the plan ---------------------------------------------------------------------------------


def test_the_server_plans_every_scenario_times_reps_with_its_own_seed(mini: Store) -> None:
    sid = submit(mini)
    planned = RunsRepo(mini).planned_runs(sid)
    assert [(p.case_id, p.trial) for p in planned] == [
        ("forge-all-quiet", 1), ("forge-all-quiet", 2), ("forge-wrong-fix", 1), ("forge-wrong-fix", 2)]
    seeds = [p.seed for p in planned]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**62 for s in seeds)
    assert len({p.run_id for p in planned}) == 4
    batch = RunsRepo(mini).batch(sid)
    assert batch is not None and batch.kind == "submission" and batch.suite_version == "1.0"
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert [r["seed"] for r in view["runs"]] == seeds  # the owner sees every run's seed
    assert [(r["scenario"], r["rep"]) for r in view["runs"]] == [(p.case_id, p.trial) for p in planned]


def test_a_complete_platform_submission_is_published_and_ranked(mini: Store) -> None:
    sid = submit(mini, publish=True)
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert (view["status"], view["leaderboard_class"], view["published"], view["rank"]) == (
        "complete", "platform", True, 1)
    assert (view["n_runs"], view["pass_rate"], view["consistency"], view["false_success_rate"],
            view["objective_met_rate"]) == (4, 1.0, 1.0, 0.0, 1.0)
    assert all(r["status"] == "completed" and r["passed"] and not r["participation_gated"] for r in view["runs"])
    entry = entries(mini)[sid]
    assert entry["rank"] == 1 and entry["public_handle"] == "Alice" and entry["agent_label"] == "diligent"
    assert entry["facilitator_models"] == ["facilitator-model-1"]


def test_without_publish_nothing_reaches_the_board(mini: Store) -> None:
    sid = submit(mini)
    assert submissions.results(mini, sid, actor=OPERATOR)["status"] == "complete"
    assert entries(mini) == {}


# -- refusals ---------------------------------------------------------------------------------


def test_a_fourth_submission_to_one_version_is_refused(mini: Store) -> None:
    for _ in range(3):
        submit(mini, agent="reference:idle")
    before = row_counts(mini)
    with pytest.raises(BadInput, match="already has 3 submission.*most allowed per suite version"):
        submit(mini, agent="reference:idle")
    assert row_counts(mini) == before
    # The cap is per account and per version, and lives in platform config.
    account(mini, "bob")
    submit(mini, agent="reference:idle", account="bob")
    platform_config.set_value(mini, "submission_cap", {"max_per_account_per_version": 4}, actor=OPERATOR)
    submit(mini, agent="reference:idle")


def test_byok_and_baseline_submissions_are_not_capped(mini: Store) -> None:
    platform_config.set_value(mini, "submission_cap", {"max_per_account_per_version": 1}, actor=OPERATOR)
    submit(mini, agent="reference:idle")
    submit(mini, agent="reference:idle", byok=True)
    submit(mini, agent="reference:idle", byok=True)
    submit(mini, agent="reference:idle", account="owner", baseline=True)
    submit(mini, agent="reference:idle", account="owner", baseline=True)
    with pytest.raises(BadInput, match="already has 1 submission"):
        submit(mini, agent="reference:idle")


def test_publish_without_a_public_handle_is_refused(mini: Store) -> None:
    before = row_counts(mini)
    with pytest.raises(BadInput, match="publishing needs a public handle"):
        submit(mini, account="owner", publish=True)
    assert row_counts(mini) == before


def test_refusals_on_first_use_of_a_built_in_store_nothing(store: Store) -> None:
    account(store, "nohandle")
    with pytest.raises(BadInput, match="needs a public handle"):
        submit(store, "forge", account="nohandle", publish=True)
    with pytest.raises(BadInput, match="no such account"):
        submit(store, "forge", account="ghost")
    assert row_counts(store).get("suite_releases", 0) == 0


def test_only_the_suite_owner_submits_baselines(mini: Store) -> None:
    with pytest.raises(BadInput, match=r"only the suite owner \(owner\)"):
        submit(mini, account="alice", baseline=True)
    accounts.set_handle(mini, "owner", "Operator", actor=OPERATOR)
    sid = submit(mini, account="owner", baseline=True, publish=True)
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert view["model_provenance"] == "platform_verified" and view["rank"] == 1
    assert "| diligent | complete | 4/4 | 1.0000" in card(mini, "mini", actor=OPERATOR)


def test_unknown_suites_and_versions_are_refused(mini: Store) -> None:
    with pytest.raises(BadInput, match="no released suite 'nope'"):
        submit(mini, "nope")
    with pytest.raises(BadInput, match="no released suite 'mini' version 9.9"):
        submit(mini, "mini", version="9.9")


# -- handles ----------------------------------------------------------------------------------


def test_revoking_a_handle_removes_its_entries_from_the_board_at_once(mini: Store) -> None:
    sid = submit(mini, publish=True)
    assert sid in entries(mini)
    accounts.revoke_handle(mini, "alice", actor=OPERATOR)
    assert entries(mini) == {}
    assert submissions.results(mini, sid, actor=OPERATOR)["published"] is True  # still published, just not shown
    accounts.set_handle(mini, "alice", "Alice2", actor=OPERATOR)
    assert entries(mini)[sid]["public_handle"] == "Alice2"
    history = accounts.view(mini, "alice", actor=OPERATOR)["handle_history"]
    assert [h["handle"] for h in history] == ["Alice", None, "Alice2"]


def test_handles_are_unique_among_current_holders(mini: Store) -> None:
    account(mini, "bob")
    with pytest.raises(BadInput, match="is taken"):
        accounts.set_handle(mini, "bob", "alice", actor=OPERATOR)  # case-insensitively
    with pytest.raises(BadInput, match="is taken"):
        accounts.create(mini, "carol", "Alice", actor=OPERATOR)
    accounts.revoke_handle(mini, "alice", actor=OPERATOR)
    accounts.set_handle(mini, "bob", "Alice", actor=OPERATOR)
    with pytest.raises(BadInput, match="no public handle to revoke"):
        accounts.revoke_handle(mini, "alice", actor=OPERATOR)
    with pytest.raises(BadInput, match="already exists"):
        accounts.create(mini, "bob", actor=OPERATOR)
    with pytest.raises(BadInput, match="account name"):
        accounts.create(mini, "Bad Name", actor=OPERATOR)


# -- status, gating, class --------------------------------------------------------------------


def test_a_crashed_run_makes_the_submission_incomplete_but_the_owner_sees_aggregates(mini: Store) -> None:
    sid = submit(mini, agent=flaky("CrashOnce"), publish=True)
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert view["status"] == "incomplete"
    assert view["published"] is False and view["rank"] is None and not view["on_board"]
    assert entries(mini) == {}
    crashed = [r for r in view["runs"] if r["status"] == "crashed"]
    assert len(crashed) == 1 and not crashed[0]["passed"] and not crashed[0]["participation_gated"]
    # Failures count: the crash stays in the denominator.
    assert view["n_runs"] == 4 and view["pass_rate"] == 0.75 and view["consistency"] == 0.5
    assert submissions.results(mini, sid, actor=OPERATOR)["finalised"] is True


def test_a_gated_run_is_excluded_from_aggregates_and_makes_the_submission_incomplete(mini: Store) -> None:
    platform_config.set_value(mini, "academy_eval_participation",
                              {"min_player_messages": 2, "min_actions_per_turn": 0.5}, actor=OPERATOR)
    sid = submit(mini, agent=flaky("IdleOnce"), publish=True)
    view = submissions.results(mini, sid, actor=OPERATOR)
    gated = [r for r in view["runs"] if r["participation_gated"]]
    assert len(gated) == 1 and gated[0]["status"] == "completed" and gated[0]["player_messages"] == 1
    assert view["status"] == "incomplete" and view["n_gated"] == 1
    assert view["n_runs"] == 3 and view["pass_rate"] == 1.0  # the gated run is not aggregated
    assert view["published"] is False and entries(mini) == {}


def test_the_participation_floor_counts_actions_per_turn(mini: Store) -> None:
    platform_config.set_value(mini, "academy_eval_participation",
                              {"min_player_messages": 1, "min_actions_per_turn": 5}, actor=OPERATOR)
    view = submissions.results(mini, submit(mini), actor=OPERATOR)
    assert all(r["participation_gated"] for r in view["runs"])
    assert view["status"] == "incomplete" and view["n_runs"] == 0
    assert view["pass_rate"] is None and view["consistency"] is None  # no number from nothing


def test_a_complete_byok_submission_is_published_unranked(mini: Store) -> None:
    ranked = submit(mini, publish=True)
    sid = submit(mini, byok=True, publish=True, play_model="gpt-x")
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert (view["status"], view["leaderboard_class"], view["published"], view["rank"]) == (
        "complete", "self_hosted_facilitator", True, None)
    board_entries = entries(mini)
    assert board_entries[sid]["rank"] is None and board_entries[ranked]["rank"] == 1
    assert board_entries[sid]["model_provenance"] == "self_reported"
    assert board_entries[sid]["play_model"] == "gpt-x"
    assert board_entries[sid]["facilitator_models"] == ["self_hosted"]
    assert [e["submission_id"] for e in board(mini, "mini", actor=OPERATOR)["entries"]] == [ranked, sid]


def test_legacy_runs_without_the_field_are_unclassified_and_unranked(mini: Store) -> None:
    sid = submit(mini, publish=True)
    # A legacy row: a submission whose runs predate ranked_eligible (no submission_runs rows).
    from assay.store.board_schema import submissions as subs
    from assay.store.schema import batches, planned_runs

    legacy = "0" * 32
    with mini.engine.begin() as conn:
        b = dict(conn.execute(sa.select(batches).where(batches.c.id == sid)).one()._mapping)
        conn.execute(sa.insert(batches).values({**b, "id": legacy}))
        for p in conn.execute(sa.select(planned_runs).where(planned_runs.c.batch_id == sid)).all():
            conn.execute(sa.insert(planned_runs).values({**p._mapping, "batch_id": legacy, "run_id": "L" + p.run_id[1:]}))
        s = dict(conn.execute(sa.select(subs).where(subs.c.id == sid)).one()._mapping)
        conn.execute(sa.insert(subs).values({**s, "id": legacy}))
    assert submissions.results(mini, legacy, actor=OPERATOR)["leaderboard_class"] == "unclassified"


def test_ranks_are_statistical_and_entries_stay_listed_by_estimate(mini: Store) -> None:
    """Rank = 1 + the ranked entries whose 95% pass_rate interval lies wholly above; on two cases
    every interval is wide, so a worse estimate still shares rank 1 — listed last all the same."""
    account(mini, "bob", "Bob")
    account(mini, "carol", "Carol")
    best = submit(mini, publish=True)
    tied = submit(mini, account="bob", publish=True)
    worst = submit(mini, account="carol", agent="reference:hasty", publish=True)
    shown = board(mini, "mini", actor=OPERATOR)["entries"]
    assert {e["submission_id"]: e["rank"] for e in shown} == {best: 1, tied: 1, worst: 1}
    assert [e["rank"] for e in shown] == recounted_ranks(shown)
    assert shown[-1]["submission_id"] == worst and {e["submission_id"] for e in shown[:2]} == {best, tied}
    assert shown[-1]["pass_rate"] < shown[0]["pass_rate"]
    assert "wholly above" in board(mini, "mini", actor=OPERATOR)["ranking"]


def test_scoring_lags_run_completion(mini: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """All runs done is not all runs scored: before the sweep, nothing is complete or published."""
    monkeypatch.setattr(completion, "complete_submission", lambda store, sid: None)
    sid = submit(mini, publish=True)
    monkeypatch.undo()
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert all(r["status"] == "completed" for r in view["runs"])
    assert view["status"] == "incomplete" and view["n_scored"] == 0 and not view["finalised"]
    assert view["published"] is False and view["pass_rate"] is None
    completion.complete_submission(mini, sid)
    view = submissions.results(mini, sid, actor=OPERATOR)
    assert view["status"] == "complete" and view["published"] is True and view["finalised"] is True
    before = row_counts(mini)
    completion.complete_submission(mini, sid)  # idempotent
    assert row_counts(mini) == before


def test_unpublish_takes_an_entry_off_and_is_an_event(mini: Store) -> None:
    sid = submit(mini, publish=True)
    submissions.unpublish(mini, sid[:8], actor=OPERATOR)
    assert entries(mini) == {}
    with pytest.raises(BadInput, match="is not published"):
        submissions.unpublish(mini, sid, actor=OPERATOR)
    with pytest.raises(BadInput, match="no such submission"):
        submissions.unpublish(mini, "f" * 32, actor=OPERATOR)


def test_variance_notes_have_history_and_the_latest_shows(mini: Store) -> None:
    sid = submit(mini, publish=True)
    submissions.note(mini, sid, "one rep scored unusually low on a safety check", actor=OPERATOR)
    submissions.note(mini, sid, "re-measured; the low rep is genuine", actor=OPERATOR)
    assert entries(mini)[sid]["variance_note"] == "re-measured; the low rep is genuine"
    submissions.note(mini, sid, "", actor=OPERATOR)
    assert entries(mini)[sid]["variance_note"] is None
    assert row_counts(mini)["variance_notes"] == 3


# -- no seed in public -------------------------------------------------------------------------


def test_no_seed_appears_in_any_public_output(mini: Store) -> None:
    submit(mini, publish=True)
    submit(mini, byok=True, publish=True)
    with mini.engine.connect() as conn:
        seeds = [str(s) for s in conn.execute(sa.text("SELECT seed FROM planned_runs")).scalars()]
    assert len(seeds) == 8
    public = board_text(board(mini, "mini", actor=OPERATOR)) + card(mini, "mini", actor=OPERATOR)
    for seed in seeds:
        assert seed not in public
    assert "seed" not in public.lower()
    owner = json.dumps([submissions.results(mini, e["submission_id"], actor=OPERATOR) for e in board(mini, "mini", actor=OPERATOR)["entries"]])
    assert all(seed in owner for seed in seeds)


def test_concurrent_submissions_cannot_both_take_the_last_slot(mini: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    platform_config.set_value(mini, "submission_cap", {"max_per_account_per_version": 2}, actor=OPERATOR)

    def attempt(_: int) -> str:
        try:
            submit(mini, agent="reference:idle", workers=1)
            return "ok"
        except BadInput as exc:
            assert "most allowed per suite version" in str(exc)
            return "refused"

    with ThreadPoolExecutor(max_workers=5) as pool:
        outcomes = sorted(pool.map(attempt, range(5)))
    assert outcomes == ["ok", "ok", "refused", "refused", "refused"]
    assert row_counts(mini)["submissions"] == 2


def test_results_dispatch_finds_submissions_by_id_or_prefix(mini: Store) -> None:
    from assay.cli.submissions import submission_results

    sid = submit(mini)
    assert submission_results(mini, sid)["id"] == sid
    assert submission_results(mini, sid[:8])["id"] == sid
    assert submission_results(mini, "0123456789abcdef") is None  # not a submission: a batch, maybe
