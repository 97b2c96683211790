"""The `ApprovalStore` role (migration 0013): approval requests any replica can answer.

Answering and ending are single conditional updates on a pending row (`state = 'pending'`), so whichever
statement the database runs first wins and the other changes nothing: two presses on two replicas cannot
both decide, and a press cannot slip in after the asking replica ended the request.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from hermes_engine.ports.storage import ApprovalRecord
from storage.models import ApprovalRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["ApprovalRepository"]

KEPT_AFTER_EXPIRY = timedelta(days=1)


class ApprovalRepository(SqlRepository):
    """`hermes_engine.ports.storage.ApprovalStore`."""

    @whole
    async def record_approval(self, request_id: str, bot: str, session_key: str, expires_at: datetime,
                              asked_by: str | None = None, *, command: str | None = None,
                              risk: str | None = None) -> None:
        now = self._now()
        table = table_of(ApprovalRow)
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(table).where(table.c.expires_at < now - KEPT_AFTER_EXPIRY))
            await conn.execute(sa.insert(table).values(id=request_id, bot=bot, session_key=session_key,
                                                       state="pending", expires_at=expires_at, created_at=now,
                                                       asked_by=asked_by, command=command, risk=risk))

    @whole
    async def get_approval(self, request_id: str) -> ApprovalRecord | None:
        async with self._session() as session:
            row = (await session.execute(sa.select(ApprovalRow).where(ApprovalRow.id == request_id))).scalar()
            return None if row is None else _record(row)

    @whole
    async def answer_approval(self, request_id: str, bot: str, decision: str, decided_by: str) -> bool:
        table = table_of(ApprovalRow)
        stmt = (sa.update(table)
                .where(table.c.id == request_id, table.c.bot == bot, table.c.state == "pending",
                       table.c.expires_at > self._now())
                .values(state="decided", decision=decision, decided_by=decided_by, decided_at=self._now())
                .returning(table.c.id))
        async with self._single() as session, session.begin():
            return (await session.execute(stmt)).first() is not None

    @whole
    async def end_approval(self, request_id: str) -> ApprovalRecord | None:
        table = table_of(ApprovalRow)
        async with self._session() as session, session.begin():
            await session.execute(sa.update(table).where(table.c.id == request_id, table.c.state == "pending")
                                  .values(state="ended"))
            row = (await session.execute(sa.select(ApprovalRow).where(ApprovalRow.id == request_id))).scalar()
            return None if row is None else _record(row)

    @whole
    async def recent_approvals(self, *, bot: str | None = None, limit: int = 100) -> list[ApprovalRecord]:
        query = sa.select(ApprovalRow).order_by(ApprovalRow.created_at.desc(), ApprovalRow.id).limit(limit)
        if bot is not None:
            query = query.where(ApprovalRow.bot == bot)
        async with self._session() as session:
            return [_record(row) for row in await session.scalars(query)]


def _record(row: ApprovalRow) -> ApprovalRecord:
    state: Any = row.state
    return ApprovalRecord(row.id, row.bot, row.session_key, state, row.expires_at, row.decision, row.decided_by,
                          row.asked_by, row.created_at, row.command, row.risk, row.decided_at)
