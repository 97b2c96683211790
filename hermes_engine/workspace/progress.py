"""A command's output shown while it runs: pushed into the reply as interim text (a fenced block under the
command), its first `PROGRESS_BYTES` as they come and, when it ends, its last `TAIL_BYTES` and the exit code;
the answer replaces it when the model gives one. The reply can only grow while the command runs, so the tail
waits for the end rather than scrolling.

The sandbox reads output in a worker thread; chunks cross to the event loop through a queue, and one task
pushes them, so a chatty command costs the chat a few edits, not one per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from hermes_engine.workspace.sandbox import RunResult

PROGRESS_BYTES = 3000
TAIL_BYTES = 1000


class OutputShown:
    def __init__(self, progress: Callable[[str], Awaitable[None]], command: str) -> None:
        self.progress = progress
        self.command = command
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.shown = 0  # bytes of output pushed so far
        self.seen = 0  # bytes of output received
        self.task = asyncio.ensure_future(self._pump())

    def feed(self, chunk: bytes) -> None:
        """From the worker thread: one chunk of output."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, chunk)

    async def close(self, result: RunResult | None = None) -> None:
        """The command ended (`result`, unless it never ran): what the head left out of its tail, then how it
        ended, and the block is closed."""
        self.queue.put_nowait(None)
        with contextlib.suppress(Exception):
            await self.task
        if result is None:
            if self.shown:
                await self.progress("\n```\n\n")
            return
        end = "[killed: the command ran past its time limit]" if result.timed_out else f"[exit code {result.exit_code}]"
        text = ""
        if self.seen > self.shown:  # the sandbox kept the whole output's end: head and tail meet when short
            n = min(TAIL_BYTES, self.seen - self.shown)
            skipped = self.seen - self.shown - n
            text = (f"\n… {skipped:,} bytes …\n" if skipped else "") + _fenced((result.head + result.tail)[-n:])
        if not self.shown:
            text = f"\n\n`$ {self.command[:200]}`\n```\n{text}"
        await self.progress(f"{text}{'' if text.endswith(chr(10)) or not text else chr(10)}```\n{end}\n\n")

    async def _pump(self) -> None:
        while (chunk := await self.queue.get()) is not None:
            while not self.queue.empty():  # whatever arrived meanwhile goes out in the same push
                more = self.queue.get_nowait()
                if more is None:
                    self.queue.put_nowait(None)
                    break
                chunk += more
            self.seen += len(chunk)
            budget = PROGRESS_BYTES - self.shown
            if budget <= 0:
                continue
            part = chunk[:budget]
            text = _fenced(part)
            if not self.shown:
                text = f"\n\n`$ {self.command[:200]}`\n```\n{text}"
            self.shown += len(part)
            await self.progress(text)


def _fenced(data: bytes) -> str:
    """Output as text that cannot close the fence it is shown in."""
    return data.decode("utf-8", "replace").replace("```", "'''")
