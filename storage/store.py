"""`SqlStore`: the `hermes_engine.ports.storage.Store` on SQLAlchemy 2.0 async, for SQLite (aiosqlite) and PostgreSQL (asyncpg).

    store = SqlStore("sqlite+aiosqlite:////var/lib/hermes/hermes.db")   # or postgresql+asyncpg://...
    await store.init()      # applies the Alembic migrations; idempotent
    ...
    await store.close()

Concurrency rules this module keeps (several tasks, and on PostgreSQL several replicas, share one database):
- Uniqueness is the database's job: `record_inbound` is one `INSERT ... ON CONFLICT DO NOTHING`,
  `resolve_account` inserts and on a unique violation re-reads, `acquire_lease` is one upsert whose
  `DO UPDATE` only fires when the lease is free, expired or already ours.
- Read-modify-write runs in a write transaction (`_write()`): `BEGIN IMMEDIATE` on SQLite (one writer at a
  time, waits up to the busy timeout), row locks (`FOR UPDATE`) or a transaction-scoped advisory lock on
  PostgreSQL.
- SQLite runs in WAL mode with foreign keys on and a busy timeout, set on every new connection.
- Every store call runs to completion even when its caller is cancelled (see `_whole`): the caller gets
  its CancelledError at once, the database never sees half an operation.

Text is stored as given except for two things PostgreSQL cannot hold, replaced on every backend so a
conversation reads back the same wherever it was stored: NUL characters and lone surrogates become U+FFFD.
JSON values that are not JSON types (a `datetime` in a raw payload) are stored as their `str()`.

`link_accounts` keeps the merged person's row (marked `merged_into`) rather than deleting it, so anything
keyed by that person id elsewhere (memory files, say) can still be found and moved; accounts and
messages move to the kept person.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Awaitable, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import StaticPool

from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.storage import (
    AccountRecord,
    CompactionRecord,
    GoalRecord,
    InboundEvent,
    MessageRef,
    PersonRecord,
    SearchHit,
    SessionRecord,
    StoredMessage,
)
from storage import search
from storage.models import (
    GOAL_STATUSES,
    INBOUND_DONE,
    INBOUND_RECEIVED,
    OPEN_GOAL_STATUSES,
    AccountRow,
    GoalRow,
    InboundEventRow,
    LeaseRow,
    LinkCodeRow,
    MessageRow,
    PersonRow,
    SessionRow,
)

__all__ = ["SqlStore", "make_engine", "normalize_url", "is_memory_sqlite"]

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 15_000

# First key of PostgreSQL's two-int advisory locks, one per use (the second is a hash of the subject).
_LOCK_SESSION_CREATE = 0x4E5301
_LOCK_GOAL_CREATE = 0x4E5302

_SYNC_PG_DRIVERS = {"postgres", "postgresql", "postgresql+psycopg2", "postgresql+pg8000",
                    "postgres+psycopg2", "postgresql+psycopg2cffi"}
_SYNC_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}


# --------------------------------------------------------------------------------------------- engine

def normalize_url(url: str | URL) -> URL:
    """Upgrade a plain or sync-driver URL to the async driver: `sqlite:///x` → `sqlite+aiosqlite:///x`,
    `postgres://` / `postgresql://` → `postgresql+asyncpg://` (libpq's `sslmode` becomes asyncpg's `ssl`).
    A URL that already names an async driver is returned as it is."""
    if isinstance(url, str):
        url = url.strip()
        if url.startswith("postgres://"):  # Heroku-style; SQLAlchemy does not know the name
            url = "postgresql://" + url[len("postgres://"):]
        url = make_url(url)
    drivername = url.drivername
    if drivername in _SYNC_SQLITE_DRIVERS:
        url = url.set(drivername="sqlite+aiosqlite")
    elif drivername in _SYNC_PG_DRIVERS:
        url = url.set(drivername="postgresql+asyncpg")
    if url.drivername == "postgresql+asyncpg" and "sslmode" in url.query:
        query = dict(url.query)
        query.setdefault("ssl", query.pop("sslmode"))
        query.pop("sslmode", None)
        url = url.set(query=query)
    return url


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and (
        url.database in (None, "", ":memory:") or url.query.get("mode") == "memory")


def _json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def make_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """An async engine for `url` (normalized), with this project's connection settings.

    SQLite: the parent directory of the file is created; every connection gets WAL, foreign keys,
    a busy timeout and `synchronous=NORMAL`. An in-memory database uses one shared connection. A file
    database gets one pooled connection per process: SQLite has a single writer anyway, and two
    connections of one process contending for it fall into the busy handler's millisecond sleeps, which
    cost more than the writes; queueing on the pool costs nothing. Other processes (the CLI, replicas)
    still meet the busy timeout.
    PostgreSQL: connections are pinged before use (a restarted server does not fail the next turn).
    """
    url = normalize_url(url)
    backend = url.get_backend_name()
    kwargs.setdefault("json_serializer", _json_dumps)
    memory = is_memory_sqlite(url)
    if backend == "sqlite":
        if memory:
            kwargs.setdefault("poolclass", StaticPool)
        else:
            path = Path(url.database or "").expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            url = url.set(database=str(path))
            if "poolclass" not in kwargs:
                kwargs.update(pool_size=1, max_overflow=0, pool_timeout=60)
    elif backend == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
    engine = create_async_engine(url, **kwargs)
    if backend == "sqlite":
        _install_sqlite_pragmas(engine, wal=not memory)
    return engine


def _install_sqlite_pragmas(engine: AsyncEngine | sa.Engine, *, wal: bool) -> None:
    @event.listens_for(engine.sync_engine if isinstance(engine, AsyncEngine) else engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if wal:
                cursor.execute("PRAGMA journal_mode")
                if str(cursor.fetchone()[0]).lower() != "wal":  # WAL is stored in the file: once is enough
                    try:
                        cursor.execute("PRAGMA journal_mode = WAL")
                    except Exception as exc:  # noqa: BLE001
                        # Switching needs the file to itself and SQLite does not wait for that (no busy
                        # handler). Another connection is switching it or holds a lock right now;
                        # `storage.migrate` makes sure of WAL, with retries, before it migrates.
                        log.debug("PRAGMA journal_mode = WAL deferred: %s", exc)
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()


# ---------------------------------------------------------------------------------------- helpers

_SURROGATE = re.compile("[\ud800-\udfff]")
_J = TypeVar("_J")


def _clean_text(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def _clean(value: _J) -> _J:
    """`_clean_text` over every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return _clean_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {(_clean_text(k) if isinstance(k, str) else k): _clean(v)  # type: ignore[return-value]
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]  # type: ignore[return-value]
    return value


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _person(row: PersonRow) -> PersonRecord:
    return PersonRecord(id=row.id, display_name=row.display_name, merged_into=row.merged_into)


