"""PostgreSQL connections: a pooled connection the server dropped is replaced before a call uses it (a
restarted server does not fail the next turn), and one-statement calls still see and keep what they wrote."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from postgres import BACKENDS, empty_database, execute

from storage.store import SqlStore

pytestmark = BACKENDS[1].marks


@pytest.fixture
async def store(tmp_path):
    async with empty_database("postgres", str(tmp_path / "unused.db")) as (url, options):
        store = SqlStore(url, engine_options={**options, "pool_size": 1, "max_overflow": 0})
        await store.init()
        try:
            yield store
        finally:
            await store.close()


async def test_a_pooled_connection_the_server_dropped_is_replaced_before_the_next_call(store: SqlStore) -> None:
    assert await store.record_inbound("telegram", "1", {}, session_key="a") is True
    async with store.engine.connect() as conn:  # the pool's one connection
        backend = await conn.scalar(sa.text("SELECT pg_backend_pid()"))
    await execute(f"SELECT pg_terminate_backend({int(backend)})")

    assert [e.event_id for e in await store.pending_inbound(session_key="a")] == ["1"]
    assert await store.record_inbound("telegram", "2", {}) is True
    assert await store.acquire_lease("job", "me", 30) is True
    assert await store.release_lease("job", "me") is True
    async with store.engine.connect() as conn:
        assert await conn.scalar(sa.text("SELECT pg_backend_pid()")) != backend
