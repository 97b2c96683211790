"""What a lane reads as it takes a session's lease: the newest session and its newest message in one read,
on both backends, so a replica sees another's answer (a new message, or a /new session) without a second
trip."""

from __future__ import annotations

import pytest
from postgres import BACKENDS, PG_URL, fresh_schema

from hermes_engine.ports.conversation import Message
from storage.store import SqlStore


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path):
    if request.param == "sqlite":
        s = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
        await s.init()
        yield s
        await s.close()
        return
    assert PG_URL
    async with fresh_schema() as schema:
        s = SqlStore(PG_URL, engine_options={"connect_args": {"server_settings": {"search_path": schema}}})
        await s.init()
        yield s
        await s.close()


async def test_the_newest_session_comes_with_its_newest_message_id(store: SqlStore) -> None:
    first, none_yet = await store.newest_with_last_message("telegram:dm:1", "bot")  # created on first use
    assert none_yet is None and first == await store.active_session("telegram:dm:1", "bot")
    ids = [await store.append_message(first.id, Message(role="user", content=text)) for text in ("a", "b")]
    assert await store.newest_with_last_message("telegram:dm:1", "bot") == (first, ids[-1])
    other = await store.active_session("telegram:dm:2", "bot")
    await store.append_message(other.id, Message(role="user", content="elsewhere"))
    assert await store.newest_with_last_message("telegram:dm:1", "bot") == (first, ids[-1])
    fresh = await store.new_session("telegram:dm:1", "bot", parent_id=first.id)  # /new on another replica
    assert await store.newest_with_last_message("telegram:dm:1", "bot") == (fresh, None)