def _account(row: AccountRow) -> AccountRecord:
    return AccountRecord(id=row.id, person_id=row.person_id, platform=row.platform, account=row.account,
                         user_id=row.user_id, display_name=row.display_name)


def _session(row: SessionRow) -> SessionRecord:
    return SessionRecord(id=row.id, key=row.key, bot=row.bot, parent_id=row.parent_id,
                         created_at=row.created_at, model=row.model, state=dict(row.state or {}))


def _message(row: MessageRow) -> Message:
    return Message.from_dict({
        "role": row.role,
        "content": row.content,
        "tool_calls": row.tool_calls or (),
        "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name,
        "is_error": row.is_error,
        "images": row.images or (),
        "meta": row.meta or {},
    })


def _usage(row: MessageRow) -> Usage | None:
    counts = (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens)
    if all(c is None for c in counts):
        return None
    return Usage(*(c or 0 for c in counts))


def _goal(row: GoalRow) -> GoalRecord:
    return GoalRecord(id=row.id, session_key=row.session_key, bot=row.bot, session_id=row.session_id,
                      text=row.text, status=row.status, turns_used=row.turns_used,  # type: ignore[arg-type]
                      tokens_used=row.tokens_used, verdicts=list(row.verdicts or []),
                      target=dict(row.target or {}), created_at=row.created_at, updated_at=row.updated_at)


