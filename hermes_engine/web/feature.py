"""The web as a `Feature`: offers the `web` toolset (a profile lists `web` in `toolsets` to use it).

`web_search` is offered only when a search provider is configured; `web_fetch` always. A profile's `web:`
section sets the fetch limits and the allowlist of private hosts or networks it may reach.
"""

from __future__ import annotations

from typing import Any

from hermes_engine.config import Settings, WebSettings
from hermes_engine.errors import ConfigError
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import Tool
from hermes_engine.web.addresses import AddressPolicy, HostResolver
from hermes_engine.web.fetch import Fetcher, FetchLimits, trusting
from hermes_engine.web.search import SearchProvider, provider_from
from hermes_engine.web.tools import WEB, WebAccess, web_fetch, web_search


class WebFeature(Feature):
    name = "web"

    def __init__(self, fetcher: Fetcher, search: SearchProvider | None = None, max_chars: int = 20_000) -> None:
        self.access = WebAccess(fetcher, search, max_chars)

    @classmethod
    def from_settings(cls, settings: Settings, web: WebSettings, *,
                      resolver: HostResolver | None = None) -> WebFeature:
        """From a profile's `web:` section and the environment's search endpoint; `resolver` replaces the
        system's name resolution (a split-horizon DNS, a test)."""
        limits = FetchLimits(time_limit=web.time_limit, max_bytes=web.max_bytes, max_redirects=web.max_redirects)
        try:
            context = trusting(web.ca_bundle) if web.ca_bundle is not None else None
        except ValueError as exc:
            raise ConfigError(f"{exc}.") from None
        fetcher = Fetcher(AddressPolicy.allowing(web.allow), limits, resolver, context)
        return cls(fetcher, provider_from(settings.web_search_url, settings.web_search_key), web.max_chars)

    def tools(self) -> list[Tool]:
        return [web_fetch] if self.access.search is None else [web_fetch, web_search]

    def services(self) -> dict[ServiceKey[Any], object]:
        return {WEB: self.access}


__all__ = ["WebFeature"]
