"""Ordered write-behind for one turn's messages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class Journal:
    """Each write starts at once and lands after the one before it, while the turn goes on: the user message
    is stored during the model call, a tool call during its tools. `flush` waits for all of them; the turn
    runner flushes before the final answer is shown, so a crash loses at most the step in flight and a
    delivered answer is always stored.

    A write that fails is the end of the journal: nothing after it is stored (the stored history never has
    a gap, so a replay never sees a tool result without its call), `on_failure` hears of it at once (the
    turn stops there, a model call in flight included), and every later `write` raises its error instead
    of queueing behind it, so a failure never waits for the end of the turn to surface."""

    def __init__(self, on_failure: Callable[[BaseException], object] | None = None) -> None:
        self._last: asyncio.Future[Any] | None = None
        self.failure: BaseException | None = None
        self.on_failure = on_failure

    def write(self, operation: Callable[[], Awaitable[Any]]) -> None:
        if self.failure is not None:
            raise self.failure
        previous = self._last

        async def in_order() -> None:
            if previous is not None:
                await previous
            try:
                await operation()
            except Exception as exc:
                self._failed(exc)
                raise

        self._last = asyncio.ensure_future(in_order())

    async def flush(self) -> None:
        """Wait for every write; raise the first failure."""
        if self._last is not None:
            await self._last

    async def settle(self) -> None:
        """Wait for every write without raising (a failure stays in `failure`)."""
        if self._last is not None:
            await asyncio.wait([self._last])
            if not self._last.cancelled():
                self._last.exception()  # retrieved: it is `failure`

    def _failed(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            if self.on_failure is not None:
                self.on_failure(exc)
