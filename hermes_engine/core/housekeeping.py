"""Jobs that keep the gateway's stored state bounded, run by the host's leased scheduler.

The durable inbox records every inbound event (so a duplicate is dropped and a message received before a
crash is answered after restart); once answered, an event only matters while the platform may still
re-deliver it (minutes on Slack, a day at most on Telegram). The delivery ledger's records matter only
while their event could still be answered again. `InboxPruning` deletes answered events and delivery
records older than `HERMES_INBOX_RETENTION_DAYS` once a day, on one replica (the lease is shared by every
bot of the database, since both tables are).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from hermes_engine.ports.feature import Feature
from hermes_engine.ports.storage import DeliveryLog, Inbox

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

DAY = 86400.0
JOB = "inbox-prune"


class PrunedStore(Inbox, DeliveryLog, Protocol):
    """What the pruning deletes from."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class InboxPruning(Feature):
    name = "inbox-pruning"

    def __init__(self, retention_days: float, *, every_seconds: float = DAY,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.retention = timedelta(days=retention_days)
        self.every_seconds = every_seconds
        self.clock = clock
        self.inbox: PrunedStore | None = None

    async def start(self, host: Host) -> None:
        self.inbox = host.store
        host.schedule(JOB, self.every_seconds, self.prune)

    async def prune(self) -> int:
        """Delete answered events received before the retention (pending ones are always kept) and the
        delivery records last written before it; returns how many rows went."""
        assert self.inbox is not None
        before = self.clock() - self.retention
        events = await self.inbox.prune_inbound(before)
        deliveries = await self.inbox.prune_deliveries(before)
        if events or deliveries:
            log.info("deleted %d answered inbox events and %d delivery records older than %s", events, deliveries,
                     self.retention)
        return events + deliveries
