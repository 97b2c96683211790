"""Blocking code (run in worker threads) calling an async store: each call is handed to the event loop the
store lives on and waited for. Calling from that loop itself would wait forever, so it is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def call_on_loop(loop: asyncio.AbstractEventLoop, call: Coroutine[Any, Any, T], what: str) -> T:
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # a worker thread: the normal case
        running = None
    if running is loop:
        call.close()
        raise RuntimeError(f"{what} blocks: call it from a worker thread (asyncio.to_thread), not on its event loop")
    return asyncio.run_coroutine_threadsafe(call, loop).result()


__all__ = ["call_on_loop"]
