"""What every repository shares: the session factory, the clock, write transactions, advisory locks, the
per-message write path, and `whole` (a store call runs to completion even when its caller is cancelled).
Every store call goes through `whole`, `whole_call` or `_hot`, and so through `as_storage_errors`: a
caller sees a `StorageError` when the database cannot write, never a driver's error.

The repositories are mixins: `storage.store.SqlStore` inherits all of them, so a call costs no more than
it did as one class, and they share one engine, one SQLite lane and one set of in-flight calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from storage.engine import Params, SqliteLane
from storage.errors import as_storage_errors

__all__ = ["LOCK_GOAL_CREATE", "LOCK_SESSION_CREATE", "SqlRepository", "whole", "whole_call"]

log = logging.getLogger(__name__)

# First key of PostgreSQL's two-int advisory locks, one per use (the second is a hash of the subject).
LOCK_SESSION_CREATE = 0x4E5301
LOCK_GOAL_CREATE = 0x4E5302

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
_T = TypeVar("_T")


def whole(method: _F) -> _F:
    """Run the store call as its own task, shielded from the caller's cancellation.

    A turn can be cancelled at any await (/stop, an interrupt, shutdown). Cancelling a task in the middle
    of a driver call loses the write, makes SQLAlchemy throw the connection away (asyncpg then logs
    "unexpected connection_lost()"), and on SQLite a call waiting for the write lock keeps the canceller
    waiting until the busy timeout runs out. Store calls are short, so instead each one runs to
    completion: the caller still gets its CancelledError at once, the database sees whole operations,
    and `close()` waits for stragglers.
    """

    @functools.wraps(method)
    async def wrapper(self: SqlRepository, *args: Any, **kwargs: Any) -> Any:
        task = asyncio.ensure_future(method(self, *args, **kwargs))
        self._inflight.add(task)
        task.add_done_callback(self._finished)
        with as_storage_errors():
            return await asyncio.shield(task)

    return wrapper  # type: ignore[return-value]


def whole_call(fn: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
    """`whole` for a function on an engine (no store to track it): run it to completion even if the
    caller is cancelled."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> _T:
        with as_storage_errors():
            return await asyncio.shield(asyncio.ensure_future(fn(*args, **kwargs)))

    return wrapper


class SqlRepository:
    """The state and plumbing the repositories share; `storage.store.SqlStore` sets it up and opens it."""

    url: URL
    dialect: str  # "sqlite" | "postgresql"
    _clock: Callable[[], datetime]
    _engine: AsyncEngine | None
    _sessionmaker: async_sessionmaker[AsyncSession] | None
    _single_engine: AsyncEngine | None  # `storage.engine.single_statement_engine`: one statement per call
    _single_maker: async_sessionmaker[AsyncSession] | None
    _inflight: set[asyncio.Future[Any]]
    _lane: SqliteLane | None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._engine

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._inflight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Retrieved here so an abandoned call's error is not reported as "never retrieved"; a
            # caller that is still waiting gets it through the shield as usual.
            log.debug("store call failed: %r", task.exception())

    def _now(self) -> datetime:
        now = self._clock()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def _session(self) -> AsyncSession:
        if self._sessionmaker is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._sessionmaker()

    @property
    def single_engine(self) -> AsyncEngine:
        """The engine for calls that run one statement (autocommit on PostgreSQL: one round trip)."""
        if self._single_engine is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._single_engine

    def _single(self) -> AsyncSession:
        """A session for a call that runs one statement (see `single_engine`); never two in it."""
        if self._single_maker is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._single_maker()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncSession]:
        """A transaction for read-modify-write. On SQLite it takes the write lock first (BEGIN IMMEDIATE),
        so what it reads cannot change before it writes; on PostgreSQL use `FOR UPDATE` / advisory locks."""
        async with self._session() as session, session.begin():
            if self.dialect == "sqlite":
                await session.execute(sa.text("BEGIN IMMEDIATE"))
            yield session

    async def _advisory_lock(self, session: AsyncSession, namespace: int, subject: str) -> None:
        if self.dialect == "postgresql":
            await session.execute(sa.select(sa.func.pg_advisory_xact_lock(namespace, sa.func.hashtext(subject))))

    async def _hot(self, statement: Any, params: Params, result: Callable[[Any], Any]) -> Any:
        """A per-message write: on the SQLite lane when there is one (its thread finishes the write even
        when the caller is cancelled), else whole on the async engine. A list of `params` runs the
        statement once for each (executemany)."""
        if self._lane is not None:
            with as_storage_errors():
                return await self._lane.execute(statement, params, result)
        return await self._on_engine(statement, params, result)

    @whole
    async def _on_engine(self, statement: Any, params: Params, result: Callable[[Any], Any]) -> Any:
        """One statement, its own transaction (on PostgreSQL in autocommit: one round trip, not three)."""
        async with self.single_engine.begin() as conn:
            return result(await conn.execute(statement, params))

    async def _hot_all(self, steps: Sequence[tuple[Any, Params]], result: Callable[[Any], Any]) -> Any:
        """Per-message writes of several statements, in one transaction: on SQLite one trip to its lane.
        (On PostgreSQL a caller rather writes one statement, a `WITH` if need be: a transaction of several
        is a round trip each and two more.)"""
        if len(steps) == 1:
            return await self._hot(*steps[0], result)
        if self._lane is not None:
            with as_storage_errors():
                return await self._lane.execute_all(steps, result)
        return await self._all_on_engine(steps, result)

    @whole
    async def _all_on_engine(self, steps: Sequence[tuple[Any, Params]], result: Callable[[Any], Any]) -> Any:
        async with self.engine.begin() as conn:
            for statement, params in steps[:-1]:
                await conn.execute(statement, params)
            return result(await conn.execute(*steps[-1]))

    def _insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)
