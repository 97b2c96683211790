"""A session's lane at work: its turns under the session's lease, every pending inbox event of the session
answered oldest first, whichever replica received it.

The lease is taken once for a run of turns, not per turn: after its last job the worker keeps it for
`linger` seconds (`LINGER`, 2 s, or a third of the lease when that is shorter: one renewal at most) waiting
for the session's next message, so turns that keep coming cost no lease and no re-read of the session per
turn. The wait is short because it is what a message another replica received waits at most. While it holds the lease
it knows what is pending without asking: the inbox is read once when the lease is taken, each turn's
completion hands back the session's events still pending (`Inbox.complete_and_pending`), and a message
received here since is queued here. What another replica records for the session while this one waits is
answered when the wait ends (the inbox is read again after the lease is given back) or by the takeover
round (`Gateway.replay_pending`), whichever comes first.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from hermes_engine.agent.loop import TurnResult
from hermes_engine.core.jobs import Lane, TurnJob, run_settling
from hermes_engine.core.leases import Leases
from hermes_engine.core.pending import PendingEvents
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.leases import session_lease
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import InboundEvent, SessionRecord, SessionStore

Pending = list[tuple[InboundEvent, InboundMessage]]

LINGER = 2.0  # seconds a worker keeps the session's lease after its last turn, at most


class LaneHost(Protocol):
    """What a lane asks of its gateway (`core/gateway.py`)."""

    bot: str
    leases: Leases
    pending: PendingEvents
    commands_running: set[tuple[str, str]]
    winding_down: bool

    @property
    def store(self) -> SessionStore: ...

    async def person_of(self, platform: str, account: str, user_id: str, display_name: str = "") -> int: ...

    def job_for(self, msg: InboundMessage, person_id: int, purpose: str, *, replayed: bool,
                recorded: asyncio.Future[bool] | None = None) -> TurnJob: ...

    async def run_job(self, session: SessionHandle, lane: Lane, job: TurnJob) -> TurnResult | None: ...

    def adopt(self, session: SessionHandle, record: SessionRecord) -> None: ...


class LaneWork:
    def __init__(self, gateway: LaneHost) -> None:
        self.gateway = gateway

    @property
    def linger(self) -> float:
        return min(LINGER, self.gateway.leases.renew_every)

    async def work(self, session: SessionHandle, lane: Lane, after: asyncio.Task[None] | None = None) -> None:
        """Answer the session's events under its lease: the queue here and every pending event of the
        session in the inbox (received by any replica), oldest first. When another live replica holds the
        session, what was queued here is left to it: the events are in the inbox it reads. `after`: the
        worker of the session's evicted lane, giving the lease back (it is this replica's to take then)."""
        gw = self.gateway
        if after is not None:
            await asyncio.wait({after})
        local: dict[tuple[str, str], TurnJob] = {}
        given_back = False
        while True:
            await lane.take_queued(local)
            if gw.winding_down:  # recorded: the inbox keeps them for whoever answers next
                lane.drop(local)
                return
            waiting = given_back and not local and bool(await self.waiting(session.key))
            if not local and not waiting and lane.queue.empty():  # no await since the check: no job is lost
                return
            async with gw.leases.held(session_lease(gw.bot, session.key)) as ours:
                if ours:
                    await self.refresh(session)
                    await self.drain(session, lane, local)
            lane.drop(local)  # answered meanwhile, or left to the replica that holds the session
            if not ours and lane.queue.empty():
                return
            # Given back: an event recorded by a replica that found the lease held a moment ago is ours now.
            given_back = ours

    async def drain(self, session: SessionHandle, lane: Lane, local: dict[tuple[str, str], TurnJob]) -> None:
        gw = self.gateway
        since = time.monotonic()
        pending = await self.waiting(session.key)  # once per lease: from here on the lane knows
        seen = {(event.platform, event.event_id) for event, _ in pending}
        while True:
            await lane.take_queued(local)
            if any(key not in seen and job.recorded_at < since for key, job in local.items()):
                # A job the inbox as last read could have held and did not (one the takeover or the end of an
                # outage queued from the inbox): read it again, in the inbox's order.
                since, pending = time.monotonic(), await self.waiting(session.key)
                seen = {(event.platform, event.event_id) for event, _ in pending}
            pending += _recorded_since(lane, local, seen, since)
            if not pending:
                if gw.winding_down or not await lane.linger(self.linger) or gw.winding_down:
                    return
                continue
            event, msg = pending.pop(0)
            if gw.winding_down:
                return
            key = (event.platform, event.event_id)
            if key in gw.commands_running:
                continue
            job = lane.take(local, key) or gw.job_for(
                msg, await gw.person_of(msg.platform, msg.account, msg.user_id, msg.user_name),
                event.payload.get("purpose", "turn"), replayed=True)
            gw.pending.tried(*key)
            started = time.monotonic()
            await run_settling(job, gw.run_job(session, lane, job), session.key)
            if job.pending_after is not None:  # its completion said what is still pending
                since, pending = started, [(e, m) for e, m in gw.pending.among(session.key, job.pending_after)
                                           if (e.platform, e.event_id) not in gw.commands_running]
                seen = {(e.platform, e.event_id) for e, _ in pending}
            elif not pending:  # not completed by a turn (a command, a duplicate): read the inbox again
                since, pending = time.monotonic(), await self.waiting(session.key)
                seen = {(e.platform, e.event_id) for e, _ in pending}

    async def waiting(self, key: str) -> Pending:
        """The session's pending events a lane here may take (not an immediate command under way here)."""
        running = self.gateway.commands_running
        return [(event, msg) for event, msg in await self.gateway.pending.of(key)
                if (event.platform, event.event_id) not in running]

    async def refresh(self, session: SessionHandle) -> None:
        """Another replica may have answered in this session since this one last did: read it again."""
        gw = self.gateway
        record, last_message = await gw.store.newest_with_last_message(session.key, gw.bot)
        if record.id != session.record.id:
            gw.adopt(session, record)
        session.record = record
        if last_message != session.seen_message_id:
            session.history.drop()


def _recorded_since(lane: Lane, local: dict[tuple[str, str], TurnJob], seen: set[tuple[str, str]],
                    since: float) -> Pending:
    """Jobs queued here that the inbox as last read (from `since`) could not hold yet, recorded after it,
    so after all it held. One recorded before it and not in it was answered already: it goes."""
    after: Pending = []
    for key, job in list(local.items()):
        if key in seen:
            continue
        seen.add(key)
        if job.recorded_at >= since:
            after.append((_event_of(job), job.message))
        else:
            lane.drop({key: local.pop(key)})
    return after


def _event_of(job: TurnJob) -> InboundEvent:
    """The inbox event of a job queued here, as the inbox holds it (its purpose is all the lane reads)."""
    msg = job.message
    return InboundEvent(platform=msg.platform, event_id=msg.event_id, status="received",
                        payload={"purpose": job.purpose})
