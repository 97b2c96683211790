"""Alembic migrations, run from code: `SqlStore.init()` and the CLI call `upgrade`.

    await upgrade("sqlite+aiosqlite:///path/to/hermes.db")   # from async code (or pass an AsyncEngine)
    upgrade_sync("postgresql://hermes:pw@db/hermes")           # from sync code (a CLI command)

The migrations run on the async engine's own connection (`AsyncConnection.run_sync`), so the same code
path serves aiosqlite and asyncpg, an in-memory SQLite database works, and the event loop is not blocked
on I/O. Concurrent upgrades (several replicas starting at once) are serialized: a transaction-scoped
advisory lock on PostgreSQL, `BEGIN IMMEDIATE` on SQLite; the second one finds the schema at head and does
nothing. The whole upgrade is one transaction on both backends, so a failed migration leaves no half-built
schema.

On SQLite a migration may rebuild a table (create a copy, drop the original, rename), which with foreign keys
on would cascade the drop into every table referring to it. So foreign keys are off for the migration
(`PRAGMA foreign_keys` is ignored inside a transaction: it is set before `BEGIN`), checked with
`PRAGMA foreign_key_check` before the commit, and on again afterwards, on the connection the store goes on
using.

The Alembic command line works too, from the repository root:

    alembic -c storage/alembic.ini upgrade head              # URL: -x url=..., else HERMES_DATABASE_URL
    alembic -c storage/alembic.ini revision -m "add x"       # then write the upgrade by hand
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from storage.engine import make_engine

__all__ = ["ALEMBIC_INI", "MIGRATIONS_DIR", "DanglingReferences", "alembic_config", "current_revision",
           "head_revision", "include_object", "migration_transaction", "upgrade", "upgrade_sync"]

STORAGE_DIR = Path(__file__).resolve().parent
ALEMBIC_INI = STORAGE_DIR / "alembic.ini"
MIGRATIONS_DIR = STORAGE_DIR / "migrations"

# PostgreSQL advisory lock key held while migrating (any constant; "hermes" in ASCII).
MIGRATION_LOCK_KEY = 0x6865726D6573


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Autogenerate filter: leave out database-only objects no model can express, i.e. full-text search
    (SQLite FTS5 virtual tables and their shadow tables, PostgreSQL expression indexes), which carry
    `_fts` in their names. Without it autogenerate would offer to drop them."""
    return not (name and "_fts" in name)


def alembic_config() -> Config:
    """The Alembic config for this package, wherever it is installed."""
    cfg = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("prepend_sys_path", "")  # `storage` is importable already; keep sys.path as it is
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


class DanglingReferences(RuntimeError):
    """A migration would leave rows referring to rows that do not exist; it is rolled back."""


@asynccontextmanager
async def migration_transaction(conn: AsyncConnection) -> AsyncIterator[None]:
    """The migration transaction, holding the database-wide migration lock: committed when the block ends,
    rolled back when it raises. On SQLite, first make sure the file is in WAL mode and turn foreign keys off
    (a table rebuild must not cascade), check every reference before the commit, and turn them on again
    whatever happened."""
    sqlite = conn.dialect.name == "sqlite"
    if conn.dialect.name == "postgresql":
        await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
    elif sqlite:
        await _ensure_sqlite_wal(conn)
        await conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
    try:
        if sqlite:
            # Python's sqlite3 only opens a transaction before DML; take the write lock now instead, so DDL
            # is transactional too and a concurrent upgrade waits (busy_timeout) rather than colliding.
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield
            if sqlite:
                await _check_foreign_keys(conn)
            await conn.commit()
        except BaseException:
            await conn.rollback()
            raise
    finally:
        if sqlite:
            await conn.exec_driver_sql("PRAGMA foreign_keys = ON")
            await conn.commit()  # the pragma opened no transaction; end SQLAlchemy's own


async def _check_foreign_keys(conn: AsyncConnection) -> None:
    rows: list[Any] = list((await conn.exec_driver_sql("PRAGMA foreign_key_check")).all())
    if rows:
        tables = sorted({(str(row[0]), str(row[2])) for row in rows})
        named = ", ".join(f"{child} → {parent}" for child, parent in tables)
        which = "1 row would refer to a row that does" if len(rows) == 1 else (
            f"{len(rows)} rows would refer to rows that do")
        raise DanglingReferences(f"Migration rolled back, nothing changed: {which} not exist ({named}).")


async def _ensure_sqlite_wal(conn: AsyncConnection, attempts: int = 100) -> None:
    """Switch a SQLite file to WAL. The switch fails at once ("database is locked", SQLite does not wait)
    while another connection holds a lock, e.g. several processes opening a new file together: retry."""
    mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
    if str(mode).lower() in ("wal", "memory"):
        return
    for attempt in range(attempts):
        try:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode = WAL")).scalar()
        except OperationalError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.05)
            continue
        if str(mode).lower() == "wal":
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"could not switch the SQLite database to WAL mode (it is in {mode!r} mode)")


def _upgrade_on(connection: Connection, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection  # env.py runs on this connection
    command.upgrade(cfg, revision)


def _current_on(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def _with_engine(target: str | URL | AsyncEngine, fn: Any) -> Any:
    engine = make_engine(target) if isinstance(target, (str, URL)) else target
    try:
        return await fn(engine)
    finally:
        if engine is not target:
            await engine.dispose()


async def upgrade(target: str | URL | AsyncEngine, revision: str = "head") -> None:
    """Apply migrations up to `revision` on a URL (plain URLs are upgraded to the async drivers) or an
    engine. Idempotent: at head it does nothing."""

    async def run(engine: AsyncEngine) -> None:
        async with engine.connect() as conn, migration_transaction(conn):
            await conn.run_sync(_upgrade_on, revision)

    await _with_engine(target, run)


def upgrade_sync(target: str | URL, revision: str = "head") -> None:
    """`upgrade` for synchronous callers (a CLI command). Not for use inside a running event loop."""
    asyncio.run(upgrade(target, revision))


async def current_revision(target: str | URL | AsyncEngine) -> str | None:
    """The revision the database is at (None before the first migration)."""

    async def run(engine: AsyncEngine) -> str | None:
        async with engine.connect() as conn:
            return await conn.run_sync(_current_on)

    return await _with_engine(target, run)


if __name__ == "__main__":  # `storage.revision.upgrade_in_child` runs this in a short-lived process
    import os

    from storage.revision import URL_VARIABLE

    upgrade_sync(os.environ[URL_VARIABLE])
