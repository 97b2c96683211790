"""Fallback across providers, decided per turn, and recovery of streams that break mid-answer.

A turn is several model calls (call → tools → call …). Once the primary has failed with a fallback-eligible
error, the rest of that turn stays on the provider that worked, instead of paying the primary's retries
again on every call; the next turn starts at the primary, so a short outage costs one turn, not the session.

The SDKs retry failed requests, never a stream that breaks after the response began (`StreamBroken`). The
router asks the same provider again, up to `STREAM_ATTEMPTS` times in all (each new request gets the SDK's
own back-off should the server refuse it), then hands the call to the fallback like any other transport
failure. Text may already have been passed on by then: the router first yields `Restart`, and its reader
drops what it had of this call, so a person sees the partial answer replaced by the complete one, never a
second answer glued below it. Tool calls are only ever reported complete, so a half-received one is simply
gone. Once `Completed` is passed on the call is over: whatever the connection does next is no failure.

`build_chain` is the one way from model specs (primary first, then fallbacks) to a chain. A fallback is
built the first time it is needed: its SDK is never imported (memory and start-up time) while the primary
answers, and its key is still checked at start.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from functools import partial

from hermes_engine.errors import ProviderError
from hermes_engine.ports.models import (
    Completed,
    EventStream,
    ModelRequest,
    Provider,
    Restart,
    StreamBroken,
    StreamEvent,
    TextDelta,
)
from hermes_engine.providers.registry import check_provider, make_provider

log = logging.getLogger(__name__)

STREAM_ATTEMPTS = 3  # tries of one provider for one call whose streams keep breaking


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
        attempts = 0
        while True:
            provider = self.current
            attempts += 1
            passed_text = False
            try:
                async with aclosing(provider.stream(request)) as events:
                    async for event in events:
                        passed_text = passed_text or isinstance(event, TextDelta)
                        yield event
                        if isinstance(event, Completed):
                            return
                return
            except ProviderError as err:
                if not err.fallback_eligible:
                    raise
                if isinstance(err, StreamBroken) and attempts < STREAM_ATTEMPTS:
                    log.warning("%s; asking again (attempt %d of %d)", err, attempts + 1, STREAM_ATTEMPTS)
                elif self._index + 1 < len(self._providers):
                    self._index += 1
                    attempts = 0
                    log.warning("model %s failed (%s); %s serves the rest of this turn",
                                provider.spec, err, self.current.spec)
                else:
                    raise
                if passed_text:
                    yield Restart()

    async def aclose(self) -> None:
        """Nothing to release: the providers belong to the chain."""


class DeferredProvider:
    """A provider known by its spec and built on its first call."""

    def __init__(self, spec: str, build: Callable[[], Provider]) -> None:
        self.spec = spec
        self._build = build
        self._provider: Provider | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        if self._provider is None:
            self._provider = self._build()
        async with aclosing(self._provider.stream(request)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        if self._provider is not None:
            await self._provider.aclose()


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
    if not models:
        raise ValueError("build_chain needs at least one model")
    primary, *fallbacks = models
    return ProviderChain([make_provider(primary, max_retries=max_retries),
                          *(DeferredProvider(spec, partial(make_provider, spec, max_retries=max_retries))
                            for spec in fallbacks)])
