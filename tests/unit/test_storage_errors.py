"""A database that cannot write raises the engine's `StorageError`, with a reason a person can read, from
every kind of store call; reads go on working, and an error that is not about writing stays what it is.

Real databases that refuse writes for a real reason: a SQLite file opened read-only, and (when
HERMES_TEST_POSTGRES_URL is set) a PostgreSQL schema whose sessions are read-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from postgres import PG_URL, fresh_schema
from sqlalchemy.exc import IntegrityError

from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.errors import StorageError
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.storage import SessionRecord
from storage.store import SqlStore

READ_ONLY = "the database is read-only"


@pytest.fixture(params=[
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[
        pytest.mark.postgres,
        pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")]),
])
async def read_only(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[tuple[SqlStore, SessionRecord]]:
    """(a store that can read but not write, a session stored before it became read-only)."""
    async with AsyncExitStack() as stack:
        if request.param == "sqlite":
            path = tmp_path / "hermes.db"
            writable = SqlStore(f"sqlite+aiosqlite:///{path}")
            url, options = f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true", {}  # SQLite opens it read-only
        else:
            assert PG_URL
            settings = {"search_path": await stack.enter_async_context(fresh_schema())}
            writable = SqlStore(PG_URL, engine_options={"connect_args": {"server_settings": settings}})
            url = PG_URL
            options = {"connect_args": {"server_settings": {**settings, "default_transaction_read_only": "on"}}}
        async with writable:
            session = await writable.active_session("dm:1", "bot")
        async with SqlStore(url, engine_options=options) as store:
            yield store, session


async def test_every_kind_of_write_to_a_read_only_database_raises_a_storage_error_and_reads_still_work(read_only):
    store, session = read_only
    writes = {
        "inbox (the per-message path)": lambda: store.record_inbound("test", "e1", {"text": "hi"}),
        "message (the per-message path)": lambda: store.append_message(session.id, Message(role="user", content="hi")),
        "session (a whole call)": lambda: store.update_session(session.id, state={"owner": 1}),
        "lease (a whole call)": lambda: store.acquire_lease("job", "me", 60),
        "compaction (a whole engine call)": lambda: store.record_compaction(
            session_id=session.id, first_message_id=1, last_message_id=1, summary="s", tokens_before=2,
            tokens_after=1),
    }
    for what, write in writes.items():
        with pytest.raises(StorageError) as caught:
            await write()
        assert caught.value.reason == READ_ONLY, what
        assert "read-only" in str(caught.value)

    assert await store.get_session(session.id) == session
    assert await store.load_messages(session.id) == []


async def test_the_health_probe_fails_on_a_read_only_database_with_its_reason(read_only):
    store, _ = read_only
    health = StorageHealth(store)
    await health.ensure_ready()  # no outage known: no probe, no write
    health.failed(StorageError("the disk is full"))
    with pytest.raises(StorageError):
        await health.ensure_ready()
    assert not health.ok and health.reason == READ_ONLY  # the probe's own finding replaces the old one


async def test_an_error_that_is_not_about_writing_is_not_turned_into_a_storage_error(tmp_path):
    async with SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}") as store:
        with pytest.raises(IntegrityError):  # no such session: a bug, not an outage
            await store.append_message(404, Message(role="user", content="hi"))
