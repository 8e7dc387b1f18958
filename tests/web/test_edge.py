"""Public reads cached at the edge (issue 26): ETag, 304, the in-process cache keyed by the board's
last change, its invalidation when a new entry lands, a gone client not computed, and one entry's
rank equal to its rank on the whole board — on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI, Response
from fastapi.testclient import TestClient
from starlette.requests import Request

from assay.web import edge
from tests.board._support import mini_suite
from tests.web.conftest import Site, make_app

pytestmark = pytest.mark.slow


def _reads(site: Site) -> list[str]:
    entry = site.submissions["mini 1.1 diligent"]
    return ["/api/leaderboard/mini", "/api/leaderboard/mini?limit=1", "/suites/mini",
            f"/api/entries/{entry}", "/api/suites/mini/1.1/card", "/suites/mini/1.1/card"]


def test_public_reads_carry_validators_and_answer_304_to_their_etag(site_client: TestClient,
                                                                     populated_site: Site) -> None:
    tags = set()
    for path in _reads(populated_site):
        first = site_client.get(path)
        assert first.status_code == 200, path
        tag = first.headers["etag"]
        assert first.headers["cache-control"].startswith("public, max-age=")
        assert first.headers["last-modified"].endswith("GMT")
        tags.add(tag)
        for asked in (tag, f"W/{tag}", f'"other", {tag}'):
            again = site_client.get(path, headers={"If-None-Match": asked})
            assert again.status_code == 304 and again.content == b"", (path, asked)
            assert again.headers["etag"] == tag
        stale = site_client.get(path, headers={"If-None-Match": '"not-this-one"'})
        assert stale.status_code == 200 and stale.content == first.content
    assert len(tags) == len(_reads(populated_site))  # each read its own tag


def test_a_repeated_read_is_served_from_the_cache_with_the_same_bytes(site_client: TestClient,
                                                                      populated_site: Site) -> None:
    state: edge.Edge = populated_site.app.state.edge
    for path in _reads(populated_site):
        first = site_client.get(path)
        computed = state.computed
        again = site_client.get(path)
        assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
        assert state.computed == computed, path  # not computed again


def test_markdown_and_json_cards_are_cached_apart(site_client: TestClient) -> None:
    as_json = site_client.get("/api/suites/mini/1.1/card")
    as_markdown = site_client.get("/api/suites/mini/1.1/card", headers={"Accept": "text/markdown"})
    assert as_json.json()["markdown"] == as_markdown.text
    assert as_markdown.headers["content-type"].startswith("text/markdown")
    assert as_json.headers["etag"] != as_markdown.headers["etag"]


def test_refusals_are_not_cached(site_client: TestClient, populated_site: Site) -> None:
    state: edge.Edge = populated_site.app.state.edge
    for _ in range(2):
        computed = state.computed
        assert site_client.get("/api/leaderboard/no-such-suite").status_code == 404
        assert site_client.get("/api/entries/0000000000000000").status_code == 404
        assert state.computed == computed + 2


def test_one_entry_s_rank_is_its_rank_on_the_whole_board(site_client: TestClient, populated_site: Site) -> None:
    for version in ("1.0", "1.1"):
        whole = site_client.get("/api/leaderboard/mini", params={"version": version}).json()["entries"]
        assert whole
        for on_board in whole:
            alone = site_client.get(f"/api/entries/{on_board['submission_id']}").json()["entry"]
            assert alone["rank"] == on_board["rank"]
            assert alone == {**on_board, "usage": alone["usage"]}  # the whole usage block, where the board has the total


def test_a_new_entry_changes_the_tag_and_the_cached_board(web_store: Any, tmp_path: Path) -> None:
    from assay.agents.loader import load_agent
    from assay.service import accounts, releases, submissions
    from assay.service.actors import OPERATOR, PUBLIC
    from assay.service.board import board_json

    app = make_app(web_store, rate_limit=0)
    now = [0.0]
    app.state.edge.clock = lambda: now[0]  # the freshness window's clock, moved by hand
    client = TestClient(app)
    accounts.create(web_store, "carol", "carol-h", actor=OPERATOR)
    releases.release_path(web_store, str(mini_suite(tmp_path / "mini", reps=1)), actor=OPERATOR)
    empty = client.get("/api/leaderboard/mini")
    assert empty.status_code == 200 and empty.json()["entries"] == []
    assert client.get("/api/leaderboard/mini", headers={"If-None-Match": empty.headers["etag"]}).status_code == 304

    sid = submissions.submit(web_store, "mini", factory=load_agent("reference:diligent"), account="carol",
                             label="diligent", publish=True, workers=1, actor=OPERATOR)
    # within the freshness window the cached answer stands (no query): the board is at most
    # `fresh` seconds behind the store
    computed = app.state.edge.computed
    assert client.get("/api/leaderboard/mini", headers={"If-None-Match": empty.headers["etag"]}).status_code == 304
    assert client.get("/api/leaderboard/mini").json()["entries"] == [] and app.state.edge.computed == computed
    now[0] += app.state.edge.fresh  # the window has passed: the store is asked, the new entry is there
    after = client.get("/api/leaderboard/mini", headers={"If-None-Match": empty.headers["etag"]})
    assert after.status_code == 200 and after.headers["etag"] != empty.headers["etag"]
    assert [e["submission_id"] for e in after.json()["entries"]] == [sid]
    assert after.text == board_json(web_store, "mini", actor=PUBLIC)
    assert client.get(f"/api/entries/{sid}").json()["entry"]["rank"] == after.json()["entries"][0]["rank"]


def _gone_request(app: FastAPI) -> Request:
    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "path": "/api/leaderboard/mini", "raw_path": b"/api/leaderboard/mini",
             "query_string": b"", "headers": [], "app": app}
    return Request(scope, receive)


def test_fresh_reads_are_answered_before_routing_and_a_zero_window_asks_the_store_each_time(
        web_store: Any, tmp_path: Path) -> None:
    from assay.service import releases
    from assay.service.actors import OPERATOR

    releases.release_path(web_store, str(mini_suite(tmp_path / "mini", reps=1)), actor=OPERATOR)
    for fresh, expected in ((1.0, True), (0.0, False)):
        app = make_app(web_store, rate_limit=0, cache_fresh=fresh)
        app.state.edge.clock = lambda: 5.0  # time stands still: only the window decides
        client = TestClient(app)
        first = client.get("/suites/mini")
        key, _ = edge.scope_key({"path": "/suites/mini", "query_string": b"", "headers": []})
        hit = app.state.edge.cached(key, None)
        assert (hit is not None) is expected
        if hit is not None:
            assert hit.body == first.content and hit.headers["etag"] == first.headers["etag"]
        again = client.get("/suites/mini", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and app.state.edge.computed == 1
        # a cached answer is the computed one: same bytes, same headers (security headers included)
        third = client.get("/suites/mini")
        assert third.content == first.content and dict(third.headers) == dict(first.headers)
        assert third.headers["x-content-type-options"] == "nosniff" and app.state.edge.computed == 1
        if fresh:
            # stale: one request is sent on to ask the store; the others keep the cached answer until
            # it has asked, or for one more window at most
            now = [5.0 + fresh]
            app.state.edge.clock = lambda: now[0]
            # a request when stale goes on to the route, which reads the token anew (unchanged: the
            # cached answer, nothing computed) and makes the cache fresh again
            assert client.get("/suites/mini").content == first.content and app.state.edge.computed == 1
            assert app.state.edge.cached(key, None) is not None
            now[0] += fresh
            assert app.state.edge.cached(key, None) is None  # this one asks
            assert app.state.edge.cached(key, None) is not None  # meanwhile, the cache answers
            now[0] += fresh
            assert app.state.edge.cached(key, None) is None  # the asker never came back in a window: ask again
            # after a quiet spell (the token read two windows ago or more), the cache serves nobody
            # while one asks: a reader never gets an answer older than two windows
            client.get("/suites/mini")  # the token is read anew at now[0]
            now[0] += 10 * fresh
            assert app.state.edge.cached(key, None) is None
            assert app.state.edge.cached(key, None) is None


def test_a_request_whose_client_has_gone_is_not_computed(populated_site: Site) -> None:
    called: list[bool] = []

    def produce() -> Response:
        called.append(True)
        return Response("computed")

    answer = anyio.run(edge.read, _gone_request(populated_site.app), produce)
    assert called == [] and answer.status_code == 499


@pytest.mark.parametrize(("header", "matched"), [
    (None, False), ("", False), ('"a"', True), ('W/"a"', True), ('"b", "a"', True), ("*", True), ('"b"', False),
    ('"a', False)])
def test_if_none_match_parsing(header: str | None, matched: bool) -> None:
    assert edge.matches(header, '"a"') is matched
