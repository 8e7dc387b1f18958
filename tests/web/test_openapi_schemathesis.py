"""schemathesis against `/openapi.json`, with valid keys: no 5xx, and every response matches the
schema the app publishes (status codes, content types, bodies, headers).

Bounded on purpose (a few examples per operation, no deadline, derandomised): it runs in every
`make test` on a shared machine. It covers the read routes (suites, agent suites, boards, cards)
over the populated site of each backend; each operation is called with the key its security
scheme names. Path parameters are drawn both at random (mostly 404s, which must be documented
too) and from the site's real suites and versions, so the 200 bodies are checked as well.

The strategies are driven by hypothesis directly (`APIOperation.as_strategy`) rather than by
`schemathesis.pytest.from_fixture`, whose lazy loader does not run under this pytest.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from .conftest import Site, bearer

COVERED = r"^/api/(suites|agent/suites|leaderboard)"
#: Real (key, version) pairs of the populated site: public, unlisted, internal, and none at all.
KNOWN = [("mini", "1.0"), ("mini", "1.1"), ("hush", "1.0"), ("vault", "1.0"), ("forge", "1.0"), ("nosuch", "1.0")]


def _operations(site: Site) -> list[Any]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", site.app).include(method="GET", path_regex=COVERED)
    return [result.ok() for result in schema.get_all_operations()]


def _cases(operation: Any) -> st.SearchStrategy[Any]:
    names = {p.name for p in operation.path_parameters}
    known = st.sampled_from(KNOWN).flatmap(
        lambda kv: operation.as_strategy(path_parameters={k: v for k, v in (("key", kv[0]), ("version", kv[1]))
                                                          if k in names}))
    return st.one_of(operation.as_strategy(), known) if names else operation.as_strategy()


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_schema_covers_the_read_routes(populated_site: Site) -> None:
    paths = {op.path for op in _operations(populated_site)}
    assert paths == {"/api/suites", "/api/agent/suites", "/api/suites/{key}/versions", "/api/suites/{key}/{version}",
                     "/api/suites/{key}/{version}/card", "/api/suites/{key}/{version}/export", "/api/leaderboard/{key}"}


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_api_keeps_to_its_schema(populated_site: Site) -> None:
    for operation in _operations(populated_site):
        security = [name for requirement in operation.definition.raw.get("security", []) for name in requirement]
        headers = bearer(populated_site.keys["alice_agent" if "AgentKey" in security else "alice_api"])
        statuses: list[int] = []

        @given(case=_cases(operation))
        @settings(max_examples=12, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def keeps_to_schema(case: Any) -> None:
            response = case.call_and_validate(headers=headers)
            statuses.append(response.status_code)

        keeps_to_schema()
        assert all(s < 500 for s in statuses), (operation.path, statuses)
        if operation.path_parameters:
            assert 200 in statuses and 404 in statuses, (operation.path, statuses)
        else:
            assert set(statuses) == {200}, (operation.path, statuses)
