"""Judging that could not finish says so (issue 23, item 4): a model judge whose endpoint refuses
connections gives up in seconds, the scoring says why (one reason, how many runs), `debrief` says
it per run, the endpoint is kept and asked again by a later `score`, and a model judge with no
endpoint at all is refused. Real local servers on 127.0.0.1; a refusal is a port bound and closed.
On SQLite and PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from assay.agents.loader import load_agent
from assay.errors import Invalid
from assay.score.judge import RetryPolicy
from assay.service import accounts, results, scoring, submissions
from assay.service.actors import OPERATOR
from assay.store import Store
from assay.store.judge_repo import JudgeRepo
from assay.store.judge_schema import judge_endpoints, judge_passes
from tests.support.fake_judge_server import FakeJudgeServer
from tests.support.unreachable import closed_port

FAST = RetryPolicy(http_retries=1, reply_retries=1, backoff_base=0.01, backoff_max=0.05, connect_backoff=0.01)


def _submission(store: Store) -> str:
    accounts.create(store, "alice", "al", actor=OPERATOR)
    return submissions.submit(store, "academy", factory=load_agent("reference:steadfast"), account="alice",
                              label="steadfast", workers=2, actor=OPERATOR)


def test_an_unreachable_judge_says_why_keeps_its_endpoint_and_a_later_score_finishes(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/not-this-one")  # a stored endpoint comes first
    sid = _submission(store)
    down = f"http://127.0.0.1:{closed_port()}/v1"

    began = time.monotonic()
    summary = scoring.score(store, sid, judge="openai:judge-1", base_url=down, retry=FAST, actor=OPERATOR)
    assert time.monotonic() - began < 10  # never two minutes of retries
    line = f"judge endpoint {down} unreachable: connection refused"
    assert summary.runs_scored == 0 and summary.failures == {line: 20}
    assert JudgeRepo(store).endpoint(sid) == down
    assert submissions.results(store, sid, actor=OPERATOR)["status"] == "incomplete"

    run_id = submissions.results(store, sid, actor=OPERATOR)["runs"][0]["run_id"]
    assert results.debrief(store, run_id, actor=OPERATOR)["unjudged"] == line

    # no endpoint named: the stored one is asked again (not OPENAI_BASE_URL, never a public default)
    again = scoring.score(store, sid, retry=FAST, actor=OPERATOR)
    assert again.failures == {line: 20}

    with FakeJudgeServer() as server:
        done = scoring.score(store, sid, base_url=server.base_url, retry=FAST, actor=OPERATOR)
    assert done.runs_scored == 20 and done.failures == {}
    assert JudgeRepo(store).endpoint(sid) == server.base_url
    assert submissions.results(store, sid, actor=OPERATOR)["status"] == "complete"
    assert results.debrief(store, run_id, actor=OPERATOR)["unjudged"] is None
    with store.engine.connect() as conn:
        kept = conn.execute(sa.select(judge_endpoints.c.base_url).order_by(judge_endpoints.c.id)).scalars().all()
        failed = conn.execute(sa.select(sa.func.count()).select_from(judge_passes)
                              .where(judge_passes.c.error_kind == "connection")).scalar_one()
    assert kept == [down, server.base_url]  # a row each time it changed, never a key
    assert failed >= 1  # the refused passes are kept as evidence, and did not use up the pass budget


def test_a_model_judge_with_no_endpoint_at_all_is_refused(sqlite_store: Store,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = sqlite_store  # nothing is stored: one backend is enough
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    sid = _submission(store)
    with pytest.raises(Invalid, match="a model judge needs an endpoint") as caught:
        scoring.score(store, sid, judge="openai:judge-1", actor=OPERATOR)
    assert caught.value.field == "judge"
    assert JudgeRepo(store).endpoint(sid) is None


def test_passes_that_keep_failing_say_why_and_when_no_retry_can_help(sqlite_store: Store) -> None:
    from assay.cli.failures import judging_lines
    from tests.support.fake_judge_server import content

    store = sqlite_store  # what is stored is the first test's business, on both backends
    sid = _submission(store)
    with FakeJudgeServer(lambda call: content("not json")) as server:
        once = RetryPolicy(reply_retries=0)  # a malformed reply is not asked again: one request a pass
        first = scoring.score(store, sid, judge="openai:judge-1", base_url=server.base_url, retry=once,
                              actor=OPERATOR)
        [reason] = first.failures
        assert first.failures[reason] == 20 and reason.startswith("judge passes failed (the reply is not JSON")
        assert judging_lines(first) == [f"{reason}; 20 run(s) not judged; `assay score {sid}` to retry"]
        second = scoring.score(store, sid, retry=once, actor=OPERATOR)  # the pass budget: 10 per run
    [spent] = judging_lines(second)
    assert spent == f"{reason}; 20 run(s) not judged{scoring.SPENT}" and "assay score" not in spent
