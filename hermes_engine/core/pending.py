"""The inbox's pending events as one bot sees them: grouped by session, oldest first.

A session's lease holder answers every pending event of that session, whichever replica received it, so
the person's order is the inbox's order. An event a replica has run and left pending (its answer could not
be delivered) is not taken again by that replica's lanes: another replica may try it once, and this one
again after a restart or a storage outage (`forced`), as before there were replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from hermes_engine.ports.inbound import InboundMessage, message_from_payload
from hermes_engine.ports.storage import InboundEvent, Inbox


class PendingEvents:
    def __init__(self, store: Inbox, bot: str, platforms: Container[str],
                 session_key: Callable[[InboundMessage], str]) -> None:
        self.store = store
        self.bot = bot
        self.platforms = platforms
        self.session_key = session_key
        self._tried: dict[tuple[str, str], int] = {}  # event -> when it was marked (a running count)
        self._marks = 0

    async def by_session(self, *, forced: bool = False, only: str | None = None,
                         ) -> dict[str, list[tuple[InboundEvent, InboundMessage]]]:
        """This bot's pending events per session key, oldest first; without `forced`, not those tried here.
        With `only`, the store is asked for that session's events (and those recorded without a key)."""
        since = self._marks
        events = await self.store.pending_inbound(session_key=only)
        if only is None:  # a whole read: what is not in it is finished
            self._forget_finished(events, since)
        return self._grouped(events, forced=forced)

    def _grouped(self, events: list[InboundEvent], *, forced: bool,
                 ) -> dict[str, list[tuple[InboundEvent, InboundMessage]]]:
        sessions: dict[str, list[tuple[InboundEvent, InboundMessage]]] = {}
        for event in events:
            if event.platform not in self.platforms or event.payload.get("bot", self.bot) != self.bot:
                continue
            if not forced and (event.platform, event.event_id) in self._tried:
                continue
            msg = message_from_payload(event.payload["message"])
            sessions.setdefault(self.session_key(msg), []).append((event, msg))
        return sessions

    def among(self, session_key: str, events: list[InboundEvent]) -> list[tuple[InboundEvent, InboundMessage]]:
        """`of`, from events the store has just handed over (`Inbox.complete_and_pending`), not read again."""
        return self._grouped(events, forced=False).get(session_key, [])

    async def of(self, session_key: str) -> list[tuple[InboundEvent, InboundMessage]]:
        return (await self.by_session(only=session_key)).get(session_key, [])

    def tried(self, platform: str, event_id: str) -> None:
        self._marks += 1
        self._tried[(platform, event_id)] = self._marks

    def _forget_finished(self, events: list[InboundEvent], since: int) -> None:
        """A tried event that a whole read no longer finds pending is finished and will not be offered
        again, so the marks stay as few as the pending events. A mark made while the store was read stays:
        the read may be older than its event."""
        pending = {(event.platform, event.event_id) for event in events}
        self._tried = {key: mark for key, mark in self._tried.items() if key in pending or mark > since}

    def forget(self, platform: str, event_id: str) -> None:
        self._tried.pop((platform, event_id), None)
