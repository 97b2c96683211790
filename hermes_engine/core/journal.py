"""Ordered, batched write-behind for one turn's steps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Journal(Generic[T]):
    """A step written starts its write at once and lands after the ones before it, while the turn goes on:
    a tool call is stored during its tools, its result as its tool ends. Steps that come while a write is
    under way go together in the next one, so a turn makes one store round trip per batch, not per step.
    A step written with `hold` (the user message) starts no write of its own: it goes with the next step,
    or at `flush`. It costs nothing to wait: until it is stored nothing was run or shown for it, and a
    crash before that leaves its event in the inbox, answered from the start after a restart.

    `flush` writes and waits for every step; the turn runner flushes before the final answer is shown, so
    a crash loses at most the steps in flight and a delivered answer is always stored.

    A write that fails is the end of the journal: nothing after it is stored (the stored history never has
    a gap, so a replay never sees a tool result without its call), `on_failure` hears of it at once (the
    turn stops there, a model call in flight included), and every later `write` raises its error instead
    of queueing behind it, so a failure never waits for the end of the turn to surface."""

    def __init__(self, store: Callable[[Sequence[T]], Awaitable[Any]] | None = None,
                 on_failure: Callable[[BaseException], object] | None = None) -> None:
        self.store = store
        self.failure: BaseException | None = None
        self.on_failure = on_failure
        self._queued: list[T] = []
        self._writer: asyncio.Future[None] | None = None

    def write(self, step: T, *, hold: bool = False) -> None:
        if self.failure is not None:
            raise self.failure
        self._queued.append(step)
        if not hold:
            self._start()

    async def flush(self) -> None:
        """Write every step and wait for it; raise the first failure."""
        while True:
            self._start()
            if self._writer is None:
                return
            await asyncio.shield(self._writer)
            if not self._queued or self.failure is not None:
                if self.failure is not None:
                    raise self.failure
                return

    async def settle(self) -> None:
        """`flush` without raising (a failure stays in `failure`)."""
        with contextlib.suppress(Exception):  # it is `failure`
            await self.flush()

    def _start(self) -> None:
        if self._queued and self.failure is None and (self._writer is None or self._writer.done()):
            self._writer = asyncio.ensure_future(self._write_queued())
            self._writer.add_done_callback(_retrieved)

    async def _write_queued(self) -> None:
        assert self.store is not None, "a journal with steps needs a store"
        while self._queued and self.failure is None:
            batch, self._queued = self._queued, []
            try:
                await self.store(batch)
            except Exception as exc:
                self._queued.clear()
                self._failed(exc)
                raise

    def _failed(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            if self.on_failure is not None:
                self.on_failure(exc)


def _retrieved(writer: asyncio.Future[None]) -> None:
    if not writer.cancelled():
        writer.exception()  # kept as `failure`, raised by `flush`
