"""A unit of work queued on a session, and the per-session lane that runs them one at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hermes_engine.agent.loop import TurnResult
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.storage import InboundEvent

log = logging.getLogger(__name__)


@dataclass
class TurnJob:
    message: InboundMessage
    person_id: int
    purpose: str = "turn"  # "turn" | "goal" | "command"
    replayed: bool = False  # re-run after a restart; the user message may already be stored
    done: asyncio.Future[TurnResult | None] | None = None
    recorded: asyncio.Future[bool] | None = None  # the inbox write under way; False: a duplicate
    # The session's events still pending when this one was completed (`Inbox.complete_and_pending`): what
    # its lane answers next, known without reading the inbox again. None: the lane reads it.
    pending_after: list[InboundEvent] | None = None
    # When its lane saw its inbox write done (monotonic): the write landed before. Replayed: long ago.
    recorded_at: float = float("-inf")

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
    left: Callable[[], None] = lambda: None  # a queued job leaves the queue (the queue depth metric)
    lingering: bool = False  # its worker holds the session's lease, waiting for the session's next message
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, job: TurnJob) -> None:
        self.queue.put_nowait(job)
        self.arrived.set()

    def wake(self) -> None:
        """End a wait in `linger` now (the gateway winds down)."""
        self.arrived.set()

    async def linger(self, seconds: float) -> bool:
        """Wait up to `seconds` for the next job; True when one is queued."""
        if self.queue.empty():
            self.arrived.clear()
            self.lingering = True
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.arrived.wait(), seconds)
            finally:
                self.lingering = False
        return not self.queue.empty()

    async def take_queued(self, local: dict[tuple[str, str], TurnJob]) -> None:
        """Move what is queued into `local` (by event), once each event is recorded; duplicates go."""
        while not self.queue.empty():
            job = self.queue.get_nowait()
            try:
                new = await job.is_new()
            except Exception as exc:  # noqa: BLE001 - not recorded: the caller of `handle` was told
                self.left()
                settle(job, exc)
                continue
            if job.recorded is not None:
                job.recorded_at = time.monotonic()
            key = (job.message.platform, job.message.event_id)
            if not new or key in local:
                self.left()
                settle(job, None)
            else:
                local[key] = job

    def take(self, local: dict[tuple[str, str], TurnJob], key: tuple[str, str]) -> TurnJob | None:
        """The job queued here for this event, if any: it leaves the queue to run."""
        job = local.pop(key, None)
        if job is not None:
            self.left()
        return job

    def drop(self, local: dict[tuple[str, str], TurnJob]) -> None:
        """Jobs answered elsewhere (or left to the replica holding the session): nothing to do here."""
        for job in local.values():
            self.left()
            settle(job, None)
        local.clear()

    @property
    def active(self) -> bool:
        """Its worker runs (a lingering one included: it holds the session's lease) or a job waits."""
        return (self.worker is not None and not self.worker.done()) or not self.queue.empty()

    @property
    def busy(self) -> bool:
        """Work is queued or running (a lingering worker has none)."""
        return (self.active and not self.lingering) or not self.queue.empty()


def settle(job: TurnJob, outcome: TurnResult | Exception | None) -> None:
    """Tell whoever waits on the job (if anyone) how it ended."""
    if job.done is None or job.done.done():
        return
    if isinstance(outcome, Exception):
        job.done.set_exception(outcome)
    else:
        job.done.set_result(outcome)


async def run_settling(job: TurnJob, run: Awaitable[TurnResult | None], session_key: str) -> None:
    """Run a job on its session's lane; a failure is logged and kept for whoever waits, the lane goes on."""
    try:
        settle(job, await run)
    except asyncio.CancelledError:
        if job.done is not None and not job.done.done():
            job.done.cancel()
        raise
    except Exception as exc:  # keep the worker alive for the next message
        log.exception("session %s: job failed", session_key)
        settle(job, exc)