def _inbound(row: InboundEventRow) -> InboundEvent:
    return InboundEvent(platform=row.platform, event_id=row.event_id, status=row.status,
                        payload=dict(row.payload or {}), created_at=row.created_at)


def _check_goal_status(status: str) -> None:
    if status not in GOAL_STATUSES:
        raise ValueError(f"unknown goal status {status!r}; expected one of {', '.join(GOAL_STATUSES)}")


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _whole(method: _F) -> _F:
    """Run the store call as its own task, shielded from the caller's cancellation.

    A turn can be cancelled at any await (/stop, an interrupt, shutdown). Cancelling a task in the middle
    of a driver call loses the write, makes SQLAlchemy throw the connection away (asyncpg then logs
    "unexpected connection_lost()"), and on SQLite a call waiting for the write lock keeps the canceller
    waiting until the busy timeout runs out. Store calls are short, so instead each one runs to
    completion: the caller still gets its CancelledError at once, the database sees whole operations,
    and `close()` waits for stragglers.
    """

    @functools.wraps(method)
    async def wrapper(self: "SqlStore", *args: Any, **kwargs: Any) -> Any:
        task = asyncio.ensure_future(method(self, *args, **kwargs))
        self._inflight.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ store


# The per-message statements, built once: constructing a statement costs more than running it on SQLite.
_INSERT_MESSAGE = sa.insert(MessageRow.__table__).returning(MessageRow.__table__.c.id)
_RECORD_INBOUND_SQLITE = (sqlite.insert(InboundEventRow.__table__)
                          .on_conflict_do_nothing(index_elements=["platform", "event_id"])
                          .returning(InboundEventRow.__table__.c.id))
_RECORD_INBOUND_PG = (postgresql.insert(InboundEventRow.__table__)
                      .on_conflict_do_nothing(index_elements=["platform", "event_id"])
                      .returning(InboundEventRow.__table__.c.id))
_COMPLETE_INBOUND = (sa.update(InboundEventRow.__table__)
                     .where(InboundEventRow.__table__.c.platform == sa.bindparam("p"),
                            InboundEventRow.__table__.c.event_id == sa.bindparam("e"))
                     .values(status=sa.bindparam("done"), completed_at=sa.bindparam("at")))


class SqliteLane:
    """The hot path on SQLite: one statement, one trip to one thread.

    Through the async driver every statement costs five or six hand-offs between the event loop and the
    driver's thread (cursor, execute, fetch, close, commit, reset), about 2-4 ms on a busy loop. The
    per-message writes (inbox, messages) instead run whole on a dedicated thread with a synchronous engine
    on the same file: one hand-off each. Everything else stays on the async engine."""

    def __init__(self, url: URL) -> None:
        self.engine = sa.create_engine(url.set(drivername="sqlite"), json_serializer=_json_dumps,
                                       pool_size=1, max_overflow=0, connect_args={"check_same_thread": False})
        _install_sqlite_pragmas(self.engine, wal=True)
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-sqlite")

    async def execute(self, statement: Any, params: dict[str, Any], result: Callable[[Any], Any]) -> Any:
        def run() -> Any:
            with self.engine.begin() as conn:
                return result(conn.execute(statement, params))

        return await asyncio.get_running_loop().run_in_executor(self._thread, run)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self.engine.dispose()


