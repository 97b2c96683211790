"""An answer delivered at most once per idempotency key, on the engine's `DeliveryLedger`.

Every message id is recorded as its send returns, before anything else happens, so a crash leaves a
message to edit, never one to repeat; the key is marked final once the last part landed.

What this process read or wrote for an unfinished key is kept until the key is final: the answer's stream
reads the ledger once when it opens (an earlier life may have left messages), and the final delivery then
knows the rest without asking again. Nobody else writes the key meanwhile: one replica answers a session
at a time, under its lease, and a new life of the process starts with nothing known.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from adapters.parts import SentMessage
from hermes_engine.errors import PlatformError
from hermes_engine.ports.reply import Delivery, DeliveryLedger

__all__ = ["OnceLedger", "Remember"]

Remember = Callable[[Sequence[SentMessage]], Awaitable[None]]

KNOWN_KEYS = 1024  # unfinished keys remembered (an answer whose final delivery never came is forgotten)


class OnceLedger:
    """The ledger of one adapter, and the deliveries of it under way in this process."""

    def __init__(self, ledger: DeliveryLedger) -> None:
        self.ledger = ledger
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._known: OrderedDict[str, Delivery | None] = OrderedDict()

    async def get(self, key: str) -> Delivery | None:
        if key in self._known:
            return self._known[key]
        delivery = await self.ledger.get(key)
        if delivery is None or not delivery.final:
            self._know(key, delivery)
        return delivery

    async def record(self, key: str, message_ids: Sequence[str]) -> None:
        """What the chat shows for the unfinished answer `key`."""
        await self.ledger.record(key, list(message_ids), final=False)
        self._know(key, Delivery(tuple(message_ids), final=False))

    def _know(self, key: str, delivery: Delivery | None) -> None:
        self._known[key] = delivery
        self._known.move_to_end(key)
        while len(self._known) > KNOWN_KEYS:
            self._known.popitem(last=False)

    def remembering(self, key: str | None) -> Remember | None:
        """The callback `Outbound.deliver_parts` tells of each message posted or deleted under `key`."""
        if key is None:
            return None

        async def remember(messages: Sequence[SentMessage]) -> None:
            await self.record(key, [m.id for m in messages])

        return remember

    async def deliver_once(self, key: str | None,
                           deliver: Callable[[Delivery | None], Awaitable[Sequence[str]]]) -> bool:
        """Run `deliver` unless `key` was already delivered in full; concurrent callers with one key wait
        for the first and do nothing if it succeeded. `deliver` gets what an earlier attempt left (a crash
        between the first send and the final edit): the messages to finish in place. Returns whether this
        call delivered."""
        if key is None:
            await deliver(None)
            return True
        while True:
            running = self._inflight.get(key)
            if running is None:
                break
            try:
                await asyncio.shield(running)
                return False
            except Exception:  # noqa: BLE001 - the other attempt failed: try ourselves
                continue
        mine: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        mine.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._inflight[key] = mine
        try:
            earlier = await self.get(key)
            if earlier is not None and earlier.final:
                mine.set_result(None)
                return False
            ids = await deliver(earlier)
            await self.ledger.record(key, list(ids), final=True)
            self._known.pop(key, None)
            mine.set_result(list(ids))
            return True
        except BaseException as exc:
            if not mine.done():
                mine.set_exception(exc if isinstance(exc, Exception) else PlatformError("delivery cancelled"))
            raise
        finally:
            if self._inflight.get(key) is mine:
                del self._inflight[key]
