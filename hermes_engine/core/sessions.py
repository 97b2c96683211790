"""The sessions one gateway holds in memory: a bounded table, the least recently used leave first.

A loaded session carries its whole history, so keeping every session ever seen would grow without end.
Past `max_live` sessions the least recently used idle ones are dropped (never one the caller says is busy,
i.e. with a turn queued or running). The store has everything, so the next message for a dropped session
loads it again.

Loading is per key: messages for one new session arriving together share one store read, and messages for
different sessions load side by side (a burst of new conversations does not queue behind one lock).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator

from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.session import SessionHandle, SessionScope
from hermes_engine.ports.storage import SessionRecord


def new_handle(bot: str, key: str, record: SessionRecord, msg: InboundMessage) -> SessionHandle:
    """A session as loaded for `msg`: shared memory is the group's, answers go where the message came from."""
    dm = msg.chat_kind is ChatKind.DM
    scope = SessionScope(bot=bot, session_id=record.id, session_key=key, chat_kind=msg.chat_kind.value,
                         person_id=None, shared_scope=None if dm else f"{msg.platform}:{msg.account}:{msg.chat_id}")
    return SessionHandle(key=key, record=record, scope=scope,
                         target=ReplyTarget(msg.platform, msg.account, msg.chat_id, msg.thread_id))


def unload(session: SessionHandle) -> None:
    """What the session loaded goes together (history and its usage, frozen prompt, tool list):
    `ensure_loaded` reads them from the store again."""
    session.history.drop()
    session.usage = Usage()
    session.system_prompt = None
    session.tools = None


class SessionTable:
    def __init__(self, max_live: int) -> None:
        if max_live < 1:
            raise ValueError("max_live must be at least 1")
        self.max_live = max_live
        self._sessions: OrderedDict[str, SessionHandle] = OrderedDict()
        self._loading: dict[str, asyncio.Future[SessionHandle]] = {}  # loads under way, one per key

    def get(self, key: str) -> SessionHandle | None:
        """A lookup that does not count as use (features, commands)."""
        return self._sessions.get(key)

    def use(self, key: str) -> SessionHandle | None:
        """A lookup for a message: the session becomes the most recently used."""
        session = self._sessions.get(key)
        if session is not None:
            self._sessions.move_to_end(key)
        return session

    async def load(self, key: str, load: Callable[[], Awaitable[SessionHandle]]) -> SessionHandle:
        """The session `load()` reads for `key`, or the one a load already under way for `key` returns.
        The load runs to its end even if a caller is cancelled: others may be waiting for it."""
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(load())
            loading.add_done_callback(lambda done: self._loaded(key, done))
        return await asyncio.shield(loading)

    def _loaded(self, key: str, done: asyncio.Future[SessionHandle]) -> None:
        if self._loading.get(key) is done:
            del self._loading[key]
        if not done.cancelled():
            done.exception()  # retrieved: a caller still waiting gets it through the shield

    def add(self, session: SessionHandle, busy: Callable[[str], bool]) -> list[SessionHandle]:
        """Hold `session` as the most recently used; returns the idle sessions dropped to make room."""
        self._sessions[session.key] = session
        self._sessions.move_to_end(session.key)
        excess = len(self._sessions) - self.max_live
        doomed: list[str] = []
        for key in self._sessions:  # oldest first
            if len(doomed) >= excess:
                break
            if key != session.key and not busy(key):
                doomed.append(key)
        return [self._sessions.pop(key) for key in doomed]

    def values(self) -> list[SessionHandle]:
        return list(self._sessions.values())

    def __contains__(self, key: object) -> bool:
        return key in self._sessions

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)
