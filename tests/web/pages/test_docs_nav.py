"""The API docs page works offline (drawn from the app's own OpenAPI document, nothing from another
host), and the pages link to one another: boards, the panel benchmark, the panel form, the API
(issue 28 item 4, issue 29 item 5)."""

from __future__ import annotations

import re
from typing import Any


def test_the_docs_page_is_self_contained_and_lists_every_api_route(pages_client: Any) -> None:
    page = pages_client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    hosts = re.findall(r"""(?:src|href)=["'](?:https?:)?//([^/"']+)""", page.text)
    assert hosts == [], hosts
    assert "<script" not in page.text and "cdn" not in page.text.lower()
    assert "default-src 'none'" in page.headers["content-security-policy"]
    document = pages_client.get("/openapi.json").json()
    for path in document["paths"]:
        assert f'<code class="path">{path}</code>' in page.text, path
    assert pages_client.get("/redoc").status_code == 404


def test_the_home_page_and_the_header_link_boards_benchmark_panel_and_api(pages_client: Any) -> None:
    home = pages_client.get("/").text
    main = home.split("<main>", 1)[1]
    assert 'href="/benchmark"' in main and 'href="/panel"' in main and 'href="/suites/mini"' in main
    for url in ("/", "/suites/mini", "/benchmark", "/panel", "/docs"):
        header = pages_client.get(url).text.split("</header>", 1)[0]
        for target in ('href="/"', 'href="/benchmark"', 'href="/panel"', 'href="/docs"'):
            assert target in header, (url, target)
