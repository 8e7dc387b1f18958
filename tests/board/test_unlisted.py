"""Unlisted entries (issue 9, item 2): a bring-your-own submission published by its id, never listed.

Only a bring-your-own submission (its own facilitator or rubric, or `--byok`) may be published
unlisted; it is reachable by its full submission id (`entry`, `GET /api/entries/{id}`, `assay
entry ID`), never on the board, never ranked, and an export of a store holding one verifies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.agents.loader import load_agent
from assay.errors import Conflict, Forbidden, Invalid, NotFound
from assay.service import exports, submissions
from assay.service.actors import OPERATOR, PUBLIC, account_actor
from assay.service.board import board, board_usage, entry
from assay.service.verify import verify
from assay.store import Store

from ._support import account, row_counts, submit


def test_only_a_bring_your_own_submission_may_be_unlisted_and_a_refusal_stores_nothing(mini: Store) -> None:
    before = row_counts(mini)
    with pytest.raises(Invalid, match="only a bring-your-own submission") as refused:
        submit(mini, unlisted=True)
    assert refused.value.field == "unlisted"
    assert row_counts(mini) == before


def test_an_unlisted_entry_is_reachable_by_its_id_and_never_listed(mini: Store) -> None:
    listed = submit(mini, publish=True, label="listed")
    hidden = submit(mini, byok=True, unlisted=True, label="hidden")

    shown = board(mini, "mini", actor=PUBLIC)
    assert [e["submission_id"] for e in shown["entries"]] == [listed]

    found = entry(mini, hidden, actor=PUBLIC)
    assert found["listed"] is False
    assert found["suite"]["key"] == "mini" and found["provenance"]["suite_key"] == "mini"
    e = found["entry"]
    assert (e["submission_id"], e["agent_label"], e["public_handle"]) == (hidden, "hidden", "Alice")
    assert (e["leaderboard_class"], e["status"], e["rank"]) == ("self_hosted_facilitator", "complete", None)
    assert e["pass_rate"] == 1.0 and e["pass_rate_ci"] is not None and e["digest"]

    # a listed entry read by its id is the board's entry, with its whole usage block where the board
    # shows the total
    again = entry(mini, listed, actor=PUBLIC)
    assert again["listed"] is True and again["entry"] == {**shown["entries"][0], "usage": again["entry"]["usage"]}
    assert shown["entries"][0]["usage"] == board_usage(again["entry"]["usage"])

    owner = submissions.results(mini, hidden, actor=account_actor("alice"))
    assert (owner["published"], owner["listed"], owner["on_board"]) == (True, False, False)
    assert submissions.results(mini, listed, actor=OPERATOR)["listed"] is True


def test_a_prefix_an_unpublished_and_an_unlisted_then_unpublished_entry_are_not_found(mini: Store) -> None:
    hidden = submit(mini, byok=True, unlisted=True)
    private = submit(mini, byok=True, label="private")
    for ident in (hidden[:12], private, "0" * 32):
        with pytest.raises(NotFound):
            entry(mini, ident, actor=PUBLIC)
    submissions.unpublish(mini, hidden, actor=account_actor("alice"))
    with pytest.raises(NotFound):
        entry(mini, hidden, actor=PUBLIC)


def test_publishing_unlisted_still_needs_a_handle_and_the_owner(mini: Store) -> None:
    account(mini, "bob")  # no public handle
    with pytest.raises(Conflict, match="public handle"):
        submit(mini, account="bob", byok=True, unlisted=True)
    with pytest.raises(Forbidden):
        submissions.compose(mini, "mini", factory=load_agent("reference:idle"), account="alice",
                            label="x", byok=True, unlisted=True, actor=account_actor("bob"))


def test_an_export_holding_an_unlisted_entry_verifies_and_keeps_it_off_the_boards(mini: Store, tmp_path: Path) -> None:
    submit(mini, publish=True, label="listed")
    hidden = submit(mini, byok=True, unlisted=True, label="hidden")
    manifest = exports.export(mini, tmp_path / "out", actor=OPERATOR)
    assert hidden in (tmp_path / "out" / "unlisted_submissions.jsonl").read_text()
    assert all(e["submission_id"] != hidden for b in manifest["boards"] for e in b["board"]["entries"])
    report = verify(tmp_path / "out")
    assert report.ok, report.summary()


def test_the_entry_route_serves_what_the_service_finds_and_404s_the_rest(mini: Store) -> None:
    from fastapi.testclient import TestClient

    from tests.web.conftest import make_app

    hidden = submit(mini, byok=True, unlisted=True, label="hidden")
    client = TestClient(make_app(mini, rate_limit=0))
    served = client.get(f"/api/entries/{hidden}")
    assert served.status_code == 200
    assert served.json() == entry(mini, hidden, actor=PUBLIC)
    assert served.json()["listed"] is False
    for ident in (hidden[:8], "f" * 32):
        missing = client.get(f"/api/entries/{ident}")
        assert missing.status_code == 404 and missing.json()["field"] == "submission"
