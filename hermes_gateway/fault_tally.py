"""Errors and platforms' 429s counted per minute and added to the store, so the dashboard's Overview shows
the last hour of every replica's faults (Prometheus counters hold this process's totals since it started,
which no page can turn into "in the last hour" across replicas).

A fault is counted in memory as it happens (a metrics hook must not wait on the store) and the counts are
added to the store every `FLUSH_SECONDS` and when the gateway stops; counts a failed write could not add are
kept for the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from hermes_engine.ports.dashboard import DashboardStore
from hermes_gateway.metrics import PrometheusMetrics

log = logging.getLogger(__name__)

FLUSH_SECONDS = 10.0
Minute = tuple[datetime, str]


class FaultTally:
    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._clock = clock
        self._counts: Counter[Minute] = Counter()

    def count(self, kind: str) -> None:
        self._counts[(self._clock().replace(second=0, microsecond=0), kind)] += 1

    async def flush(self, store: DashboardStore) -> None:
        counts, self._counts = self._counts, Counter()
        if not counts:
            return
        try:
            await store.add_faults(counts)
        except Exception as exc:  # the store is down: the counts wait for the next flush
            self._counts.update(counts)
            log.warning("could not add %d fault counts to the store: %s", sum(counts.values()), exc)

    async def run(self, store: DashboardStore, every: float = FLUSH_SECONDS) -> None:
        """Flush every `every` seconds until cancelled, then once more."""
        try:
            while True:
                await asyncio.sleep(every)
                await self.flush(store)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.flush(store))


class TalliedMetrics(PrometheusMetrics):
    """The Prometheus series, and the faults among them counted per minute as well."""

    def __init__(self, tally: FaultTally) -> None:
        super().__init__()
        self.tally = tally

    def error(self, bot: str, kind: str) -> None:
        super().error(bot, kind)
        self.tally.count(f"error:{kind}")

    def rate_limited(self, platform: str) -> None:
        super().rate_limited(platform)
        self.tally.count(f"429:{platform}")
