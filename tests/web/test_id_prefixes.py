"""An id prefix never finds or names an id its asker may not see (issue 23, item 3).

An ambiguous prefix used to answer with every matching submission id, other accounts' included
(and a full id opens an unlisted entry). Now a prefix typed by an account expands only to that
account's own ids: its ambiguity lists only them, a prefix of someone else's id finds nothing, and
the operator (the CLI) still sees every id. Submission ids are made to share a prefix here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.errors import BadInput, NotFound
from assay.service import batches, compare, remote, results, submissions
from assay.service.actors import account_actor
from assay.store.runs_repo import RunsRepo

from ._remote import accounts_and_keys
from .conftest import bearer, make_app

ALICE = ["abcdef" + "1" * 26, "abcdef" + "2" * 26]
BOB = ["abcdef" + "9" * 26]


@pytest.fixture
def shared_prefix(web_store: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """alice's two and bob's one remote forge submissions, every id starting `abcdef`; the keys."""
    keys = accounts_and_keys(web_store)
    ids = iter([uuid.UUID(hex=i) for i in (ALICE[0], BOB[0], ALICE[1])])
    armed: list[uuid.UUID] = []  # the id the next uuid4() gives: the submission's, drawn right after its plan
    planner = submissions.plan_submission

    def plan(*args: Any, **kwargs: Any) -> Any:
        planned = planner(*args, **kwargs)
        armed.append(next(ids))
        return planned

    monkeypatch.setattr(submissions, "plan_submission", plan)
    monkeypatch.setattr(submissions, "uuid", SimpleNamespace(uuid4=lambda: armed.pop() if armed else uuid.uuid4()))
    for account, label in (("alice", "one"), ("bob", "bobs"), ("alice", "two")):
        submissions.compose(web_store, "forge", factory=remote.remote_factory(), account=account, label=label,
                            actor=account_actor(account))
    monkeypatch.undo()
    yield keys


def test_over_the_api_a_prefix_expands_only_to_the_callers_own_submissions(web_store: Any, shared_prefix: Any) -> None:
    client = TestClient(make_app(web_store, rate_limit=0))
    alice, bob = bearer(shared_prefix.alice_api), bearer(shared_prefix.bob_api)
    ambiguous = client.get("/api/submissions/abcdef", headers=alice)
    assert ambiguous.status_code == 422 and ambiguous.json()["field"] == "submission"
    assert ALICE[0] in ambiguous.text and ALICE[1] in ambiguous.text and BOB[0] not in ambiguous.text
    # bob's prefix is nothing to alice, and answers exactly as an unknown one
    theirs = client.get("/api/submissions/abcdef9", headers=alice)
    unknown = client.get("/api/submissions/abcdef7", headers=alice)
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["detail"].replace("9", "7") == unknown.json()["detail"] and BOB[0] not in theirs.text
    assert client.get(f"/api/submissions/{BOB[0]}", headers=alice).status_code == 404  # a full id: still not hers
    assert client.get("/api/submissions/abcdef1", headers=alice).json()["id"] == ALICE[0]
    # to bob the same prefix is unambiguous: only his own submission matches it
    assert client.get("/api/submissions/abcdef", headers=bob).json()["id"] == BOB[0]
    refused = client.post("/api/submissions/abcdef/unpublish", headers=alice)
    assert refused.status_code == 422 and BOB[0] not in refused.text


def test_every_service_resolver_keeps_an_accounts_prefixes_to_its_own_ids(web_store: Any, shared_prefix: Any) -> None:
    alice = account_actor("alice")
    run_of_bob = RunsRepo(web_store).planned_runs(BOB[0])[0].run_id
    for call in (lambda: batches.find(web_store, "abcdef", actor=alice),
                 lambda: results.batch_results(web_store, "abcdef", actor=alice),
                 lambda: compare.compare(web_store, "abcdef", ALICE[0], actor=alice)):
        with pytest.raises(BadInput) as refused:
            call()
        assert "ambiguous" in str(refused.value) and BOB[0] not in str(refused.value)
    for call in (lambda: batches.find(web_store, "abcdef9", actor=alice),
                 lambda: submissions.results(web_store, "abcdef9", actor=alice),
                 lambda: compare.compare(web_store, "abcdef9", ALICE[0], actor=alice),
                 lambda: results.debrief(web_store, run_of_bob[:10], actor=alice)):
        with pytest.raises(NotFound):
            call()
    assert batches.find(web_store, "abcdef", actor=account_actor("bob")).id == BOB[0]


def test_the_operator_sees_every_id_in_one_line_on_the_cli(db_url: str, web_store: Any, shared_prefix: Any,
                                                           tmp_path: Path) -> None:
    from tests.board.test_cli_board import Cli

    line = Cli(db_url, tmp_path).refused("results", "abcdef")
    assert "ambiguous" in line and ALICE[0] in line and ALICE[1] in line  # the operator sees every id (the first two)
    assert Cli(db_url, tmp_path)("results", "abcdef9", "--json").json()["id"] == BOB[0]
