"""What a store sends to its database, counted where SQLAlchemy hands it to the driver: statements,
transactions (each one store round trip: a statement, or a BEGIN … COMMIT around several) and connection
checkouts (on PostgreSQL each one pings the server first). Used by the engine benchmark and the test that
bounds a plain turn's round trips."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from hermes_engine.clock.feature import ClockFeature
from hermes_engine.core.gateway import Gateway
from storage.store import SqlStore


@dataclass
class Trips:
    statements: int = 0
    transactions: int = 0
    checkouts: int = 0
    sql: list[str] = field(default_factory=list)

    def minus(self, earlier: Trips) -> Trips:
        return Trips(self.statements - earlier.statements, self.transactions - earlier.transactions,
                     self.checkouts - earlier.checkouts, self.sql[len(earlier.sql):])

    def copy(self) -> Trips:
        return Trips(self.statements, self.transactions, self.checkouts, list(self.sql))


class TripCounter:
    """Counts on every engine of one store (`SqlStore.engines`) while `counting()` is open."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.total = Trips()

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.total.statements += 1
        self.total.sql.append(" ".join(statement.split())[:160])

    def _begin(self, _conn: Any) -> None:
        self.total.transactions += 1

    def _checkout(self, *_args: Any) -> None:
        self.total.checkouts += 1

    @contextmanager
    def counting(self) -> Iterator[TripCounter]:
        engines: list[sa.Engine] = list(self.store.engines)
        hooks = [("before_cursor_execute", self._statement), ("begin", self._begin)]
        for engine in engines:
            for name, fn in hooks:
                event.listen(engine, name, fn)
            event.listen(engine.pool, "checkout", self._checkout)
        try:
            yield self
        finally:
            for engine in engines:
                for name, fn in hooks:
                    event.remove(engine, name, fn)
                event.remove(engine.pool, "checkout", self._checkout)

    def snapshot(self) -> Trips:
        return self.total.copy()


async def stop_the_clock(gateway: Gateway) -> None:
    """The clock looks at the store once a second whatever the chats do: its trips are its own, not a
    turn's, and would fall into whichever turn is being counted."""
    for feature in gateway.features:
        if isinstance(feature, ClockFeature):
            await feature.stop()