class SqlStore:
    """`hermes_engine.ports.storage.Store` for SQLite and PostgreSQL. See the module docstring for the guarantees.

    `clock` returns the current time (timezone-aware); tests pass a fake one to expire leases without
    sleeping. Lease expiry compares against this clock, so replicas should keep their clocks in sync (NTP).
    """

    def __init__(self, url: str, *, clock: Callable[[], datetime] | None = None,
                 engine_options: dict[str, Any] | None = None) -> None:
        self.url = normalize_url(url)
        backend = self.url.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")
        self.dialect = backend
        self._clock = clock or _utcnow
        self._engine_options = dict(engine_options or {})
        self._engine: AsyncEngine | None = None
        self._sessionmaker: async_sessionmaker[AsyncSession] | None = None
        self._init_lock = asyncio.Lock()
        self._inflight: set[asyncio.Future[Any]] = set()
        self._lane: SqliteLane | None = None

    # -- lifecycle

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._engine

    async def init(self) -> None:
        """Open the engine and apply the migrations (`storage.migrate.upgrade`). Idempotent."""
        async with self._init_lock:
            if self._engine is not None:
                return
            from storage import migrate  # migrate imports this module

            engine = make_engine(self.url, **self._engine_options)
            try:
                await migrate.upgrade(engine)
            except BaseException:
                await engine.dispose()
                raise
            self._engine = engine
            self._sessionmaker = async_sessionmaker(engine, expire_on_commit=False)
            if self.dialect == "sqlite" and not is_memory_sqlite(self.url):
                self._lane = SqliteLane(self.url)

    async def close(self) -> None:
        """Wait for store calls still running (their callers may have been cancelled), then dispose
        of the engine and its pool. The store can be `init()`-ed again afterwards."""
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        engine, self._engine, self._sessionmaker = self._engine, None, None
        lane, self._lane = self._lane, None
        if lane is not None:
            await asyncio.to_thread(lane.close)
        if engine is not None:
            await engine.dispose()

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._inflight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Retrieved here so an abandoned call's error is not reported as "never retrieved"; a
            # caller that is still waiting gets it through the shield as usual.
            log.debug("store call failed: %r", task.exception())

    async def __aenter__(self) -> "SqlStore":
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _now(self) -> datetime:
        now = self._clock()
        return now if now.tzinfo is not None else now.replace(tzinfo=timezone.utc)

    def _session(self) -> AsyncSession:
        if self._sessionmaker is None:
            raise RuntimeError("SqlStore is not initialized: await store.init() first")
        return self._sessionmaker()

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

    async def _hot(self, statement: Any, params: dict[str, Any], result: Callable[[Any], Any]) -> Any:
        """A per-message write: on the SQLite lane when there is one (its thread finishes the write even
        when the caller is cancelled), else whole on the async engine."""
        if self._lane is not None:
            return await self._lane.execute(statement, params, result)
        return await self._on_engine(statement, params, result)

    @_whole
    async def _on_engine(self, statement: Any, params: dict[str, Any], result: Callable[[Any], Any]) -> Any:
        async with self.engine.begin() as conn:
            return result(await conn.execute(statement, params))

    def _insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    # -- people and accounts

    @_whole
    async def resolve_account(self, platform: str, account: str, user_id: str,
                              display_name: str = "") -> AccountRecord:
        """Get or create the account; a first-seen account gets a new person. A changed non-empty
        `display_name` is saved on the account. Safe when two first messages race: the loser's insert
        fails on the unique (platform, account, user_id) and it returns the winner's account."""
        display_name = _clean_text(display_name)[:255]
        where = (AccountRow.platform == platform, AccountRow.account == account, AccountRow.user_id == user_id)
        async with self._session() as session:
            row = await session.scalar(sa.select(AccountRow).where(*where))
            if row is not None:
                if display_name and row.display_name != display_name:
                    row.display_name = display_name
                    await session.commit()
                return _account(row)
        try:
            async with self._session() as session, session.begin():
                person = PersonRow(display_name=display_name, created_at=self._now())
                session.add(person)
                await session.flush()
                row = AccountRow(person_id=person.id, platform=platform, account=account, user_id=user_id,
                                 display_name=display_name, created_at=self._now())
                session.add(row)
                await session.flush()
                return _account(row)
        except IntegrityError:
            async with self._session() as session:
                row = await session.scalar(sa.select(AccountRow).where(*where))
                if row is None:
                    raise
                return _account(row)

    @_whole
    async def link_accounts(self, keep_person_id: int, merge_person_id: int) -> None:
        """Move every account (and the message authorship) of `merge_person_id` onto `keep_person_id`.

        The merged person is kept, marked `merged_into=keep_person_id` (people merged into it earlier are
        re-pointed too), so nothing keyed by its id is lost. Raises ValueError for an unknown person or
        when `keep_person_id` was itself merged away. Linking a person to itself does nothing."""
        if keep_person_id == merge_person_id:
            return
        async with self._write() as session:
            rows = (await session.scalars(
                sa.select(PersonRow).where(PersonRow.id.in_([keep_person_id, merge_person_id]))
                .order_by(PersonRow.id).with_for_update())).all()
            found = {row.id: row for row in rows}
            for pid in (keep_person_id, merge_person_id):
                if pid not in found:
                    raise ValueError(f"no person {pid}")
            keep = found[keep_person_id]
            if keep.merged_into is not None:
                raise ValueError(f"person {keep_person_id} was merged into person {keep.merged_into}")
            await session.execute(sa.update(AccountRow).where(AccountRow.person_id == merge_person_id)
                                  .values(person_id=keep_person_id))
            await session.execute(sa.update(MessageRow).where(MessageRow.person_id == merge_person_id)
                                  .values(person_id=keep_person_id))
            await session.execute(
                sa.update(PersonRow)
                .where(sa.or_(PersonRow.id == merge_person_id, PersonRow.merged_into == merge_person_id))
                .values(merged_into=keep_person_id))

    @_whole
    async def get_person(self, person_id: int) -> PersonRecord | None:
        async with self._session() as session:
            row = await session.get(PersonRow, person_id)
            return _person(row) if row is not None else None

    @_whole
    async def list_accounts(self, person_id: int) -> list[AccountRecord]:
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(AccountRow).where(AccountRow.person_id == person_id).order_by(AccountRow.id))
            return [_account(row) for row in rows]

    # -- sessions

    async def _newest_session(self, session: AsyncSession, key: str, bot: str) -> SessionRow | None:
        return await session.scalar(
            sa.select(SessionRow).where(SessionRow.bot == bot, SessionRow.key == key)
            .order_by(SessionRow.id.desc()).limit(1))

    @_whole
    async def active_session(self, key: str, bot: str) -> SessionRecord:
        """The newest session for `key` and `bot`; the first call creates it (concurrent first calls
        get the same one)."""
        async with self._session() as session:
            row = await self._newest_session(session, key, bot)
            if row is not None:
                return _session(row)
        async with self._write() as session:
            await self._advisory_lock(session, _LOCK_SESSION_CREATE, f"{bot}\x1f{key}")
            row = await self._newest_session(session, key, bot)
            if row is None:
                row = SessionRow(key=key, bot=bot, parent_id=None, state={}, created_at=self._now())
                session.add(row)
                await session.flush()
            return _session(row)

    @_whole
    async def new_session(self, key: str, bot: str, parent_id: int | None = None) -> SessionRecord:
        async with self._session() as session, session.begin():
            row = SessionRow(key=key, bot=bot, parent_id=parent_id, state={}, created_at=self._now())
            session.add(row)
            await session.flush()
            return _session(row)

    @_whole
    async def get_session(self, session_id: int) -> SessionRecord | None:
        async with self._session() as session:
            row = await session.get(SessionRow, session_id)
            return _session(row) if row is not None else None

    @_whole
    async def update_session(self, session_id: int, *, model: str | None = ...,  # type: ignore[assignment]
                             state: dict[str, Any] | None = None) -> None:
        """Set the model override (`None` clears it; leave it out to keep it) and/or replace `state`
        as a whole. Raises LookupError for an unknown session."""
        values: dict[str, Any] = {}
        if model is not ...:
            values["model"] = model
        if state is not None:
            values["state"] = _clean(dict(state))
        async with self._session() as session, session.begin():
            if not values:
                found = await session.get(SessionRow, session_id)
            else:
                result = await session.execute(
                    sa.update(SessionRow).where(SessionRow.id == session_id).values(**values)
                    .returning(SessionRow.id))
                found = result.first()
            if found is None:
                raise LookupError(f"no session {session_id}")

    # -- messages

    async def append_message(self, session_id: int, message: Message, *, person_id: int | None = None,
                             usage: Usage | None = None, model: str | None = None) -> int:
        data = message.to_dict()
        row = {
            "session_id": session_id,
            "person_id": person_id,
            "role": data["role"],
            "content": _clean_text(data["content"] or ""),
            "tool_calls": _clean(data["tool_calls"]) or None,
            "tool_call_id": data["tool_call_id"],
            "tool_name": data["tool_name"],
            "is_error": bool(data["is_error"]),
            "images": data["images"] or None,
            "meta": _clean(data["meta"]) or None,
            "input_tokens": usage.input_tokens if usage else None,
            "output_tokens": usage.output_tokens if usage else None,
            "cache_read_tokens": usage.cache_read_tokens if usage else None,
            "cache_write_tokens": usage.cache_write_tokens if usage else None,
            "model": model,
            "created_at": self._now(),
        }
        return await self._hot(_INSERT_MESSAGE, row, lambda r: r.scalar_one())

    @_whole
    async def load_messages(self, session_id: int) -> list[Message]:
        """The session's messages in the order they were appended."""
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id))
            return [_message(row) for row in rows]

    @_whole
    async def load_stored_messages(self, session_id: int) -> list[StoredMessage]:
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id))
            return [StoredMessage(id=row.id, session_id=row.session_id, person_id=row.person_id,
                                  message=_message(row), usage=_usage(row), model=row.model,
                                  created_at=row.created_at) for row in rows]

    @_whole
    async def session_usage(self, session_id: int) -> Usage:
        columns = (MessageRow.input_tokens, MessageRow.output_tokens, MessageRow.cache_read_tokens,
                   MessageRow.cache_write_tokens)
        async with self._session() as session:
            result = await session.execute(
                sa.select(*(sa.func.coalesce(sa.func.sum(c), 0) for c in columns))
                .where(MessageRow.session_id == session_id))
            return Usage(*(int(v) for v in result.one()))

    # -- inbound events

    async def record_inbound(self, platform: str, event_id: str, payload: dict[str, Any]) -> bool:
        """Insert a received event; False when (platform, event_id) was seen before. One statement,
        `INSERT ... ON CONFLICT DO NOTHING RETURNING id`, so concurrent duplicates cannot both win."""
        row = {"platform": platform, "event_id": event_id, "status": INBOUND_RECEIVED,
               "payload": _clean(dict(payload)), "created_at": self._now()}
        statement = _RECORD_INBOUND_PG if self.dialect == "postgresql" else _RECORD_INBOUND_SQLITE
        try:
            return await self._hot(statement, row, lambda r: r.first() is not None)
        except IntegrityError:  # belt and braces: a unique violation is a duplicate too
            return False

    async def complete_inbound(self, platform: str, event_id: str) -> None:
        await self._hot(_COMPLETE_INBOUND, {"p": platform, "e": event_id, "done": INBOUND_DONE,
                                            "at": self._now()}, lambda r: None)

    @_whole
    async def pending_inbound(self, platform: str | None = None) -> list[InboundEvent]:
        """Events received but not completed, oldest first."""
        stmt = sa.select(InboundEventRow).where(InboundEventRow.status == INBOUND_RECEIVED)
        if platform is not None:
            stmt = stmt.where(InboundEventRow.platform == platform)
        async with self._session() as session:
            rows = await session.scalars(stmt.order_by(InboundEventRow.id))
            return [_inbound(row) for row in rows]

    @_whole
    async def prune_inbound(self, older_than: datetime) -> int:
        """Delete completed events received before `older_than`. Pending ones are kept."""
        async with self._session() as session, session.begin():
            result = await session.execute(
                sa.delete(InboundEventRow)
                .where(InboundEventRow.status == INBOUND_DONE, InboundEventRow.created_at < older_than)
                .returning(InboundEventRow.id))
            return len(result.all())

    # -- goals

    @_whole
    async def create_goal(self, session_key: str, bot: str, text: str, *, session_id: int | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord:
        """Start an active goal. An open (active or paused) goal for the same key and bot is marked
        "cleared" in the same transaction: a new /goal replaces the old one."""
        now = self._now()
        async with self._write() as session:
            await self._advisory_lock(session, _LOCK_GOAL_CREATE, f"{bot}\x1f{session_key}")
            await session.execute(
                sa.update(GoalRow)
                .where(GoalRow.session_key == session_key, GoalRow.bot == bot,
                       GoalRow.status.in_(OPEN_GOAL_STATUSES))
                .values(status="cleared", updated_at=now))
            row = GoalRow(session_key=session_key, bot=bot, session_id=session_id, text=_clean_text(text),
                          status="active", turns_used=0, tokens_used=0, verdicts=[],
                          target=_clean(dict(target or {})), created_at=now, updated_at=now)
            session.add(row)
            await session.flush()
            return _goal(row)

    @_whole
    async def get_goal(self, goal_id: int) -> GoalRecord | None:
        async with self._session() as session:
            row = await session.get(GoalRow, goal_id)
            return _goal(row) if row is not None else None

    @_whole
    async def active_goal(self, session_key: str, bot: str) -> GoalRecord | None:
        """The open goal for `session_key` and `bot`: status "active" or "paused" (check `.status`)."""
        async with self._session() as session:
            row = await session.scalar(
                sa.select(GoalRow)
                .where(GoalRow.session_key == session_key, GoalRow.bot == bot,
                       GoalRow.status.in_(OPEN_GOAL_STATUSES))
                .order_by(GoalRow.id.desc()).limit(1))
            return _goal(row) if row is not None else None

    @_whole
    async def update_goal(self, goal_id: int, *, status: str | None = None, text: str | None = None,
                          session_id: int | None = None, turns_used: int | None = None,
                          tokens_used: int | None = None, add_turns: int = 0, add_tokens: int = 0,
                          verdict: dict[str, Any] | None = None,
                          verdicts: list[dict[str, Any]] | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord | None:
        """Change the given fields; None leaves a field as it is. `add_turns` / `add_tokens` add to the
        counters and `verdict` appends one verdict, atomically with respect to other updates.
        Returns the updated goal, or None for an unknown id. Reopening a goal ("active"/"paused") while
        another goal of the same key and bot is open raises ValueError."""
        if status is not None:
            _check_goal_status(status)
        try:
            async with self._write() as session:
                row = await session.scalar(sa.select(GoalRow).where(GoalRow.id == goal_id).with_for_update())
                if row is None:
                    return None
                if status is not None:
                    row.status = status
                if text is not None:
                    row.text = _clean_text(text)
                if session_id is not None:
                    row.session_id = session_id
                if turns_used is not None:
                    row.turns_used = turns_used
                if tokens_used is not None:
                    row.tokens_used = tokens_used
                row.turns_used += add_turns
                row.tokens_used += add_tokens
                if verdicts is not None:
                    row.verdicts = _clean(list(verdicts))
                if verdict is not None:
                    row.verdicts = [*(row.verdicts or []), _clean(dict(verdict))]
                if target is not None:
                    row.target = _clean(dict(target))
                row.updated_at = self._now()
                await session.flush()
                return _goal(row)
        except IntegrityError as exc:
            if status in OPEN_GOAL_STATUSES:
                raise ValueError(f"goal {goal_id} cannot be reopened: another goal is open") from exc
            raise

    @_whole
    async def list_goals(self, status: str | None = None, *, bot: str | None = None,
                         session_key: str | None = None) -> list[GoalRecord]:
        """Goals, oldest first, filtered by any of status, bot and session key."""
        stmt = sa.select(GoalRow)
        if status is not None:
            _check_goal_status(status)
            stmt = stmt.where(GoalRow.status == status)
        if bot is not None:
            stmt = stmt.where(GoalRow.bot == bot)
        if session_key is not None:
            stmt = stmt.where(GoalRow.session_key == session_key)
        async with self._session() as session:
            rows = await session.scalars(stmt.order_by(GoalRow.id))
            return [_goal(row) for row in rows]

    # -- leases

    @_whole
    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take lease `name` for `ttl_seconds`, or renew it when `holder` already has it. False while
        another holder's lease has not expired. One upsert: concurrent callers cannot both win."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        now = self._now()
        table = LeaseRow.__table__
        stmt = self._insert(table).values(name=name, holder=holder,
                                          expires_at=now + timedelta(seconds=ttl_seconds))
        stmt = stmt.on_conflict_do_update(
            index_elements=["name"],
            set_={"holder": stmt.excluded.holder, "expires_at": stmt.excluded.expires_at},
            where=sa.or_(table.c.expires_at <= now, table.c.holder == stmt.excluded.holder),
        ).returning(table.c.name)
        async with self._session() as session, session.begin():
            return (await session.execute(stmt)).first() is not None

    # -- link codes

    @_whole
    async def create_link_code(self, code: str, person_id: int, ttl_seconds: float) -> None:
        """Store a one-time /link code for `person_id`; expired codes are swept on the way."""
        now = self._now()
        table = LinkCodeRow.__table__
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(table).where(table.c.expires_at <= now))
            await conn.execute(sa.insert(table).values(code=code, person_id=person_id,
                                                       expires_at=now + timedelta(seconds=ttl_seconds)))

    @_whole
    async def redeem_link_code(self, code: str) -> int | None:
        """The person who made `code`, if it is live; the code is used up either way (one statement, so
        two redeemers cannot both win)."""
        table = LinkCodeRow.__table__
        stmt = sa.delete(table).where(table.c.code == code).returning(table.c.person_id, table.c.expires_at)
        async with self.engine.begin() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            return None
        expires_at = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=timezone.utc)
        return row.person_id if expires_at > self._now() else None

    @_whole
    async def release_lease(self, name: str, holder: str) -> bool:
        """Give up lease `name` if `holder` holds it; True when it did."""
        async with self._session() as session, session.begin():
            result = await session.execute(
                sa.delete(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder)
                .returning(LeaseRow.name))
            return result.first() is not None

    # ------------------------------------------------------------------ search index and compaction lineage

    async def search_messages(self, *, person_id: int, bot: str, query: str, limit: int = 5) -> list[SearchHit]:
        return await search.search(self.engine, person_id=person_id, bot=bot, query=query, limit=limit)

    async def export_session_ids(self, *, since: datetime | None = None,
                                 person_id: int | None = None) -> list[int]:
        return await search.export_session_ids(self.engine, since=since, person_id=person_id)

    async def record_compaction(self, *, session_id: int, first_message_id: int, last_message_id: int,
                                summary: str, tokens_before: int, tokens_after: int,
                                parent_id: int | None = None, reason: str = "agent") -> CompactionRecord:
        return await search.record_compaction(
            self.engine, session_id=session_id, first_message_id=first_message_id,
            last_message_id=last_message_id, summary=summary, tokens_before=tokens_before,
            tokens_after=tokens_after, parent_id=parent_id, reason=reason, now=self._now())

    async def latest_compaction(self, session_id: int) -> CompactionRecord | None:
        return await search.latest_compaction(self.engine, session_id)

    async def list_compactions(self, session_ids: Sequence[int] | None = None) -> list[CompactionRecord]:
        return await search.list_compactions(self.engine, session_ids)

    async def message_refs_after(self, session_id: int, after_id: int) -> list[MessageRef]:
        return await search.message_refs_after(self.engine, session_id, after_id)
