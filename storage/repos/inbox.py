"""The durable inbox: the `Inbox` role. Every inbound event is recorded once, until its answer is delivered.

`record_inbound` and `complete_inbound` are per-message writes and go through `SqlRepository._hot` (one
trip to the SQLite lane, or one statement on the async engine).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from hermes_engine.ports.inbound import LastInbound
from hermes_engine.ports.storage import InboundEvent
from storage.models import INBOUND_DONE, INBOUND_RECEIVED, INBOUND_REJECTED, InboundEventRow, table_of
from storage.repos.base import SqlRepository, whole
from storage.values import clean

__all__ = ["InboxRepository"]

# The per-message statements, built once: constructing a statement costs more than running it on SQLite.
_RECORD_INBOUND_SQLITE = (sqlite.insert(table_of(InboundEventRow))
                          .on_conflict_do_nothing(index_elements=["platform", "event_id"])
                          .returning(table_of(InboundEventRow).c.id))
_RECORD_INBOUND_PG = (postgresql.insert(table_of(InboundEventRow))
                      .on_conflict_do_nothing(index_elements=["platform", "event_id"])
                      .returning(table_of(InboundEventRow).c.id))
_COMPLETE_INBOUND = (sa.update(table_of(InboundEventRow))
                     .where(table_of(InboundEventRow).c.platform == sa.bindparam("p"),
                            table_of(InboundEventRow).c.event_id == sa.bindparam("e"))
                     .values(status=sa.bindparam("done"), completed_at=sa.bindparam("at")))


_EVENTS = table_of(InboundEventRow)
# A session's pending events (and those recorded without a session key), oldest first: what its lane answers.
_PENDING_OF_SESSION = (sa.select(_EVENTS)
                       .where(_EVENTS.c.status == INBOUND_RECEIVED,
                              sa.or_(_EVENTS.c.session_key == sa.bindparam("k"), _EVENTS.c.session_key.is_(None)))
                       .order_by(_EVENTS.c.id))
# The completion and that read in one statement on PostgreSQL (a data-modifying WITH runs whole, read or
# not); its SELECT sees the table as it was before the UPDATE, so the completed event is left out after.
_COMPLETE_THEN_PENDING_PG = _PENDING_OF_SESSION.add_cte(
    _COMPLETE_INBOUND.returning(_EVENTS.c.id).cte("completed"))


def _inbound(row: InboundEventRow | sa.Row[Any]) -> InboundEvent:
    return InboundEvent(platform=row.platform, event_id=row.event_id, status=row.status,
                        payload=dict(row.payload or {}), created_at=row.created_at, session_key=row.session_key)


def _last(row: InboundEventRow) -> LastInbound:
    sent = row.payload["message"]
    return LastInbound(str(sent["chat_id"]), sent.get("thread_id"), str(sent["message_id"]), row.created_at)


class InboxRepository(SqlRepository):
    """`hermes_engine.ports.storage.Inbox`: inbound events, received and done."""

    async def record_inbound(self, platform: str, event_id: str, payload: dict[str, Any], *,
                             session_key: str | None = None) -> bool:
        """Insert a received event; False when (platform, event_id) was seen before. One statement,
        `INSERT ... ON CONFLICT DO NOTHING RETURNING id`, so concurrent duplicates cannot both win."""
        row = {"platform": platform, "event_id": event_id, "status": INBOUND_RECEIVED,
               "payload": clean(dict(payload)), "created_at": self._now(), "session_key": session_key}
        statement = _RECORD_INBOUND_PG if self.dialect == "postgresql" else _RECORD_INBOUND_SQLITE
        try:
            return await self._hot(statement, row, lambda r: r.first() is not None)
        except IntegrityError:  # belt and braces: a unique violation is a duplicate too
            return False

    async def complete_inbound(self, platform: str, event_id: str) -> None:
        await self._hot(_COMPLETE_INBOUND, {"p": platform, "e": event_id, "done": INBOUND_DONE,
                                            "at": self._now()}, lambda r: None)

    async def complete_and_pending(self, platform: str, event_id: str, *, session_key: str) -> list[InboundEvent]:
        """One round trip: one statement on PostgreSQL, one transaction on SQLite's lane."""
        done = {"p": platform, "e": event_id, "done": INBOUND_DONE, "at": self._now(), "k": session_key}

        def rest(result: sa.CursorResult[Any]) -> list[InboundEvent]:
            return [_inbound(row) for row in result if (row.platform, row.event_id) != (platform, event_id)]

        if self.dialect == "postgresql":
            return list(await self._hot(_COMPLETE_THEN_PENDING_PG, done, rest))
        return list(await self._hot_all([(_COMPLETE_INBOUND, done), (_PENDING_OF_SESSION, {"k": session_key})], rest))

    async def pending_inbound(self, platform: str | None = None, *,
                              session_key: str | None = None) -> list[InboundEvent]:
        """Events received but not completed, oldest first; with `session_key`, that session's and those
        recorded without one (the index on status, session key and id finds both): a statement built once,
        as a lane reads it whenever it takes its session's lease."""
        if platform is None and session_key is not None:
            return list(await self._hot(_PENDING_OF_SESSION, {"k": session_key},
                                        lambda result: [_inbound(row) for row in result]))
        return await self._pending_inbound(platform, session_key=session_key)

    @whole
    async def _pending_inbound(self, platform: str | None = None, *,
                               session_key: str | None = None) -> list[InboundEvent]:
        stmt = sa.select(InboundEventRow).where(InboundEventRow.status == INBOUND_RECEIVED)
        if platform is not None:
            stmt = stmt.where(InboundEventRow.platform == platform)
        if session_key is not None:
            stmt = stmt.where(sa.or_(InboundEventRow.session_key == session_key,
                                     InboundEventRow.session_key.is_(None)))
        async with self._single() as session:
            rows = await session.scalars(stmt.order_by(InboundEventRow.id))
            return [_inbound(row) for row in rows]

    @whole
    async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None:
        """Keep an event too malformed to read, once (a platform sending it again changes nothing)."""
        row = {"platform": platform, "event_id": event_id, "status": INBOUND_REJECTED,
               "payload": clean(dict(payload)), "created_at": self._now(), "completed_at": self._now()}
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        async with self._session() as session, session.begin():
            await session.execute(insert(table_of(InboundEventRow)).values(**row)
                                  .on_conflict_do_nothing(index_elements=["platform", "event_id"]))

    @whole
    async def rejected_inbound(self, platform: str | None = None, *, limit: int = 50) -> list[InboundEvent]:
        """The latest rejected events, newest first."""
        stmt = sa.select(InboundEventRow).where(InboundEventRow.status == INBOUND_REJECTED)
        if platform is not None:
            stmt = stmt.where(InboundEventRow.platform == platform)
        async with self._single() as session:
            rows = await session.scalars(stmt.order_by(InboundEventRow.id.desc()).limit(limit))
            return [_inbound(row) for row in rows]

    @whole
    async def last_inbound(self, platform: str, account: str, *, since: datetime, limit: int) -> list[LastInbound]:
        """Per conversation (chat and thread of the recorded message), the row recorded last: the newest row
        id of each group, read back with its message id."""
        message = InboundEventRow.payload
        chat, thread = message[("message", "chat_id")].as_string(), message[("message", "thread_id")].as_string()
        newest = (sa.select(sa.func.max(InboundEventRow.id))
                  .where(InboundEventRow.platform == platform,
                         InboundEventRow.status.in_((INBOUND_RECEIVED, INBOUND_DONE)),
                         InboundEventRow.created_at >= since,
                         message[("message", "account")].as_string() == account,
                         message[("message", "synthetic")].as_boolean().is_not(True))
                  .group_by(chat, thread))
        stmt = sa.select(InboundEventRow).where(InboundEventRow.id.in_(newest))
        async with self._single() as session:
            rows = await session.scalars(stmt.order_by(InboundEventRow.id.desc()).limit(limit))
            return [_last(row) for row in rows]

    @whole
    async def prune_inbound(self, older_than: datetime) -> int:
        """Delete completed and rejected events received before `older_than`. Pending ones are kept."""
        async with self._session() as session, session.begin():
            result = await session.execute(
                sa.delete(InboundEventRow)
                .where(InboundEventRow.status.in_((INBOUND_DONE, INBOUND_REJECTED)),
                       InboundEventRow.created_at < older_than)
                .returning(InboundEventRow.id))
            return len(result.all())
