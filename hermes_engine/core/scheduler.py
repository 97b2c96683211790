"""A small in-process asyncio scheduler for periodic jobs (skill curator, cleanups).

`every(name, interval_seconds, job, lease=True)`: with several replicas on one database, a leased job runs
on one replica per interval. The lease doubles as the "ran recently" marker: the replica that wins
`store.acquire_lease(name, holder, ttl_seconds=interval)` runs the job and keeps the lease for the whole
interval (renewing it while a long run is still going), so other replicas — and this one after a
restart — skip the job until it expires. While the job runs the lease names this process, so a gateway that
crashed mid-run is found gone and the job runs again at the next start; once the run ends it is handed to
`RAN_RECENTLY`, a name of no process, which nobody takes before it expires. A run cancelled by shutdown gives
the lease back so another replica can take over. A store without lease methods means a single replica: the
job runs locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.holders import new_holder
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.storage import LeaseStore

log = logging.getLogger(__name__)

JobFunc = Callable[[], Awaitable[Any]]


@dataclass
class Job:
    name: str
    interval: float
    func: JobFunc
    lease: bool = True
    first_delay: float = 0.0
    last_run: float | None = None  # monotonic time of the last start on this replica
    next_check: float = 0.0  # monotonic time of the next attempt
    runs: int = 0
    skipped: int = 0  # attempts another replica held the lease for
    last_error: str | None = None
    task: asyncio.Task[Any] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


RAN_RECENTLY = "ran recently"  # the holder of a job's lease between its runs: no process, never gone


class Scheduler:
    def __init__(self, store: LeaseStore | None = None, *, holder: str | None = None,
                 clock: Callable[[], float] = time.monotonic, poll_seconds: float = 60.0,
                 metrics: Metrics = NO_METRICS) -> None:
        self.store = store
        self.metrics = metrics
        self.holder = holder or new_holder()
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.jobs: dict[str, Job] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._warned = False

    @property
    def leases_supported(self) -> bool:
        return self.store is not None

    def every(self, name: str, interval_seconds: float, job: JobFunc, *, lease: bool = True,
              first_delay: float | None = None) -> Job:
        """Run `job()` every `interval_seconds`. A leased job first tries at once (the lease remembers when it
        last ran); an unleased one first runs after `first_delay` (default: one interval)."""
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        if name in self.jobs:
            raise ValueError(f"job {name!r} is already scheduled")
        delay = first_delay if first_delay is not None else (0.0 if lease else interval_seconds)
        entry = Job(name, float(interval_seconds), job, lease, delay, next_check=self.clock() + delay)
        self.jobs[name] = entry
        self._wake.set()
        return entry

    def cancel(self, name: str) -> None:
        job = self.jobs.pop(name, None)
        if job and job.task:
            job.task.cancel()

    # ------------------------------------------------------------------ running
    def _due(self, job: Job, now: float) -> bool:
        if job.running or now < job.next_check:
            return False
        return job.last_run is None or now - job.last_run >= job.interval

    async def _acquire(self, job: Job) -> bool:
        if not job.lease:
            return True
        if not self.leases_supported:
            if not self._warned:
                log.info("scheduler: no lease store; running jobs on this replica only")
                self._warned = True
            return True
        assert self.store is not None
        return bool(await self.store.acquire_lease(job.name, self.holder, job.interval))

    async def _release(self, job: Job) -> None:
        if job.lease and self.store is not None:
            try:
                await self.store.release_lease(job.name, self.holder)
            except Exception:  # best effort: the lease expires anyway
                log.warning("scheduler: could not release lease %s", job.name, exc_info=True)

    async def _keep_lease(self, job: Job) -> None:
        """Renew the lease while a run outlasts half its interval, so no other replica starts it twice."""
        while True:
            await asyncio.sleep(max(1.0, job.interval / 2))
            if self.store is not None:
                await self.store.acquire_lease(job.name, self.holder, job.interval)

    async def _run(self, job: Job) -> None:
        leased = job.lease and self.leases_supported
        keeper = asyncio.create_task(self._keep_lease(job)) if leased else None
        if leased:
            self.metrics.lease_held(job.name, True)
        try:
            await job.func()
            job.last_error = None
        except asyncio.CancelledError:
            await asyncio.shield(self._release(job))  # cut short: let another replica take it
            raise
        except Exception as exc:  # the lease stays: a failing job retries next interval, not in a hot loop
            job.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("scheduled job %s failed", job.name)
        finally:
            if keeper is not None:
                keeper.cancel()
            if leased:
                self.metrics.lease_held(job.name, False)
        if leased:
            await self._mark_ran(job)

    async def _mark_ran(self, job: Job) -> None:
        """Keep the lease for the rest of the interval as a marker of no process: a restart of this one,
        which would find the holder gone, still skips the job until the interval is over."""
        assert self.store is not None and job.last_run is not None
        left = job.interval - (self.clock() - job.last_run)
        if left <= 0:
            await self._release(job)
            return
        try:
            await self.store.hand_over_lease(job.name, self.holder, RAN_RECENTLY, left)
        except Exception:  # best effort: a restart may run the job again early
            log.warning("scheduler: could not keep lease %s until the interval ends", job.name, exc_info=True)

    async def tick(self, *, wait: bool = False) -> list[str]:
        """Start every due job whose lease this replica wins; returns their names.
        `wait=True` also waits for them to finish (tests, one-shot use)."""
        now = self.clock()
        started: list[Job] = []
        for job in list(self.jobs.values()):
            if not self._due(job, now):
                continue
            job.next_check = now + min(self.poll_seconds, job.interval)
            try:
                won = await self._acquire(job)
            except Exception:
                log.warning("scheduler: lease check for %s failed", job.name, exc_info=True)
                continue
            if not won:
                job.skipped += 1
                continue
            job.last_run = now
            job.runs += 1
            job.task = asyncio.create_task(self._run(job), name=f"job:{job.name}")
            started.append(job)
        if wait and started:
            await asyncio.gather(*(j.task for j in started if j.task), return_exceptions=True)
        return [j.name for j in started]

    async def run_now(self, name: str) -> bool:
        """Run one job now (still subject to its lease); False when another replica holds it."""
        job = self.jobs[name]
        if job.running or not await self._acquire(job):
            return False
        job.last_run = self.clock()
        job.runs += 1
        job.task = asyncio.create_task(self._run(job), name=f"job:{job.name}")
        await asyncio.gather(job.task, return_exceptions=True)
        return True

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            now = self.clock()
            pending = [j.next_check for j in self.jobs.values() if not j.running]
            delay = min([self.poll_seconds, *(max(0.0, t - now) for t in pending)])
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.05, delay))

    async def start(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        tasks = [t for t in [self._loop_task, *(j.task for j in self.jobs.values())] if t and not t.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop_task = None


__all__ = ["RAN_RECENTLY", "Job", "Scheduler"]
