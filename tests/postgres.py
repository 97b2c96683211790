"""A PostgreSQL schema of a test's own on the server of HERMES_TEST_POSTGRES_URL, created for the test and
dropped after it, so tests and test runs sharing one server never see each other's tables. A store uses it
through `search_path` (`server_settings`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy.pool import NullPool

from storage.engine import make_engine
from storage.store import SqlStore

PG_URL = os.environ.get("HERMES_TEST_POSTGRES_URL")

# `@pytest.fixture(params=BACKENDS)`: a test on SQLite, and on PostgreSQL when a server is given.
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[
        pytest.mark.postgres,
        pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)"),
    ]),
]

# Where memory, skills and pairing live: files, or the database on SQLite or PostgreSQL (`state_backends`).
STATE_BACKENDS = [
    pytest.param("files", id="files"),
    pytest.param("sqlite", id="db-sqlite"),
    pytest.param("postgres", id="db-postgres", marks=BACKENDS[1].marks),
]


async def execute(sql: str) -> None:
    assert PG_URL, "HERMES_TEST_POSTGRES_URL is not set"
    engine = make_engine(PG_URL, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(sql)
    finally:
        await engine.dispose()


@asynccontextmanager
async def fresh_schema() -> AsyncIterator[str]:
    schema = f"test_{uuid.uuid4().hex[:16]}"
    await execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        await execute(f"DROP SCHEMA {schema} CASCADE")


@asynccontextmanager
async def empty_database(backend: str, sqlite_file: str) -> AsyncIterator[tuple[str, dict[str, object]]]:
    """(url, engine options) of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{sqlite_file}", {}
        return
    async with fresh_schema() as schema:
        yield PG_URL or "", {"connect_args": {"server_settings": {"search_path": schema}}}


@asynccontextmanager
async def replica_stores(backend: str, tmp_path: Path, count: int = 2) -> AsyncIterator[list[SqlStore]]:
    """`count` initialised stores on one empty database, as that many gateway replicas would have."""
    async with empty_database(backend, str(tmp_path / "hermes.db")) as (url, options), AsyncExitStack() as stack:
        stores = [SqlStore(url, engine_options=options) for _ in range(count)]
        for store in stores:
            await store.init()
            stack.push_async_callback(store.close)
        yield stores
