"""The pending events a replica's lanes may take: one it ran and left pending is not taken again, and what it
remembers about tried events lasts only as long as they are pending (a gateway answering for months keeps
no trace of each answered message)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from hermes_engine.core.pending import PendingEvents
from hermes_engine.ports.inbound import ChatKind, InboundMessage, message_to_payload
from hermes_engine.ports.storage import InboundEvent, Inbox


def _event(n: int) -> InboundEvent:
    msg = InboundMessage(platform="telegram", account="bot", chat_kind=ChatKind.DM, chat_id=f"c{n}",
                         user_id=f"u{n}", text=f"hello {n}", message_id=str(n))
    return InboundEvent("telegram", f"e{n}", "received", {"message": message_to_payload(msg)})


class Inbox_:
    """The inbox as the lanes read it: the events still pending, optionally held mid-read."""

    def __init__(self) -> None:
        self.pending: list[InboundEvent] = []
        self.hold: asyncio.Event | None = None
        self.reading = asyncio.Event()

    async def pending_inbound(self, platform: str | None = None, session_key: str | None = None,
                              ) -> list[InboundEvent]:
        snapshot = list(self.pending)
        self.reading.set()
        if self.hold is not None:
            await self.hold.wait()
        return snapshot


def _pending(inbox: Inbox_) -> PendingEvents:
    def key(msg: InboundMessage) -> str:
        return msg.chat_id
    return PendingEvents(cast(Inbox, inbox), "bot", {"telegram"}, key)


def _keys(sessions: dict[str, list[tuple[InboundEvent, Any]]]) -> set[str]:
    return {event.event_id for events in sessions.values() for event, _ in events}


async def test_an_event_tried_here_and_left_pending_is_not_offered_to_this_replica_again():
    inbox = Inbox_()
    inbox.pending = [_event(1), _event(2)]
    pending = _pending(inbox)
    pending.tried("telegram", "e1")
    assert _keys(await pending.by_session()) == {"e2"}
    assert _keys(await pending.by_session(forced=True)) == {"e1", "e2"}


async def test_what_is_remembered_of_tried_events_leaves_with_them_once_they_are_finished():
    inbox = Inbox_()
    pending = _pending(inbox)
    for n in range(1_000):
        inbox.pending = [_event(n)]
        pending.tried("telegram", f"e{n}")
        inbox.pending = []  # answered
        await pending.by_session()
    assert pending._tried == {}


async def test_a_mark_made_while_the_inbox_is_read_outlives_that_read():
    """The read may have begun before the event arrived: absent from it is not finished."""
    inbox = Inbox_()
    pending = _pending(inbox)
    inbox.hold = asyncio.Event()
    read = asyncio.create_task(pending.by_session())
    await inbox.reading.wait()
    inbox.pending = [_event(7)]  # arrives after the read's snapshot, and is run and left pending here
    pending.tried("telegram", "e7")
    inbox.hold.set()
    await read
    inbox.hold = None
    assert _keys(await pending.by_session()) == set()
    assert _keys(await pending.by_session(forced=True)) == {"e7"}


async def test_a_read_of_one_sessions_events_keeps_what_is_remembered_of_the_others():
    inbox = Inbox_()
    pending = _pending(inbox)
    inbox.pending = [_event(1), _event(2)]
    pending.tried("telegram", "e1")
    inbox.pending = [_event(2)]  # what the store returns for session c2 alone
    assert _keys({"c2": await pending.of("c2")}) == {"e2"}
    inbox.pending = [_event(1), _event(2)]  # e1 is still pending: it was never finished
    assert _keys(await pending.by_session()) == {"e2"}
