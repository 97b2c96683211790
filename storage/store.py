"""`SqlStore`: the `hermes_engine.ports.storage.Store` on SQLAlchemy 2.0 async, for SQLite (aiosqlite) and
PostgreSQL (asyncpg).

    store = SqlStore("sqlite+aiosqlite:////var/lib/hermes/hermes.db")   # or postgresql+asyncpg://...
    await store.init()      # applies the Alembic migrations; idempotent
    ...
    await store.close()

`SqlStore(url, create=False)` opens only a database that is there already (an operator command on the wrong
home must not make an empty one): `init()` raises `NoDatabase` for a SQLite file that does not exist, which
it then never creates, or a database without the schema, which it never migrates from nothing.

It is made of one repository per role (`storage.repos`), sharing one engine, one SQLite lane and the set
of calls in flight; engine set-up lives in `storage.engine`, the stored-value rules in `storage.values`.

Concurrency rules the repositories keep (several tasks, and on PostgreSQL several replicas, share one
database):
- Uniqueness is the database's job: `record_inbound` is one `INSERT ... ON CONFLICT DO NOTHING`,
  `resolve_account` inserts and on a unique violation re-reads, `acquire_lease` is one upsert whose
  `DO UPDATE` only fires when the lease is free, expired or already ours.
- Read-modify-write runs in a write transaction (`_write()`): `BEGIN IMMEDIATE` on SQLite (one writer at a
  time, waits up to the busy timeout), row locks (`FOR UPDATE`) or a transaction-scoped advisory lock on
  PostgreSQL.
- SQLite runs in WAL mode with foreign keys on and a busy timeout, set on every new connection.
- Every store call runs to completion even when its caller is cancelled (see `storage.repos.base.whole`):
  the caller gets its CancelledError at once, the database never sees half an operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from storage import revision
from storage.engine import (
    SqliteLane,
    existing_sqlite_file,
    is_memory_sqlite,
    make_engine,
    normalize_url,
    single_statement_engine,
)
from storage.errors import NoDatabase
from storage.repos.approvals import ApprovalRepository
from storage.repos.blobs import BlobRepository
from storage.repos.conversations import ConversationRepository
from storage.repos.dashboard import DashboardRepository
from storage.repos.deliveries import DeliveryRepository
from storage.repos.documents import DocumentRepository
from storage.repos.embeddings import EmbeddingRepository
from storage.repos.goals import GoalRepository
from storage.repos.inbox import InboxRepository
from storage.repos.jobs import JobRepository
from storage.repos.kanban import CardRepository
from storage.repos.leases import LeaseRepository, LinkCodeRepository
from storage.repos.lineage import LineageRepository
from storage.repos.people import PeopleRepository
from storage.repos.reviews import ReviewRepository
from storage.repos.search import SearchRepository
from storage.repos.sessions import SessionRepository
from storage.repos.tool_lists import ToolListRepository
from storage.repos.usage import UsageRepository
from storage.values import utcnow

__all__ = ["NoDatabase", "SqlStore", "make_engine", "normalize_url", "is_memory_sqlite"]


class SqlStore(PeopleRepository, SessionRepository, InboxRepository, GoalRepository, LeaseRepository,
               LinkCodeRepository, SearchRepository, LineageRepository, DeliveryRepository, CardRepository,
               UsageRepository, EmbeddingRepository, DocumentRepository, ToolListRepository, ReviewRepository,
               ApprovalRepository, JobRepository, BlobRepository,
               DashboardRepository, ConversationRepository):
    """`hermes_engine.ports.storage.Store` for SQLite and PostgreSQL. See the module docstring for the guarantees.

    `clock` returns the current time (timezone-aware); tests pass a fake one to expire leases without
    sleeping. Lease expiry compares against this clock, so replicas should keep their clocks in sync (NTP).
    """

    def __init__(self, url: str, *, clock: Callable[[], datetime] | None = None,
                 engine_options: dict[str, Any] | None = None, create: bool = True) -> None:
        self.url = normalize_url(url)
        self.create = create
        backend = self.url.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")
        self.dialect = backend
        self._clock = clock or utcnow
        self._engine_options = dict(engine_options or {})
        self._engine: AsyncEngine | None = None
        self._sessionmaker: async_sessionmaker[AsyncSession] | None = None
        self._single_engine: AsyncEngine | None = None
        self._single_maker: async_sessionmaker[AsyncSession] | None = None
        self._init_lock = asyncio.Lock()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._lane: SqliteLane | None = None

    async def init(self) -> None:
        """Open the engine and apply the migrations (`storage.migrate.upgrade`) unless the database is at head
        already. Idempotent."""
        async with self._init_lock:
            if self._engine is not None:
                return
            url = self.url if self.create else self._existing_url()
            engine = make_engine(url, **self._engine_options)
            try:
                if not await revision.is_current(engine):
                    if not self.create and not await revision.has_schema(engine):
                        raise NoDatabase("the database has no tables of the gateway")
                    from storage import migrate  # Alembic loads only when there is something to apply

                    await migrate.upgrade(engine)
            except BaseException:
                await engine.dispose()
                raise
            self._engine = engine
            self._sessionmaker = async_sessionmaker(engine, expire_on_commit=False)
            self._single_engine = single_statement_engine(engine)
            self._single_maker = async_sessionmaker(self._single_engine, expire_on_commit=False)
            if self.dialect == "sqlite" and not is_memory_sqlite(self.url):
                self._lane = SqliteLane(url)

    @property
    def engines(self) -> list[Engine]:
        """The engines that carry this store's statements (the async engine's and the SQLite lane's), for
        whoever counts or traces what the store sends (SQLAlchemy's events)."""
        engines = [self.engine.sync_engine]
        if self._lane is not None:
            engines.append(self._lane.engine)
        return engines

    def _existing_url(self) -> URL:
        """The URL that opens the database only if it is there (for `create=False`)."""
        if self.dialect != "sqlite" or is_memory_sqlite(self.url):
            return self.url
        url = existing_sqlite_file(self.url)
        if url is None:
            raise NoDatabase(f"no {self.url.database}")
        return url

    async def close(self) -> None:
        """Wait for store calls still running (their callers may have been cancelled), then dispose
        of the engine and its pool. The store can be `init()`-ed again afterwards."""
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        engine, self._engine, self._sessionmaker = self._engine, None, None
        self._single_engine = self._single_maker = None
        lane, self._lane = self._lane, None
        if lane is not None:
            await asyncio.to_thread(lane.close)
        if engine is not None:
            await engine.dispose()

    async def __aenter__(self) -> SqlStore:
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
