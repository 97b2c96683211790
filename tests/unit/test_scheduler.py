"""The in-process scheduler: leased jobs run on one replica per interval."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_engine.core.scheduler import Scheduler


class LeaseStore:
    """The lease half of the Store contract, in memory, with SqlStore's semantics (renewable by the holder)."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.leases: dict[str, tuple[str, float]] = {}

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        await asyncio.sleep(0)  # let concurrent callers interleave, as a database round trip would
        current = self.leases.get(name)
        now = self.clock()
        if current is None or current[1] <= now or current[0] == holder:
            self.leases[name] = (holder, now + ttl_seconds)
            return True
        return False

    async def release_lease(self, name: str, holder: str) -> bool:
        if self.leases.get(name, ("", 0))[0] == holder:
            del self.leases[name]
            return True
        return False

    async def hand_over_lease(self, name: str, holder: str, to: str, ttl_seconds: float) -> bool:
        if self.leases.get(name, ("", 0))[0] != holder:
            return False
        self.leases[name] = (to, self.clock() + ttl_seconds)
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_a_leased_job_runs_on_one_replica_per_interval(clock):
    store = LeaseStore(clock)
    runs: list[str] = []
    replicas = [Scheduler(store, holder=f"replica-{i}", clock=clock, poll_seconds=60) for i in range(3)]
    for s in replicas:
        s.every("curator", 3600, lambda s=s: _record(runs, s.holder))

    started = await asyncio.gather(*(s.tick(wait=True) for s in replicas))
    assert sum(len(x) for x in started) == 1 and len(runs) == 1

    clock.now += 1800  # half an interval: nobody runs it again
    for s in replicas:
        s.jobs["curator"].next_check = 0
        assert await s.tick(wait=True) == []
    assert len(runs) == 1

    clock.now += 1801  # the lease ran out: exactly one replica takes the next run
    for s in replicas:
        s.jobs["curator"].next_check = 0
    await asyncio.gather(*(s.tick(wait=True) for s in replicas))
    assert len(runs) == 2


async def _record(runs: list[str], holder: str) -> None:
    runs.append(holder)


async def test_a_restarted_replica_does_not_rerun_a_job_that_just_ran(clock):
    store = LeaseStore(clock)
    runs: list[str] = []
    first = Scheduler(store, holder="old-process", clock=clock)
    first.every("curator", 3600, lambda: _record(runs, "old"))
    await first.tick(wait=True)
    restarted = Scheduler(store, holder="new-process", clock=clock)
    restarted.every("curator", 3600, lambda: _record(runs, "new"))
    assert await restarted.tick(wait=True) == []
    assert runs == ["old"]


async def test_without_a_lease_store_jobs_run_locally(clock):
    runs: list[str] = []
    s = Scheduler(None, clock=clock)
    s.every("leased", 10, lambda: _record(runs, "leased"))
    s.every("local", 10, lambda: _record(runs, "local"), lease=False)
    assert await s.tick(wait=True) == ["leased"]  # an unleased job first waits one interval
    clock.now += 10
    assert sorted(await s.tick(wait=True)) == ["leased", "local"]


async def test_a_failing_job_is_logged_and_retried_next_interval(clock):
    store = LeaseStore(clock)
    attempts = {"n": 0}

    async def broken() -> None:
        attempts["n"] += 1
        raise RuntimeError("boom")

    s = Scheduler(store, holder="me", clock=clock)
    s.every("broken", 60, broken)
    await s.tick(wait=True)
    assert s.jobs["broken"].last_error == "RuntimeError: boom"
    clock.now += 30
    assert await s.tick(wait=True) == [] and attempts["n"] == 1  # no hot loop
    clock.now += 31
    await s.tick(wait=True)
    assert attempts["n"] == 2


async def test_a_run_cut_short_by_shutdown_gives_the_lease_back(clock):
    store = LeaseStore(clock)
    started = asyncio.Event()

    async def long_job() -> None:
        started.set()
        await asyncio.sleep(3600)

    s = Scheduler(store, holder="me", clock=clock)
    s.every("long", 600, long_job)
    await s.tick()
    await started.wait()
    assert "long" in store.leases
    await s.stop()
    assert "long" not in store.leases


async def test_the_background_loop_runs_due_jobs():
    done = asyncio.Event()

    async def job() -> None:
        done.set()

    s = Scheduler(None, poll_seconds=0.05)
    s.every("quick", 0.05, job, lease=False)
    await s.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=2)
    finally:
        await s.stop()
    assert done.is_set()


async def test_leases_through_the_sql_store(tmp_path: Path, clock):
    from storage.store import SqlStore

    now = [datetime(2025, 1, 1, tzinfo=UTC)]
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'h.db'}", clock=lambda: now[0])
    await store.init()
    try:
        runs: list[str] = []
        a = Scheduler(store, holder="a", clock=clock)
        b = Scheduler(store, holder="b", clock=clock)
        a.every("skills-curator", 3600, lambda: _record(runs, "a"))
        b.every("skills-curator", 3600, lambda: _record(runs, "b"))
        await asyncio.gather(a.tick(wait=True), b.tick(wait=True))
        assert len(runs) == 1
        now[0] += timedelta(minutes=30)
        clock.now += 1800
        await asyncio.gather(a.tick(wait=True), b.tick(wait=True))
        assert len(runs) == 1
        now[0] += timedelta(hours=1)
        clock.now += 3600
        await asyncio.gather(a.tick(wait=True), b.tick(wait=True))
        assert len(runs) == 2
    finally:
        await store.close()
