"""Leases held: a scheduled job running on this replica under its database lease shows as held in the
metrics while it runs, and not after."""

from __future__ import annotations

import asyncio

from hermes_engine.core.scheduler import Scheduler
from hermes_gateway.metrics import PrometheusMetrics
from storage.store import SqlStore


async def test_a_leased_job_running_here_is_a_lease_held_until_it_ends(tmp_path):
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
    await store.init()
    metrics = PrometheusMetrics()
    running, finish = asyncio.Event(), asyncio.Event()

    async def job() -> None:
        running.set()
        await finish.wait()

    scheduler = Scheduler(store, metrics=metrics)
    scheduler.every("nightly", 3600, job)
    try:
        assert await scheduler.tick() == ["nightly"]
        await asyncio.wait_for(running.wait(), 10)
        assert metrics.registry.get_sample_value("hermes_leases_held", {"job": "nightly"}) == 1
        other = Scheduler(store, metrics=metrics)  # another replica: the lease is taken, so it holds none
        other.every("nightly", 3600, job)
        assert await other.tick() == []
        assert metrics.registry.get_sample_value("hermes_leases_held", {"job": "nightly"}) == 1
        finish.set()
        task = scheduler.jobs["nightly"].task
        assert task is not None
        await task
        assert metrics.registry.get_sample_value("hermes_leases_held", {"job": "nightly"}) == 0
    finally:
        await scheduler.stop()
        await store.close()
