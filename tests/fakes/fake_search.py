"""A SearXNG-compatible JSON search endpoint on 127.0.0.1: `GET /search?q=…&format=json`.

It answers every query with the results set in `results` and records each request's query string and
`Authorization` header, so a test can check what the provider sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from fakes.loopback import LoopbackServer


@dataclass
class SearchRequest:
    query: dict[str, str]
    authorization: str | None


@dataclass
class FakeSearch(LoopbackServer):
    results: list[dict[str, Any]] = field(default_factory=list)
    requests: list[SearchRequest] = field(default_factory=list)
    status: int = 200

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self._search)
        return app

    async def _search(self, request: web.Request) -> web.Response:
        self.requests.append(SearchRequest(dict(request.query), request.headers.get("Authorization")))
        if self.status != 200:
            return web.json_response({"error": "unavailable"}, status=self.status)
        if request.query.get("format") != "json":
            return web.Response(text="<html>only the JSON format is served here</html>", content_type="text/html")
        return web.json_response({"query": request.query.get("q", ""), "results": self.results})

    @property
    def search_url(self) -> str:
        return f"{self.url}/search"
