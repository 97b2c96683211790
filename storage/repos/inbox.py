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


def _inbound(row: InboundEventRow) -> InboundEvent:
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

    @whole
    async def pending_inbound(self, platform: str | None = None, *,
                              session_key: str | None = None) -> list[InboundEvent]:
        """Events received but not completed, oldest first; with `session_key`, that session's and those
        recorded without one (the index on status, session key and id finds both)."""
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
