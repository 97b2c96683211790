"""One replica at a time: a leader lease for work that must not run twice, such as polling one Telegram bot
(two pollers make Telegram answer 409 Conflict to each other) or holding one Discord gateway connection
(two connections answer every message twice).

Replicas on one database each run `Election.run(work)`. `ttl_seconds` is the lease period the operator
sets: a stand-by takes over within it after the holder dies. The lease is written for two thirds of it
(judged against the database's clock) and renewed every quarter; the others stand by and try again every
quarter, so when the holder dies (stops renewing) one of them takes over within two thirds of the period
and a check (eleven twelfths at most), and a renewal has five twelfths of the period to come back before
its holder must stop. A holder stops its work as soon as it cannot be sure it still holds the lease: a
renewal refused (another replica took it), or no renewal confirmed within the lease (the process was
paused, or the database is unreachable) — the local deadline counts from before the renewal was asked, so
it never outlasts the database's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.storage import LeaseStore

log = logging.getLogger(__name__)

Role = Literal["starting", "leader", "stand-by"]
MIN_CHECK_SECONDS = 0.2


class Election:
    def __init__(self, leases: LeaseStore, name: str, holder: str, *, ttl_seconds: float,
                 metrics: Metrics = NO_METRICS, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.leases = leases
        self.name = name
        self.holder = holder
        self.period = ttl_seconds
        self.ttl = ttl_seconds * 2 / 3  # what the database holds
        self.check_seconds = max(MIN_CHECK_SECONDS, ttl_seconds / 4)
        self.metrics = metrics
        self.clock = clock
        self.role: Role = "starting"
        self._valid_until = 0.0

    @property
    def leading(self) -> bool:
        """True while this replica holds the lease as far as it can be sure."""
        return self.role == "leader" and self.clock() < self._valid_until

    async def _claim(self) -> bool | None:
        """Take or renew the lease: True (the local deadline moves to a TTL after the asking), False
        (another replica holds it) or None (the database did not say)."""
        asked = self.clock()
        try:
            won = await asyncio.wait_for(self.leases.acquire_lease(self.name, self.holder, self.ttl), self.ttl)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the database is away: the lease is not confirmed
            log.warning("lease %s could not be checked (%s)", self.name, exc)
            return None
        if won:
            self._valid_until = asked + self.ttl
        return bool(won)

    async def run(self, work: Callable[[], Awaitable[None]]) -> None:
        """Stand by until the lease is ours, run `work` while it stays ours, and start over when it is lost
        or `work` ends. Runs until cancelled; then gives the lease back so a stand-by need not wait."""
        while True:
            if not await self._claim():
                if self.role != "stand-by":
                    log.info("standing by: another replica holds %s", self.name)
                self.role = "stand-by"
                await asyncio.sleep(self.check_seconds)
                continue
            log.info("took lease %s", self.name)
            await self._lead(work)
            await asyncio.sleep(self.check_seconds)  # work that ends at once must not spin

    async def _lead(self, work: Callable[[], Awaitable[None]]) -> None:
        self.role = "leader"
        self.metrics.lease_held(self.name, True)
        task = asyncio.ensure_future(work())
        try:
            while not task.done():
                now = self.clock()
                wake = min(now + self.check_seconds, self._valid_until)
                await asyncio.wait({task}, timeout=max(0.0, wake - now))
                if task.done():
                    break
                if self.clock() >= self._valid_until:
                    log.warning("lease %s not confirmed within %.0fs; stopping until it is", self.name, self.ttl)
                    return
                if await self._claim() is False:
                    log.warning("lost lease %s to another replica; stopping", self.name)
                    return
            if not task.cancelled() and task.exception() is not None:
                log.error("work under lease %s failed", self.name, exc_info=task.exception())
        finally:
            self.role = "stand-by"
            self.metrics.lease_held(self.name, False)
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(task)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.leases.release_lease(self.name, self.holder))


__all__ = ["Election", "Role"]
