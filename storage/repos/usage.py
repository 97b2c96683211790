"""Turns, tokens and cost per bot, person and day (the `UsageLedger` role): what usage limits count, and each
model's share of it: what `/usage` breaks down."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from hermes_engine.ports.storage import ModelSpend, UsageCount
from storage.engine import Params
from storage.models import UsageModelRow, UsageRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["UsageRepository"]

_MODEL_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_micros")


def _upsert(insert: type[sqlite.Insert] | type[postgresql.Insert], row: type, keys: tuple[str, ...],
            counts: tuple[str, ...]) -> sa.Insert:
    """An upsert adding `counts` to the stored ones, its values bound by name: built once, since building
    one (its `excluded` columns above all) costs more than running it."""
    table = table_of(row)
    stmt = insert(table).values({name: sa.bindparam(name, type_=table.c[name].type) for name in (*keys, *counts)})
    return stmt.on_conflict_do_update(index_elements=list(keys),
                                      set_={name: table.c[name] + stmt.excluded[name] for name in counts})


_KEYS = ("bot", "person_id", "day")
_COUNTS = ("turns", "tokens", "cost_micros")
_ADD = {"sqlite": _upsert(sqlite.Insert, UsageRow, _KEYS, _COUNTS),
        "postgresql": _upsert(postgresql.Insert, UsageRow, _KEYS, _COUNTS)}
_ADD_MODEL = {"sqlite": _upsert(sqlite.Insert, UsageModelRow, (*_KEYS, "model"), _MODEL_COUNTS),
              "postgresql": _upsert(postgresql.Insert, UsageModelRow, (*_KEYS, "model"), _MODEL_COUNTS)}


class UsageRepository(SqlRepository):
    """`hermes_engine.ports.storage.UsageLedger`: one row per bot, person and day, and one per model of it."""

    # One statement each (on SQLite two when a turn's models are added): they take the per-message path
    # (`_hot`: on SQLite its thread, far quicker than a round through the async driver).

    async def add_usage(self, bot: str, person_id: int, day: date, *, turns: int = 0, tokens: int = 0,
                        cost_micros: int = 0, models: Sequence[ModelSpend] = ()) -> None:
        """One upsert that adds to the stored counts in the database, so replicas counting at the same
        moment both count (no read-modify-write); the models' shares likewise."""
        keys = {"bot": bot, "person_id": person_id, "day": day}
        counts = {**keys, "turns": turns, "tokens": tokens, "cost_micros": cost_micros}
        shares = [{**keys, "model": spend.model, **{name: getattr(spend, name) for name in _MODEL_COUNTS}}
                  for spend in models]
        if models and self.dialect == "postgresql":  # the models' upsert in a WITH: still one round trip
            stmt = _ADD["postgresql"].add_cte(self._add_models(shares).cte("model_shares"))
            await self._hot(stmt, counts, lambda _: None)
            return
        steps: list[tuple[Any, Params]] = [(_ADD[self.dialect], counts)]
        if shares:  # SQLite cannot write in a WITH: both in one transaction, one trip to its lane (an executemany)
            steps.append((_ADD_MODEL[self.dialect], shares))
        await self._hot_all(steps, lambda _: None)

    def _add_models(self, rows: list[dict[str, object]]) -> sa.Insert:
        table = table_of(UsageModelRow)
        stmt = self._insert(table).values(rows)
        return stmt.on_conflict_do_update(
            index_elements=["bot", "person_id", "day", "model"],
            set_={name: table.c[name] + stmt.excluded[name] for name in _MODEL_COUNTS})

    async def count_turn(self, bot: str, person_id: int, day: date, *, max_turns: int | None = None,
                         max_tokens: int | None = None, max_cost_micros: int | None = None) -> bool:
        """The upsert's update only fires under the limits; no row back means the turn was refused."""
        table = table_of(UsageRow)
        under = [column < limit for column, limit in ((table.c.turns, max_turns), (table.c.tokens, max_tokens),
                                                      (table.c.cost_micros, max_cost_micros))
                 if limit is not None]
        stmt = self._insert(table).values(bot=bot, person_id=person_id, day=day, turns=1, tokens=0, cost_micros=0)
        stmt = stmt.on_conflict_do_update(
            index_elements=["bot", "person_id", "day"], set_={"turns": table.c.turns + 1},
            where=sa.and_(*under) if under else None).returning(table.c.turns)
        return bool(await self._hot(stmt, {}, lambda result: result.first() is not None))

    async def usage_of(self, bot: str, person_id: int, day: date) -> UsageCount:
        stmt = (sa.select(UsageRow.turns, UsageRow.tokens, UsageRow.cost_micros)
                .where(UsageRow.bot == bot, UsageRow.person_id == person_id, UsageRow.day == day))
        row = await self._hot(stmt, {}, lambda result: result.first())
        return UsageCount(row.turns, row.tokens, row.cost_micros) if row is not None else UsageCount()

    async def usage_total(self, bot: str, day: date) -> UsageCount:
        return await self.usage_between(bot, None, day, day)

    async def usage_between(self, bot: str, person_id: int | None, first: date, last: date) -> UsageCount:
        sums = [sa.func.coalesce(sa.func.sum(column), 0) for column in
                (UsageRow.turns, UsageRow.tokens, UsageRow.cost_micros)]
        stmt = sa.select(*sums).where(UsageRow.bot == bot, UsageRow.day >= first, UsageRow.day <= last)
        if person_id is not None:
            stmt = stmt.where(UsageRow.person_id == person_id)
        turns, tokens, cost = await self._hot(stmt, {}, lambda result: tuple(result.one()))
        return UsageCount(int(turns), int(tokens), int(cost))

    async def spend_between(self, bot: str, person_id: int | None, first: date, last: date) -> list[ModelSpend]:
        table = table_of(UsageModelRow)
        sums = [sa.func.sum(table.c[name]).label(name) for name in _MODEL_COUNTS]
        stmt = (sa.select(table.c.model, *sums)
                .where(table.c.bot == bot, table.c.day >= first, table.c.day <= last)
                .group_by(table.c.model).order_by(sa.desc("cost_micros"), table.c.model))
        if person_id is not None:
            stmt = stmt.where(table.c.person_id == person_id)
        rows = await self._hot(stmt, {}, lambda result: result.all())
        return [ModelSpend(row.model, *(int(getattr(row, name)) for name in _MODEL_COUNTS)) for row in rows]

    @whole
    async def merge_usage(self, keep_person_id: int, merge_person_id: int) -> None:
        """An upsert from a select adds the merged person's rows to the kept person's (a day only the merged
        one used is moved as it is) and the merged rows go, in one transaction, so a day is never counted
        twice nor dropped. A turn already under way for the merged person when it runs still counts on
        that person's row: only what was counted up to the link is joined."""
        if keep_person_id == merge_person_id:
            return
        async with self._write() as session:
            for row, keys, counts in ((UsageRow, ("bot", "day"), ("turns", "tokens", "cost_micros")),
                                      (UsageModelRow, ("bot", "day", "model"), _MODEL_COUNTS)):
                table = table_of(row)
                merged = sa.select(*(table.c[k] for k in keys), sa.literal(keep_person_id),
                                   *(table.c[c] for c in counts)).where(table.c.person_id == merge_person_id)
                stmt = self._insert(table).from_select([*keys, "person_id", *counts], merged)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["bot", "person_id", "day", *keys[2:]],
                    set_={c: table.c[c] + stmt.excluded[c] for c in counts})
                await session.execute(stmt)
                await session.execute(sa.delete(table).where(table.c.person_id == merge_person_id))
