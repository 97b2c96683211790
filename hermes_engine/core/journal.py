"""Ordered write-behind for one turn's messages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class Journal:
    """Each write starts at once and lands after the one before it, while the turn goes on: the user message
    is stored during the model call, a tool call during its tools. `flush` waits for all of them; the turn
    runner flushes before the final answer is shown, so a crash loses at most the step in flight and a
    delivered answer is always stored."""

    def __init__(self) -> None:
        self._last: asyncio.Future[Any] | None = None

    def write(self, operation: Callable[[], Awaitable[Any]]) -> None:
        previous = self._last

        async def in_order() -> None:
            if previous is not None:
                await previous
            await operation()

        self._last = asyncio.ensure_future(in_order())

    async def flush(self) -> None:
        if self._last is not None:
            await self._last
