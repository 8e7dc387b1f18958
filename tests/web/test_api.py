"""The public read API: suites, versions, releases, boards and cards, as the service decides them.

Visibility is the service's (`service.catalog`, `releases.find_release`): the index lists public
suites, an unlisted version opens by its URL, an internal suite is a 404 exactly like a suite that
does not exist, and agents' index adds unlisted suites but never internal ones.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

import pytest

from assay.service.actors import PUBLIC
from assay.service.board import BOARD_USAGE, board, board_text
from assay.service.cards import card

from .conftest import INJECTION, Site, bearer

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`


def _keys_anywhere(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys_anywhere(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys_anywhere(v)}
    return set()


def _same_refusal(a: Any, b: Any, named_a: str, named_b: str) -> None:
    """Two 404s that read alike once the name each one was asked about is swapped."""
    assert a.status_code == b.status_code == 404
    assert a.json()["detail"].replace(named_a, "K") == b.json()["detail"].replace(named_b, "K")
    assert a.json()["field"] == b.json()["field"]


def test_the_index_lists_public_suites_only(site_client: TestClient) -> None:
    listed = site_client.get("/api/suites")
    assert listed.status_code == 200
    keys = [s["key"] for s in listed.json()]
    assert "mini" in keys and "forge" in keys
    assert "hush" not in keys and "vault" not in keys
    assert keys == sorted(keys)
    mini = next(s for s in listed.json() if s["key"] == "mini")
    assert mini["version"] == "1.1" and mini["visibility"] == "public"


def test_agents_index_adds_unlisted_suites_never_internal(site_client: TestClient, populated_site: Site) -> None:
    listed = site_client.get("/api/agent/suites", headers=bearer(populated_site.keys["alice_agent"]))
    assert listed.status_code == 200
    keys = {s["key"] for s in listed.json()}
    assert {"mini", "hush"} <= keys
    assert "vault" not in keys


def test_versions_of_a_public_and_an_unlisted_suite(site_client: TestClient) -> None:
    mini = site_client.get("/api/suites/mini/versions")
    assert mini.status_code == 200
    assert [v["version"] for v in mini.json()] == ["1.0", "1.1"]
    pins = [v["scenarios"] for v in mini.json()]
    assert pins[0] != pins[1]  # a scenario was edited between the versions: its hash changed
    assert site_client.get("/api/suites/hush/versions").status_code == 200


def test_an_internal_suite_is_a_404_exactly_like_a_missing_one(site_client: TestClient) -> None:
    for route in ("/api/suites/{}/versions", "/api/suites/{}/1.0", "/api/suites/{}/1.0/card",
                  "/api/leaderboard/{}", "/api/leaderboard/{}?version=1.0"):
        _same_refusal(site_client.get(route.format("vault")), site_client.get(route.format("nosuch")),
                      "vault", "nosuch")


def test_a_release_serves_what_it_pins_for_public_and_unlisted_versions(site_client: TestClient) -> None:
    release = site_client.get("/api/suites/mini/1.0")
    assert release.status_code == 200
    body = release.json()
    assert (body["key"], body["version"], body["visibility"]) == ("mini", "1.0", "public")
    assert [s["case_id"] for s in body["scenarios"]] == ["forge-all-quiet", "forge-wrong-fix"]
    assert all(len(s["hash"]) == 64 and s["hash"].startswith(s["hash_prefix"]) for s in body["scenarios"])
    assert body["judge"]["model"] == "judge-model-1" and body["facilitator_model"] == "facilitator-model-1"
    hush = site_client.get("/api/suites/hush/1.0")
    assert hush.status_code == 200 and hush.json()["visibility"] == "unlisted"
    assert site_client.get("/api/suites/mini/9.9").status_code == 404


def test_the_board_is_exactly_what_the_service_prints_for_the_cli(site_client: TestClient,
                                                                   populated_site: Site) -> None:
    store = populated_site.store
    latest = site_client.get("/api/leaderboard/mini")
    assert latest.status_code == 200
    assert latest.headers["content-type"].startswith("application/json")
    assert latest.text == board_text(board(store, "mini", None, actor=PUBLIC))
    value = latest.json()
    assert value["suite"]["version"] == "1.1" and value["suite"]["is_latest_public"] is True
    labels = sorted(e["agent_label"] for e in value["entries"])
    assert labels == sorted(["diligent", INJECTION])  # stored and served literally
    older = site_client.get("/api/leaderboard/mini", params={"version": "1.0"})
    assert older.text == board_text(board(store, "mini", "1.0", actor=PUBLIC))
    assert [e["submission_id"] for e in older.json()["entries"]] == [populated_site.submissions["mini 1.0 diligent"]]


def test_a_listed_entry_by_its_id_is_its_board_entry_and_an_internal_suite_s_is_not_found(
        site_client: TestClient, populated_site: Site) -> None:
    listed = populated_site.submissions["mini 1.1 diligent"]
    served = site_client.get(f"/api/entries/{listed}")
    assert served.status_code == 200 and served.json()["listed"] is True
    on_board = site_client.get("/api/leaderboard/mini").json()["entries"]
    # the board's entry, with its whole usage block (by role) where the board shows the total
    entry, shown = served.json()["entry"], next(e for e in on_board if e["submission_id"] == listed)
    assert entry == {**shown, "usage": entry["usage"]} and set(entry["usage"]) == {"agent", "judge", "facilitator",
                                                                                   "total"}
    assert shown["usage"] == {"total": {k: entry["usage"]["total"][k] for k in BOARD_USAGE}}
    # the board's pre-built text keeps to the closed model its route documents (nothing re-validates it)
    from assay.web.schemas import Board, BoardUsage, Usage

    board = Board.model_validate(site_client.get("/api/leaderboard/mini").json())
    assert all(isinstance(e.usage, BoardUsage) for e in board.entries if e.usage is not None)
    assert Usage.model_validate(entry["usage"]).total.calls == entry["usage"]["total"]["calls"]
    assert not any("seed" in k for k in _keys_anywhere(served.json()))
    internal = site_client.get(f"/api/entries/{populated_site.submissions['vault 1.0 diligent']}")
    assert internal.status_code == 404


def test_no_seed_on_any_public_route(site_client: TestClient) -> None:
    for route in ("/api/leaderboard/mini", "/api/leaderboard/mini?version=1.0", "/api/leaderboard/hush?version=1.0",
                  "/api/suites", "/api/suites/mini/versions", "/api/suites/mini/1.1"):
        response = site_client.get(route)
        assert response.status_code == 200, route
        assert not any("seed" in k for k in _keys_anywhere(response.json())), route


def test_an_unlisted_board_opens_by_version_only(site_client: TestClient) -> None:
    assert site_client.get("/api/leaderboard/hush").status_code == 404  # no public version to default to
    named = site_client.get("/api/leaderboard/hush", params={"version": "1.0"})
    assert named.status_code == 200 and named.json()["suite"]["visibility"] == "unlisted"


def test_the_card_as_json_and_as_markdown(site_client: TestClient, populated_site: Site) -> None:
    expected = card(populated_site.store, "mini", "1.0", actor=PUBLIC)
    as_json = site_client.get("/api/suites/mini/1.0/card")
    assert as_json.status_code == 200
    assert as_json.json() == {"key": "mini", "version": "1.0", "markdown": expected}
    as_text = site_client.get("/api/suites/mini/1.0/card", headers={"Accept": "text/markdown"})
    assert as_text.status_code == 200
    assert as_text.headers["content-type"].startswith("text/markdown")
    assert as_text.text == expected
    both = site_client.get("/api/suites/mini/1.0/card", headers={"Accept": "text/markdown, application/json"})
    assert both.json()["markdown"] == expected  # JSON wins a tie


def test_openapi_documents_every_route_its_models_and_keys(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/api/suites", "/api/agent/suites", "/api/suites/{key}/versions", "/api/suites/{key}/{version}",
                 "/api/suites/{key}/{version}/card", "/api/leaderboard/{key}"):
        ok = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok, path
        assert "404" in paths[path]["get"]["responses"] or path.endswith("suites"), path
        assert "429" in paths[path]["get"]["responses"], path
    assert {"Board", "BoardEntry", "Provenance", "SuiteRelease", "SuiteSummary", "Card", "Refusal"} <= set(
        schema["components"]["schemas"])
    assert "text/markdown" in paths["/api/suites/{key}/{version}/card"]["get"]["responses"]["200"]["content"]
    assert paths["/api/agent/suites"]["get"]["security"] == [{"AgentKey": []}]
    assert schema["components"]["securitySchemes"]["AgentKey"] == {
        "type": "http", "scheme": "bearer", "description": schema["components"]["securitySchemes"]["AgentKey"]["description"]}
