"""Engine set-up shared by the store and the migrations: URL normalisation, the async engine with this
project's connection settings, and the SQLite lane for the per-message writes.

SQLite runs in WAL mode with foreign keys on and a busy timeout, set on every new connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool, StaticPool

from storage.values import json_dumps

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "SqliteLane", "existing_sqlite_file", "install_sqlite_pragmas",
           "is_memory_sqlite", "make_engine", "normalize_url", "single_statement_engine"]

# A statement's parameters: one set, or a list of them (the statement runs once for each).
Params = dict[str, Any] | list[dict[str, Any]]

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 15_000

_SYNC_PG_DRIVERS = {"postgres", "postgresql", "postgresql+psycopg2", "postgresql+pg8000",
                    "postgres+psycopg2", "postgresql+psycopg2cffi"}
_SYNC_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}


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


def existing_sqlite_file(url: URL) -> URL | None:
    """`url` (a SQLite file) as a URI that SQLite opens only if the file exists (`mode=rw`): None when it does
    not exist now, and a file deleted before the connection is an error, never a new empty database."""
    database = url.database or ""
    if url.query.get("uri") == "true":
        path = Path(unquote(database.removeprefix("file:")))
    else:
        path = Path(database).expanduser()
        database = "file:" + quote(str(path.absolute()), safe="/")
    if not path.is_file():
        return None
    return url.set(database=database, query={**url.query, "uri": "true", "mode": "rw"})


def make_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """An async engine for `url` (normalized), with this project's connection settings.

    SQLite: the parent directory of the file is created (not for a URI with `mode=ro` or `rw`, which opens
    an existing file only); every connection gets WAL, foreign keys, a busy timeout and
    `synchronous=NORMAL`. An in-memory database uses one shared connection. A file
    database gets one pooled connection per process: SQLite has a single writer anyway, and two
    connections of one process contending for it fall into the busy handler's millisecond sleeps, which
    cost more than the writes; queueing on the pool costs nothing. Other processes (the CLI, replicas)
    still meet the busy timeout.
    PostgreSQL: connections are pinged before use (a restarted server does not fail the next turn), in one
    round trip (`_ping_on_checkout`); `pool_size` and `max_overflow` may be given (`HERMES_DATABASE_POOL_SIZE`).
    """
    url = normalize_url(url)
    backend = url.get_backend_name()
    kwargs.setdefault("json_serializer", json_dumps)
    memory = is_memory_sqlite(url)
    if backend == "sqlite":
        if memory:
            kwargs.setdefault("poolclass", StaticPool)
        else:
            if url.query.get("uri") == "true":  # a `file:` URI names its file after the scheme and before `?`
                if url.query.get("mode") not in ("ro", "rw"):  # those open an existing file only
                    Path((url.database or "").removeprefix("file:")).parent.mkdir(parents=True, exist_ok=True)
            else:
                path = Path(url.database or "").expanduser()
                path.parent.mkdir(parents=True, exist_ok=True)
                url = url.set(database=str(path))
            if "poolclass" not in kwargs:
                kwargs.update(pool_size=1, max_overflow=0, pool_timeout=60)
    elif backend == "postgresql":
        ping = "pool_pre_ping" not in kwargs and kwargs.get("poolclass") is not NullPool
        url = _server_settings_from_options(url, kwargs)
    engine = create_async_engine(url, **kwargs)
    if backend == "sqlite":
        install_sqlite_pragmas(engine, wal=not memory)
    elif ping:
        event.listen(engine.sync_engine, "checkout", _ping_on_checkout)
    return engine


def _ping_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """SQLAlchemy's `pool_pre_ping` on asyncpg pings inside a transaction of its own: BEGIN, the ping and
    ROLLBACK, three round trips before every store call. Outside a transaction the ping is one; a connection
    that does not answer is replaced by a fresh one (the pool's `DisconnectionError` contract)."""
    kept = dbapi_connection.isolation_level
    dbapi_connection.isolation_level = "autocommit"  # the adapter's ping then sends no BEGIN/ROLLBACK
    try:
        dbapi_connection.ping()
    except Exception as exc:
        raise DisconnectionError(f"the pooled connection did not answer: {exc}") from exc
    finally:
        dbapi_connection.isolation_level = kept


def single_statement_engine(engine: AsyncEngine) -> AsyncEngine:
    """`engine` (same pool) for calls that run one statement: on PostgreSQL in autocommit, so such a call
    costs one round trip instead of three (BEGIN, the statement, COMMIT or ROLLBACK); a single statement is
    atomic by itself. Anything that runs two statements must use a transaction on `engine`."""
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def _server_settings_from_options(url: URL, kwargs: dict[str, Any]) -> URL:
    """libpq's `options=-c name=value ...` in the URL (e.g. `?options=-csearch_path%3Dhermes` to keep the
    tables in a schema of their own) becomes asyncpg's `server_settings`, which has no URL form."""
    options = url.query.get("options")
    if not options:
        return url
    settings: dict[str, str] = {}
    words = str(options).split()
    for i, word in enumerate(words):
        pair = word[2:] if word.startswith("-c") and len(word) > 2 else (
            words[i + 1] if word == "-c" and i + 1 < len(words) else "")
        name, sep, value = pair.partition("=")
        if sep and name:
            settings[name] = value
    connect_args = dict(kwargs.get("connect_args") or {})
    connect_args["server_settings"] = {**settings, **dict(connect_args.get("server_settings") or {})}
    kwargs["connect_args"] = connect_args
    return url.difference_update_query(["options"])


def install_sqlite_pragmas(engine: AsyncEngine | sa.Engine, *, wal: bool) -> None:
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


class SqliteLane:
    """The hot path on SQLite: one statement, one trip to one thread.

    Through the async driver every statement costs five or six hand-offs between the event loop and the
    driver's thread (cursor, execute, fetch, close, commit, reset), about 2-4 ms on a busy loop. The
    per-message writes (inbox, messages) instead run whole on a dedicated thread with a synchronous engine
    on the same file: one hand-off each. Everything else stays on the async engine."""

    def __init__(self, url: URL) -> None:
        self.engine = sa.create_engine(url.set(drivername="sqlite"), json_serializer=json_dumps,
                                       pool_size=1, max_overflow=0, connect_args={"check_same_thread": False})
        install_sqlite_pragmas(self.engine, wal=True)
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-sqlite")

    async def execute(self, statement: Any, params: Params, result: Callable[[Any], Any]) -> Any:
        """One statement (`params`: a dict, or a list of them for an executemany) in its own transaction."""
        return await self.execute_all([(statement, params)], result)

    async def execute_all(self, steps: Sequence[tuple[Any, Params]], result: Callable[[Any], Any]) -> Any:
        """Several statements in one transaction, one trip to the thread; `result` reads the last one's."""
        def run() -> Any:
            with self.engine.begin() as conn:
                for statement, params in steps[:-1]:
                    conn.execute(statement, params)
                return result(conn.execute(*steps[-1]))

        return await asyncio.get_running_loop().run_in_executor(self._thread, run)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self.engine.dispose()
