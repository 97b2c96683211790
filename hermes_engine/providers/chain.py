"""Fallback across providers, decided per turn.

A turn is several model calls (call → tools → call …). Once the primary has failed with a fallback-eligible
error, the rest of that turn stays on the provider that worked, instead of paying the primary's retries
again on every call; the next turn starts at the primary, so a short outage costs one turn, not the session.
Fallback happens only before anything was streamed: a user who already saw half an answer must not see a
second, different answer glued to it, so a failure after output is the agent's to handle.

`build_chain` is the one way from model specs (primary first, then fallbacks) to a chain.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from hermes_engine.errors import ProviderError
from hermes_engine.providers.base import EventStream, ModelRequest, Provider, StreamEvent
from hermes_engine.providers.registry import check_provider, make_provider

log = logging.getLogger(__name__)


class TurnRouter:
    """The providers as seen by one turn; remembers which one is serving it. Usable wherever a Provider is."""

    def __init__(self, providers: Sequence[Provider]) -> None:
        self._providers = list(providers)
        self._index = 0

    @property
    def current(self) -> Provider:
        return self._providers[self._index]

    @property
    def spec(self) -> str:
        return self.current.spec

    @property
    def fell_back(self) -> bool:
        return self._index > 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        while True:
            provider = self.current
            started = False
            try:
                async with aclosing(provider.stream(request)) as events:
                    async for event in events:
                        started = True
                        yield event
                return
            except ProviderError as err:
                last = self._index + 1 >= len(self._providers)
                if started or not err.fallback_eligible or last:
                    raise
                self._index += 1
                log.warning("model %s failed (%s); %s serves the rest of this turn",
                            provider.spec, err, self.current.spec)

    async def aclose(self) -> None:
        """Nothing to release: the providers belong to the chain."""


class ProviderChain:
    """The primary model and its fallbacks, in order. Call `route()` once per turn."""

    def __init__(self, providers: Sequence[Provider]) -> None:
        if not providers:
            raise ValueError("ProviderChain needs at least one provider")
        self.providers: list[Provider] = list(providers)

    @property
    def primary(self) -> Provider:
        return self.providers[0]

    @property
    def spec(self) -> str:
        return self.primary.spec

    def route(self) -> TurnRouter:
        """A fresh router for a new turn: it starts at the primary again."""
        return TurnRouter(self.providers)

    def stream(self, request: ModelRequest) -> EventStream:
        """A one-off call with fallback (judge, summary): makes the chain itself usable as a Provider."""
        return self.route().stream(request)

    async def aclose(self) -> None:
        for provider in self.providers:
            try:
                await provider.aclose()
            except Exception:  # closing must not stop the others from closing
                log.exception("closing model %s failed", provider.spec)


def build_chain(models: Sequence[str], *, max_retries: int = 3) -> ProviderChain:
    """The chain for `models` ("provider:model" specs, primary first). Every spec and every key is checked
    before any provider is built, so a bad fallback is a `ConfigError` now, not during an outage."""
    for spec in models:
        check_provider(spec)
    return ProviderChain([make_provider(spec, max_retries=max_retries) for spec in models])
