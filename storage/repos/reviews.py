"""The `ReviewQueue` role (migration 0012): background reviews that are due, one row per session.

Marking is one upsert (two replicas marking one session at once leave one row, with both prompts); clearing
is one delete that names the version it ran, so a review marked again meanwhile stays due.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from hermes_engine.ports.storage import DueReview
from storage.models import DueReviewRow, table_of
from storage.repos.base import SqlRepository, whole
from storage.values import clean

__all__ = ["ReviewRepository"]


def _due(row: Any) -> DueReview:
    return DueReview(bot=row.bot, session_id=row.session_id, session_key=row.session_key,
                     person_id=row.person_id, memory=bool(row.memory), skill=bool(row.skill),
                     scope=dict(row.scope or {}), version=row.version, due_at=row.due_at)


class ReviewRepository(SqlRepository):
    """`hermes_engine.ports.storage.ReviewQueue`."""

    @whole
    async def mark_review_due(self, bot: str, session_id: int, *, session_key: str, person_id: int | None,
                              memory: bool, skill: bool, scope: dict[str, Any]) -> DueReview:
        table = table_of(DueReviewRow)
        stmt = self._insert(table).values(bot=bot, session_id=session_id, session_key=session_key,
                                          person_id=person_id, memory=memory, skill=skill,
                                          scope=clean(dict(scope)), version=1, due_at=self._now())
        stmt = stmt.on_conflict_do_update(
            index_elements=["bot", "session_id"],
            set_={"session_key": stmt.excluded.session_key, "person_id": stmt.excluded.person_id,
                  "memory": sa.or_(table.c.memory, stmt.excluded.memory),
                  "skill": sa.or_(table.c.skill, stmt.excluded.skill),
                  "scope": stmt.excluded.scope, "version": table.c.version + 1},
        ).returning(*table.c)
        async with self._single() as session, session.begin():
            return _due((await session.execute(stmt)).one())

    @whole
    async def due_reviews(self, bot: str, session_id: int | None = None) -> list[DueReview]:
        query = sa.select(DueReviewRow).where(DueReviewRow.bot == bot)
        if session_id is not None:
            query = query.where(DueReviewRow.session_id == session_id)
        async with self._session() as session:
            rows = (await session.scalars(query.order_by(DueReviewRow.due_at, DueReviewRow.session_id))).all()
            return [_due(row) for row in rows]

    @whole
    async def clear_review(self, bot: str, session_id: int, version: int) -> bool:
        async with self._single() as session, session.begin():
            result = await session.execute(
                sa.delete(DueReviewRow)
                .where(DueReviewRow.bot == bot, DueReviewRow.session_id == session_id,
                       DueReviewRow.version == version)
                .returning(DueReviewRow.session_id))
            return result.first() is not None
