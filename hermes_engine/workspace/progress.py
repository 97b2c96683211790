"""A command's output shown while it runs: pushed into the reply as interim text (a fenced block under the
command), at most `PROGRESS_BYTES` of it, and replaced by the answer when the model gives one.

The sandbox reads output in a worker thread; chunks cross to the event loop through a queue, and one task
pushes them, so a chatty command costs the chat a few edits, not one per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

PROGRESS_BYTES = 3000


class OutputShown:
    def __init__(self, progress: Callable[[str], Awaitable[None]], command: str) -> None:
        self.progress = progress
        self.command = command
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._pump())

    def feed(self, chunk: bytes) -> None:
        """From the worker thread: one chunk of output."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, chunk)

    async def close(self) -> None:
        self.queue.put_nowait(None)
        with contextlib.suppress(Exception):
            await self.task

    async def _pump(self) -> None:
        budget, opened = PROGRESS_BYTES, False
        while (chunk := await self.queue.get()) is not None:
            while not self.queue.empty():  # whatever arrived meanwhile goes out in the same push
                more = self.queue.get_nowait()
                if more is None:
                    self.queue.put_nowait(None)
                    break
                chunk += more
            if budget <= 0:
                continue
            text = chunk[:budget].decode("utf-8", "replace").replace("```", "'''")
            budget -= len(chunk)
            if not opened:
                text, opened = f"\n\n`$ {self.command[:200]}`\n```\n{text}", True
            await self.progress(text + ("\n…" if budget <= 0 else ""))
        if opened:
            await self.progress("\n```\n\n")
