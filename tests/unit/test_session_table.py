"""The gateway's table of live sessions: loads are per key, so a burst of new conversations loads side by side."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from hermes_engine.core.sessions import SessionTable
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.session import SessionHandle, SessionScope
from hermes_engine.ports.storage import SessionRecord


def _handle(key: str) -> SessionHandle:
    record = SessionRecord(id=1, key=key, bot="bot", parent_id=None, created_at=datetime.now(UTC))
    scope = SessionScope(bot="bot", session_id=1, session_key=key, chat_kind="dm", person_id=None, shared_scope=None)
    return SessionHandle(key=key, record=record, scope=scope, target=ReplyTarget("telegram", "1", key))


async def test_messages_for_one_new_session_share_one_load() -> None:
    table, loads = SessionTable(10), []

    async def load() -> SessionHandle:
        loads.append("a")
        await asyncio.sleep(0.01)
        return _handle("a")

    first, second = await asyncio.gather(table.load("a", load), table.load("a", load))
    assert first is second and loads == ["a"]


async def test_different_sessions_load_side_by_side() -> None:
    table, started, release = SessionTable(10), [], asyncio.Event()

    async def load(key: str) -> SessionHandle:
        started.append(key)
        await release.wait()
        return _handle(key)

    loading = [asyncio.ensure_future(table.load(k, lambda k=k: load(k))) for k in ("a", "b", "c")]
    await asyncio.sleep(0.01)
    assert started == ["a", "b", "c"]  # none waits for another's store read
    release.set()
    assert [s.key for s in await asyncio.gather(*loading)] == ["a", "b", "c"]


async def test_a_failed_load_is_tried_again_by_the_next_message() -> None:
    table, tries = SessionTable(10), []

    async def load() -> SessionHandle:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the store cannot read")
        return _handle("a")

    with pytest.raises(RuntimeError):
        await table.load("a", load)
    assert (await table.load("a", load)).key == "a"
