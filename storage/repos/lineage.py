"""Compaction lineage: the `CompactionLineage` role (migration 0002), what compression summarised, so a
restart rebuilds the same view.

The functions work on an engine, so a tool holding only an engine can use them too:

    record = await record_compaction(engine, session_id=7, first_message_id=3, last_message_id=40, ...)
    latest = await latest_compaction(engine, 7)

Like every store call, each runs to completion even when its caller is cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_engine.ports.storage import CompactionRecord, MessageRef
from storage.models import CompactionRow, MessageRow, table_of
from storage.repos.base import SqlRepository, whole_call
from storage.values import utc

__all__ = ["LineageRepository", "compactions", "latest_compaction", "list_compactions", "message_refs_after",
           "record_compaction"]

compactions = table_of(CompactionRow)
messages = table_of(MessageRow)


def _compaction(row: Any) -> CompactionRecord:
    return CompactionRecord(id=row.id, session_id=row.session_id, parent_id=row.parent_id,
                            first_message_id=row.first_message_id, last_message_id=row.last_message_id,
                            summary=row.summary, reason=row.reason, tokens_before=row.tokens_before,
                            tokens_after=row.tokens_after, created_at=utc(row.created_at))


@whole_call
async def record_compaction(engine: AsyncEngine, *, session_id: int, first_message_id: int,
                            last_message_id: int, summary: str, tokens_before: int, tokens_after: int,
                            parent_id: int | None = None, reason: str = "agent",
                            now: datetime | None = None) -> CompactionRecord:
    values = dict(session_id=session_id, parent_id=parent_id, first_message_id=first_message_id,
                  last_message_id=last_message_id, summary=summary.replace("\x00", "\ufffd"), reason=reason,
                  tokens_before=tokens_before, tokens_after=tokens_after,
                  created_at=now or datetime.now(UTC))
    async with engine.begin() as conn:
        row = (await conn.execute(compactions.insert().values(**values).returning(*compactions.c))).one()
    return _compaction(row)


@whole_call
async def latest_compaction(engine: AsyncEngine, session_id: int) -> CompactionRecord | None:
    async with engine.connect() as conn:
        row = (await conn.execute(sa.select(compactions).where(compactions.c.session_id == session_id)
                                  .order_by(compactions.c.id.desc()).limit(1))).first()
    return _compaction(row) if row is not None else None


@whole_call
async def list_compactions(engine: AsyncEngine, session_ids: Sequence[int] | None = None) -> list[CompactionRecord]:
    """Compactions, oldest first (all, or of the given sessions)."""
    stmt = sa.select(compactions).order_by(compactions.c.id)
    if session_ids is not None:
        stmt = stmt.where(compactions.c.session_id.in_(list(session_ids)))
    async with engine.connect() as conn:
        return [_compaction(row) for row in await conn.execute(stmt)]


@whole_call
async def message_refs_after(engine: AsyncEngine, session_id: int, after_id: int) -> list[MessageRef]:
    """The session's stored messages with an id above `after_id`, in order."""
    stmt = (sa.select(messages.c.id, messages.c.role, messages.c.content, messages.c.tool_call_id, messages.c.meta)
            .where(messages.c.session_id == session_id, messages.c.id > after_id).order_by(messages.c.id))
    async with engine.connect() as conn:
        rows = (await conn.execute(stmt)).all()
    return [MessageRef(r.id, r.role, r.content, r.tool_call_id, (r.meta or {}).get("event_id")) for r in rows]


class LineageRepository(SqlRepository):
    """`hermes_engine.ports.storage.CompactionLineage`, on the store's engine and clock."""

    async def record_compaction(self, *, session_id: int, first_message_id: int, last_message_id: int,
                                summary: str, tokens_before: int, tokens_after: int,
                                parent_id: int | None = None, reason: str = "agent") -> CompactionRecord:
        return await record_compaction(
            self.engine, session_id=session_id, first_message_id=first_message_id,
            last_message_id=last_message_id, summary=summary, tokens_before=tokens_before,
            tokens_after=tokens_after, parent_id=parent_id, reason=reason, now=self._now())

    async def latest_compaction(self, session_id: int) -> CompactionRecord | None:
        return await latest_compaction(self.single_engine, session_id)

    async def list_compactions(self, session_ids: Sequence[int] | None = None) -> list[CompactionRecord]:
        return await list_compactions(self.engine, session_ids)

    async def message_refs_after(self, session_id: int, after_id: int) -> list[MessageRef]:
        return await message_refs_after(self.engine, session_id, after_id)
