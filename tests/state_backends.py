"""Memory and pairing on every backend: files under the home, or documents in a SQLite or PostgreSQL store.

`@pytest.fixture(params=STATE_BACKENDS)` (from `postgres`) runs a test on each; `memory_store(kind, root)` gives the store.
A PostgreSQL store lives in a schema of its own (`postgres.fresh_schema`), dropped after the test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from postgres import BACKENDS, PG_URL, execute, fresh_schema
from schema_kit import at_head

from hermes_engine.memory.database import DatabaseMemoryStore
from hermes_engine.memory.documents import MemoryStore
from hermes_engine.memory.store import FileMemoryStore
from hermes_engine.policy.pairing import JsonPairingStore, PairingStore
from hermes_engine.policy.pairing_db import DatabasePairingStore
from hermes_engine.skills.database import DatabaseSkillLibrary
from hermes_engine.skills.files import FileSkillLibrary
from hermes_gateway.cli.state import store_on_thread
from storage.store import SqlStore

DATABASES = BACKENDS


def postgres_url(schema: str) -> str:
    assert PG_URL
    return f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-c%20search_path%3D{schema}"


@asynccontextmanager
async def database_url(kind: str, folder: Path) -> AsyncIterator[str]:
    """A URL for a fresh database of `kind` ("sqlite" or "postgres")."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / 'state.db'}"
        return
    async with fresh_schema() as schema:
        yield postgres_url(schema)


@asynccontextmanager
async def sql_store(kind: str, folder: Path) -> AsyncIterator[SqlStore]:
    async with database_url(kind, folder) as url:
        store = SqlStore(await at_head(url))
        await store.init()
        try:
            yield store
        finally:
            await store.close()


@asynccontextmanager
async def memory_store(kind: str, root: Path) -> AsyncIterator[MemoryStore]:
    """`FileMemoryStore(root)` for "files", else a `DatabaseMemoryStore` on a fresh store beside `root`."""
    if kind == "files":
        yield FileMemoryStore(root)
        return
    async with sql_store(kind, root.parent) as store:
        yield DatabaseMemoryStore(store, store)


@contextmanager
def database_url_sync(kind: str, folder: Path) -> Iterator[str]:
    """`database_url` for code without an event loop."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / 'state.db'}"
        return
    schema = f"test_{uuid.uuid4().hex[:16]}"
    asyncio.run(execute(f"CREATE SCHEMA {schema}"))
    try:
        yield postgres_url(schema)
    finally:
        asyncio.run(execute(f"DROP SCHEMA {schema} CASCADE"))


@contextmanager
def pairing_store(kind: str, folder: Path) -> Iterator[PairingStore]:
    """`pairing.json` in `folder` for "files", else a `DatabasePairingStore` on a fresh store whose event loop
    runs in a thread (pairing is blocking, as in the gateway's worker threads)."""
    if kind == "files":
        yield JsonPairingStore(folder / "pairing.json")
        return
    with database_url_sync(kind, folder) as url, store_on_thread(url) as (store, loop):
        yield DatabasePairingStore(store, loop)


@asynccontextmanager
async def skill_library(kind: str, folder: Path, bot: str = "default") -> AsyncIterator[FileSkillLibrary]:
    """The folder library at `folder/skills/<bot>` for "files", else a `DatabaseSkillLibrary` on a fresh store
    working on a copy at `folder/copy/<bot>`."""
    if kind == "files":
        yield FileSkillLibrary(folder / "skills" / bot)
        return
    async with sql_store(kind, folder) as store:
        yield DatabaseSkillLibrary(folder / "copy" / bot, store, store, bot)

