"""Virtual time for code that takes a `clock` and a `sleep` (the outbound scheduler): time stands still
while any task can run, and jumps to the next sleeper's wake-up only when all are waiting. Tests then
assert exact times and intervals, and take no wall time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

SETTLE_ROUNDS = 50  # loop iterations that let every runnable task go as far as it can
MAX_STEPS = 10_000


class FakeClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + max(0.0, seconds), next(self._order), wake))
        await wake

    async def settle(self) -> None:
        """Let every task run until it waits (no time passes)."""
        for _ in range(SETTLE_ROUNDS):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Let `seconds` of virtual time pass, waking each sleeper at its time."""
        end = self.now + seconds
        await self.settle()
        while self._wake_next(until=end):
            await self.settle()
        self.now = end
        await self.settle()

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, letting virtual time pass as far as it needs."""
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        await self.settle()
        for _ in range(MAX_STEPS):
            if task.done():
                return task.result()
            if not self._wake_next():
                await self.settle()
                if not task.done() and not self._pending():
                    task.cancel()
                    raise AssertionError("the awaited work waits on something other than the clock")
            await self.settle()
        task.cancel()
        raise AssertionError("the awaited work did not finish")

    async def until(self, condition: Callable[[], Any]) -> None:
        """Let virtual time pass until `condition()` holds."""
        await self.settle()
        for _ in range(MAX_STEPS):
            if condition():
                return
            assert self._wake_next(), "nothing more will happen, and the condition does not hold"
            await self.settle()
        raise AssertionError("the condition did not come true")

    def _pending(self) -> bool:
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)
        return bool(self._timers)

    def _wake_next(self, until: float = float("inf")) -> bool:
        """Move to the earliest sleeper's wake-up (if it is not after `until`) and wake every sleeper due."""
        if not self._pending() or self._timers[0][0] > until:
            return False
        self.now = max(self.now, self._timers[0][0])
        while self._timers and self._timers[0][0] <= self.now:
            _, _, wake = heapq.heappop(self._timers)
            if not wake.done():
                wake.set_result(None)
        return True
