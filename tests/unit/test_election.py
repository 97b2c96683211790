"""The leader lease of elected receiving (`adapters.election`): one holder runs the work, shown as a lease
held in the metrics; a holder paused past its lease, which another replica then took, stops the work as
soon as it runs again and stands by."""

from __future__ import annotations

import asyncio
import threading
import time

from adapters.election import Election
from hermes_gateway.metrics import PrometheusMetrics
from storage.store import SqlStore

TTL = 1.0


def take_lease_elsewhere(url: str, name: str) -> bool:
    """Another replica, on its own connection and event loop, taking the lease."""
    async def take() -> bool:
        store = SqlStore(url)
        await store.init()
        try:
            return await store.acquire_lease(name, "other-replica", 60)
        finally:
            await store.close()
    took: list[bool] = []
    thread = threading.Thread(target=lambda: took.append(asyncio.run(take())))
    thread.start()
    thread.join()  # the caller's event loop waits meanwhile, as a paused process would
    return took[0]


async def test_a_holder_paused_past_its_lease_stops_its_work_and_stands_by(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}"
    store = SqlStore(url)
    await store.init()
    metrics = PrometheusMetrics()
    working, stopped = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        working.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    election = Election(store, "telegram-poller:1", "this-replica", ttl_seconds=TTL, metrics=metrics)
    runner = asyncio.create_task(election.run(work))
    try:
        await asyncio.wait_for(working.wait(), 10)
        assert election.leading and election.role == "leader"
        assert metrics.registry.get_sample_value("hermes_leases_held", {"job": "telegram-poller:1"}) == 1
        assert take_lease_elsewhere(url, "telegram-poller:1") is False  # held: nobody else gets it

        time.sleep(TTL * 1.5)  # noqa: ASYNC251 - the whole process stops (SIGSTOP, a long GC pause) past the lease …
        assert take_lease_elsewhere(url, "telegram-poller:1") is True  # … and meanwhile another replica took it
        assert not election.leading  # no renewal confirmed within the lease: not to be trusted at once

        await asyncio.wait_for(stopped.wait(), 10)
        await asyncio.sleep(election.check_seconds * 2)
        assert election.role == "stand-by"
        assert metrics.registry.get_sample_value("hermes_leases_held", {"job": "telegram-poller:1"}) == 0
        working.clear()
        await asyncio.sleep(election.check_seconds * 2)
        assert not working.is_set()  # the other replica's lease is live: the work is not started again
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await store.close()
