"""A unit of work queued on a session, and the per-session lane that runs them one at a time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hermes_engine.agent.loop import TurnResult
from hermes_engine.ports.inbound import InboundMessage


@dataclass
class TurnJob:
    message: InboundMessage
    person_id: int
    purpose: str = "turn"  # "turn" | "goal" | "command"
    replayed: bool = False  # re-run after a restart; the user message may already be stored
    done: asyncio.Future[TurnResult | None] | None = None
    recorded: asyncio.Future[bool] | None = None  # the inbox write under way; False: a duplicate

    async def is_new(self) -> bool:
        return True if self.recorded is None else await asyncio.shield(self.recorded)

    def known_duplicate(self) -> bool:
        """The inbox write has already found this event recorded: not even a model call."""
        return self.recorded is not None and self.recorded.done() and not self.recorded.result()


@dataclass
class Lane:
    """One session's queue, its worker and the turn it is running."""

    queue: asyncio.Queue[TurnJob] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[TurnResult | None] | None = None

    @property
    def busy(self) -> bool:
        return (self.worker is not None and not self.worker.done()) or not self.queue.empty()
