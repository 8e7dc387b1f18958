"""Who is asking decides what a service call may do (service/actors.py), and a refusal changes
nothing stored. The CLI is the operator; these are the rules the web app's keys will map onto."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.agents.loader import load_agent
from assay.errors import Forbidden, NotFound
from assay.service import accounts, batches, platform_config, releases, results, submissions
from assay.service.actors import ADMIN, OPERATOR, PUBLIC, Actor, account_actor, agent_of, require_agent_of
from assay.store import Store
from tests.board._support import mini_suite, row_counts

ALICE, BOB = account_actor("alice"), account_actor("bob")


@pytest.fixture
def world(store: Store, tmp_path: Path) -> tuple[Store, str]:
    """A released public suite, accounts alice (with a handle) and bob, one submission of alice's."""
    releases.release_path(store, str(mini_suite(tmp_path / "mini")), actor=OPERATOR)
    releases.release_path(store, str(mini_suite(tmp_path / "hidden", key="hidden", visibility="internal")),
                          actor=OPERATOR)
    accounts.create(store, "alice", "alice-h", actor=OPERATOR)
    accounts.create(store, "bob", actor=ADMIN)
    sid = submissions.submit(store, "mini", factory=load_agent("reference:diligent"), account="alice",
                             label="diligent", publish=True, workers=2, actor=ALICE)
    return store, sid


def test_an_actor_of_an_account_kind_names_its_account() -> None:
    with pytest.raises(ValueError):
        Actor("account")
    with pytest.raises(ValueError):
        Actor("public", "alice")


def test_only_the_owner_and_the_operator_see_the_owner_view(world: tuple[Store, str]) -> None:
    store, sid = world
    assert submissions.results(store, sid, actor=ALICE)["account"] == "alice"
    assert submissions.results(store, sid, actor=OPERATOR)["runs"]
    for stranger in (BOB, PUBLIC, ADMIN, agent_of("alice")):
        with pytest.raises(NotFound, match="no such submission"):
            submissions.results(store, sid, actor=stranger)
    run_id = submissions.results(store, sid, actor=ALICE)["runs"][0]["run_id"]
    assert results.debrief(store, run_id, actor=ALICE)["hidden_truth"]
    for stranger in (BOB, PUBLIC):
        with pytest.raises(NotFound, match="no such run"):
            results.debrief(store, run_id, actor=stranger)
        with pytest.raises(NotFound, match="no such run"):
            results.replay(store, run_id, actor=stranger)
        with pytest.raises(NotFound, match="no such batch"):
            results.results_json(store, sid, actor=stranger)
        with pytest.raises(NotFound, match="no such batch or submission"):
            batches.find(store, sid, actor=stranger)
    assert results.results_json(store, sid, actor=ALICE)["batch_id"] == sid


def test_refused_writes_change_nothing_stored(world: tuple[Store, str]) -> None:
    store, sid = world
    before = row_counts(store)
    refusals = [
        (NotFound, lambda: submissions.unpublish(store, sid, actor=BOB)),
        (Forbidden, lambda: submissions.note(store, sid, "flaky", actor=ALICE)),
        (Forbidden, lambda: submissions.note(store, sid, "flaky", actor=ADMIN)),
        (Forbidden, lambda: submissions.submit(store, "mini", factory=load_agent("reference:diligent"),
                                               account="alice", label="x", actor=BOB)),
        (Forbidden, lambda: submissions.submit(store, "mini", factory=load_agent("reference:diligent"),
                                               account="alice", label="x", actor=PUBLIC)),
        (Forbidden, lambda: submissions.submit(store, "mini", factory=load_agent("reference:diligent"),
                                               account="alice", label="x", actor=agent_of("alice"))),
        (Forbidden, lambda: submissions.submit(store, "mini", factory=load_agent("reference:diligent"),
                                               account="alice", label="x", baseline=True, actor=ALICE)),
        (Forbidden, lambda: accounts.create(store, "carol", actor=ALICE)),
        (Forbidden, lambda: accounts.set_handle(store, "alice", "stolen", actor=BOB)),
        (Forbidden, lambda: accounts.revoke_handle(store, "alice", actor=PUBLIC)),
        (Forbidden, lambda: platform_config.set_value(store, platform_config.SUBMISSION_CAP,
                                                      {"max_per_account_per_version": 9}, actor=ALICE)),
        (Forbidden, lambda: platform_config.add_era(store, "e2", "2026-01-01", "new judge", actor=PUBLIC)),
        (Forbidden, lambda: releases.release_path(store, "nowhere", actor=ALICE)),
    ]
    for error, call in refusals:
        with pytest.raises(error):
            call()
    assert row_counts(store) == before


def test_the_owner_unpublishes_and_staff_administer(world: tuple[Store, str]) -> None:
    store, sid = world
    assert submissions.results(store, sid, actor=ALICE)["published"] is True
    assert submissions.unpublish(store, sid, actor=ALICE)["published"] is False
    assert submissions.note(store, sid, "noisy", actor=OPERATOR)["variance_note"] == "noisy"
    assert accounts.set_handle(store, "bob", "bob-h", actor=BOB)["public_handle"] == "bob-h"
    assert accounts.revoke_handle(store, "bob", actor=ADMIN)["public_handle"] is None
    with pytest.raises(NotFound):
        accounts.view(store, "alice", actor=BOB)
    assert accounts.view(store, "alice", actor=ALICE)["name"] == "alice"


def test_listings_show_each_actor_what_is_theirs_or_public(world: tuple[Store, str]) -> None:
    store, sid = world
    assert [s.id for s in batches.list_submissions(store, actor=ALICE)] == [sid]
    assert batches.list_submissions(store, actor=BOB) == []
    assert batches.list_submissions(store, account="alice", actor=BOB) == []
    assert batches.list_submissions(store, actor=agent_of("alice")) == []
    assert [s.id for s in batches.list_submissions(store, actor=OPERATOR)] == [sid]
    with pytest.raises(Forbidden):
        batches.list_batches(store, actor=ALICE)
    staff_keys = {r["key"] for r in releases.list_releases(store, actor=OPERATOR)}
    public_keys = {r["key"] for r in releases.list_releases(store, actor=PUBLIC)}
    assert "hidden" in staff_keys and "hidden" not in public_keys and "mini" in public_keys
    for outsider in (PUBLIC, ALICE):
        with pytest.raises(NotFound):
            releases.versions(store, "hidden", actor=outsider)
        with pytest.raises(NotFound):
            releases.find_release(store, "hidden", None, actor=outsider)
    assert releases.find_release(store, "hidden", None, actor=OPERATOR)["visibility"] == "internal"


def test_an_agent_plays_only_its_own_accounts_runs() -> None:
    require_agent_of(agent_of("alice"), "alice", "r1")
    require_agent_of(OPERATOR, "alice", "r1")
    for other in (agent_of("bob"), ALICE, PUBLIC, ADMIN):
        with pytest.raises(NotFound, match="no such run"):
            require_agent_of(other, "alice", "r1")


def test_an_account_named_operator_is_not_the_operator_and_files_no_baseline(world: tuple[Store, str]) -> None:
    """Only the local operator files baselines: an account that calls itself `operator` is an account."""
    store, _ = world
    accounts.create(store, "operator", actor=OPERATOR)
    before = row_counts(store)
    with pytest.raises(Forbidden, match="only the platform operator"):
        submissions.submit(store, "mini", factory=load_agent("reference:diligent"), account="operator",
                           label="x", baseline=True, actor=account_actor("operator"))
    assert account_actor("operator") != OPERATOR and row_counts(store) == before
