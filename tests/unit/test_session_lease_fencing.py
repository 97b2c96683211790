"""The heartbeat of a held lease (`hermes_engine.core.leases`): a holder keeps its lease only while nobody
else has had it. Another replica that took the lease, did the work and gave it back between two beats has
still taken it: the holder's work stops, and does not go on as if it had held the lease all along."""

from __future__ import annotations

import asyncio

from hermes_engine.core.leases import Leases
from storage.store import SqlStore

TTL = 3.0  # one beat a second: the other replica's three statements fit well inside one


async def test_work_under_a_lease_another_replica_took_and_gave_back_between_beats_stops(tmp_path):
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
    await store.init()
    leases = Leases(store, ttl_seconds=TTL, holder="replica-a")
    working, seen_lost = asyncio.Event(), []

    async def work() -> str:
        async with leases.held("session:bot:k") as ours:
            assert ours
            try:
                working.set()
                await asyncio.sleep(60)  # a model call that outlasts the takeover
            finally:
                seen_lost.append(leases.lost("session:bot:k"))
        return "unwound"

    try:
        task = asyncio.create_task(work())
        await asyncio.wait_for(working.wait(), 10)
        # As if this replica were cut off past its lease: another took it, answered and gave it back.
        assert await store.release_lease("session:bot:k", "replica-a")
        assert await store.acquire_lease("session:bot:k", "replica-b", TTL)
        assert await store.release_lease("session:bot:k", "replica-b")

        assert await asyncio.wait_for(task, 10 * TTL) == "unwound"  # stopped at the next beat, no error
        assert seen_lost == [True]
        assert await store.acquire_lease("session:bot:k", "replica-c", TTL)  # not taken again by the old holder
    finally:
        await store.close()


async def test_a_lease_renewed_without_a_break_keeps_its_work_running(tmp_path):
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
    await store.init()
    leases = Leases(store, ttl_seconds=0.3, holder="replica-a")
    try:
        async with leases.held("session:bot:k") as ours:
            assert ours
            await asyncio.sleep(1.0)  # several beats
            assert not leases.lost("session:bot:k")
            assert not await store.acquire_lease("session:bot:k", "replica-b", 0.3)  # still held
        assert await store.acquire_lease("session:bot:k", "replica-b", 0.3)  # given back at the end
    finally:
        await store.close()
