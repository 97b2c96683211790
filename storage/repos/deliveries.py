"""The `DeliveryLog` role: what each bot's outlets have shown per idempotency key.

`record_delivery` runs after every send of a reply, so it is a per-message write through
`SqlRepository._hot` (one trip to the SQLite lane, or one statement on the async engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from hermes_engine.ports.reply import Delivery
from storage.models import DeliveryRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["DeliveryRepository"]

_TABLE = table_of(DeliveryRow)


def _upsert(insert: type[sqlite.Insert] | type[postgresql.Insert]) -> sa.Executable:
    ids = sa.bindparam("ids", type_=_TABLE.c.message_ids.type)
    stmt = insert(_TABLE).values(bot=sa.bindparam("bot"), platform=sa.bindparam("platform"), key=sa.bindparam("key"),
                                 message_ids=ids, final=sa.bindparam("final"), updated_at=sa.bindparam("at"))
    return stmt.on_conflict_do_update(
        index_elements=["bot", "platform", "key"],
        set_={"message_ids": stmt.excluded.message_ids, "final": stmt.excluded.final,
              "updated_at": stmt.excluded.updated_at},
        where=_TABLE.c.final.is_(False))


_RECORD_SQLITE = _upsert(sqlite.Insert)
_RECORD_PG = _upsert(postgresql.Insert)
_GET = (sa.select(_TABLE.c.message_ids, _TABLE.c.final)
        .where(_TABLE.c.bot == sa.bindparam("bot"), _TABLE.c.platform == sa.bindparam("platform"),
               _TABLE.c.key == sa.bindparam("key")))


class DeliveryRepository(SqlRepository):
    """`hermes_engine.ports.storage.DeliveryLog`."""

    async def get_delivery(self, bot: str, platform: str, key: str) -> Delivery | None:
        def read(result: sa.CursorResult) -> Delivery | None:  # type: ignore[type-arg]
            row = result.first()
            return None if row is None else Delivery(tuple(str(i) for i in row.message_ids), bool(row.final))

        return await self._hot(_GET, {"bot": bot, "platform": platform, "key": key}, read)

    async def record_delivery(self, bot: str, platform: str, key: str, message_ids: Sequence[str], *,
                              final: bool) -> None:
        statement = _RECORD_PG if self.dialect == "postgresql" else _RECORD_SQLITE
        await self._hot(statement, {"bot": bot, "platform": platform, "key": key, "ids": list(message_ids),
                                    "final": final, "at": self._now()}, lambda r: None)

    @whole
    async def prune_deliveries(self, older_than: datetime) -> int:
        async with self._session() as session, session.begin():
            result = await session.execute(
                sa.delete(DeliveryRow).where(DeliveryRow.updated_at < older_than).returning(DeliveryRow.key))
            return len(result.all())
