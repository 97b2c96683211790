"""Turns and tokens per bot, person and day (the `UsageLedger` role): what usage limits count."""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa

from hermes_engine.ports.storage import UsageCount
from storage.models import UsageRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["UsageRepository"]


class UsageRepository(SqlRepository):
    """`hermes_engine.ports.storage.UsageLedger`: one row per bot, person and day."""

    # One statement each, at most three per turn: they take the per-message path (`_hot`: on SQLite its
    # thread, far quicker than a round through the async driver).

    async def add_usage(self, bot: str, person_id: int, day: date, *, turns: int = 0, tokens: int = 0) -> None:
        """One upsert that adds to the stored counts in the database, so replicas counting at the same
        moment both count (no read-modify-write)."""
        table = table_of(UsageRow)
        stmt = self._insert(table).values(bot=bot, person_id=person_id, day=day, turns=turns, tokens=tokens)
        stmt = stmt.on_conflict_do_update(
            index_elements=["bot", "person_id", "day"],
            set_={"turns": table.c.turns + stmt.excluded.turns, "tokens": table.c.tokens + stmt.excluded.tokens})
        await self._hot(stmt, {}, lambda _: None)

    async def count_turn(self, bot: str, person_id: int, day: date, *, max_turns: int | None = None,
                         max_tokens: int | None = None) -> bool:
        """The upsert's update only fires under the limits; no row back means the turn was refused."""
        table = table_of(UsageRow)
        under = [column < limit for column, limit in ((table.c.turns, max_turns), (table.c.tokens, max_tokens))
                 if limit is not None]
        stmt = self._insert(table).values(bot=bot, person_id=person_id, day=day, turns=1, tokens=0)
        stmt = stmt.on_conflict_do_update(
            index_elements=["bot", "person_id", "day"], set_={"turns": table.c.turns + 1},
            where=sa.and_(*under) if under else None).returning(table.c.turns)
        return bool(await self._hot(stmt, {}, lambda result: result.first() is not None))

    async def usage_of(self, bot: str, person_id: int, day: date) -> UsageCount:
        stmt = (sa.select(UsageRow.turns, UsageRow.tokens)
                .where(UsageRow.bot == bot, UsageRow.person_id == person_id, UsageRow.day == day))
        row = await self._hot(stmt, {}, lambda result: result.first())
        return UsageCount(row.turns, row.tokens) if row is not None else UsageCount()

    async def usage_total(self, bot: str, day: date) -> UsageCount:
        stmt = (sa.select(sa.func.coalesce(sa.func.sum(UsageRow.turns), 0),
                          sa.func.coalesce(sa.func.sum(UsageRow.tokens), 0))
                .where(UsageRow.bot == bot, UsageRow.day == day))
        turns, tokens = await self._hot(stmt, {}, lambda result: tuple(result.one()))
        return UsageCount(int(turns), int(tokens))

    @whole
    async def merge_usage(self, keep_person_id: int, merge_person_id: int) -> None:
        """An upsert from a select adds the merged person's rows to the kept person's (a day only the merged
        one used is moved as it is) and the merged rows go, in one transaction, so a day is never counted
        twice nor dropped. A turn already under way for the merged person when it runs still counts on
        that person's row: only what was counted up to the link is joined."""
        if keep_person_id == merge_person_id:
            return
        table = table_of(UsageRow)
        merged = sa.select(table.c.bot, sa.literal(keep_person_id), table.c.day, table.c.turns, table.c.tokens)
        merged = merged.where(table.c.person_id == merge_person_id)
        stmt = self._insert(table).from_select(["bot", "person_id", "day", "turns", "tokens"], merged)
        stmt = stmt.on_conflict_do_update(
            index_elements=["bot", "person_id", "day"],
            set_={"turns": table.c.turns + stmt.excluded.turns, "tokens": table.c.tokens + stmt.excluded.tokens})
        async with self._write() as session:
            await session.execute(stmt)
            await session.execute(sa.delete(table).where(table.c.person_id == merge_person_id))
