"""Web search behind one seam: `SearchProvider`, owned here by the `web_search` tool that calls it.

One provider ships: any endpoint speaking SearXNG's JSON API (`GET <url>?q=<query>&format=json` answering
`{"results": [{"title", "url", "content"}, ...]}`), which a self-hosted SearXNG serves and several hosted
search APIs mirror. It is configured by the environment: `HERMES_WEB_SEARCH_URL`, and an optional
`HERMES_WEB_SEARCH_KEY` sent as a bearer token. With no URL there is no provider and no `web_search` tool.
The endpoint is the operator's choice, so the address policy of `web_fetch` does not apply to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx2

SEARCH_TIMEOUT = 15.0


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchFailed(Exception):
    """The provider could not answer; the message is what the model reads."""


class SearchProvider(Protocol):
    async def search(self, query: str, limit: int) -> list[SearchHit]: ...


class SearxngSearch:
    """A SearXNG-compatible JSON endpoint."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = SEARCH_TIMEOUT) -> None:
        self.url, self.api_key, self.timeout = url, api_key, timeout

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            async with httpx2.AsyncClient(timeout=self.timeout, trust_env=False) as client:
                response = await client.get(self.url, params={"q": query, "format": "json"}, headers=headers)
        except httpx2.HTTPError as exc:
            raise SearchFailed(f"Error: the search service could not be reached ({type(exc).__name__}).") from None
        if response.status_code != 200:
            raise SearchFailed(f"Error: the search service answered HTTP {response.status_code}.")
        try:
            results = response.json().get("results", [])
        except (ValueError, AttributeError):
            raise SearchFailed("Error: the search service did not answer with JSON results.") from None
        return [hit for hit in (_hit(r) for r in results if isinstance(r, dict)) if hit is not None][:limit]


def _hit(result: dict[str, Any]) -> SearchHit | None:
    url = str(result.get("url") or "")
    if not url:
        return None
    return SearchHit(str(result.get("title") or url), url, str(result.get("content") or ""))


def provider_from(url: str | None, api_key: str | None) -> SearchProvider | None:
    """The configured provider, or None when search is off."""
    return SearxngSearch(url, api_key) if url else None


__all__ = ["SearchFailed", "SearchHit", "SearchProvider", "SearxngSearch", "provider_from"]
