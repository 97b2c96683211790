"""This replica's leases on shared work: a session's turns, a goal's next step, a session's background review.

With several gateways on one database, a session runs its turns on one replica at a time: the one holding
the store lease `session:<bot>:<key>`. The holder renews it every third of its time to live while it works
and gives it back when the session's queue and its pending inbox events are done and no message has come for
a third of its time to live (`core/lane_work.py`: a conversation that goes on takes it once). A replica that dies
stops renewing; once the lease expires (`HERMES_SESSION_LEASE_SECONDS`, 30 s by default) another replica
takes the session's pending events over. On a single replica every lease is won at once.

The holder is this process (`hermes_engine.holders.process_holder`: the replica, `HERMES_REPLICA_ID` or the
host name, and the process): a gateway restarted on the same host after a crash finds its predecessor gone
and takes at once what it held. Within a process a lease is held by one block at a time (a local lock).

A holder that finds at a renewal that another replica has had the lease (this one was paused or cut off
from the database for longer than the time to live, and its work was taken over, perhaps finished and given
back already) stops the work under it: the
block is cancelled, `lost(name)` says why while it unwinds (a turn stopped this way stays in the inbox for
the new holder, as at shutdown), and the block ends without an error for the code around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from hermes_engine.holders import process_holder
from hermes_engine.ports.storage import LeaseStore

log = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30.0


class Leases:
    """Take, keep (a heartbeat) and give back named leases as one replica (`holder`)."""

    def __init__(self, store: LeaseStore, *, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 holder: str | None = None) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.store = store
        self.ttl = float(ttl_seconds)
        self.holder = holder or process_holder()
        self._local: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self._lost: set[str] = set()

    def lost(self, name: str) -> bool:
        """Whether the block holding `name` here is being stopped because another replica holds it now."""
        return name in self._lost

    @property
    def renew_every(self) -> float:
        """A heartbeat well inside the time to live: two may fail before another replica takes over."""
        return self.ttl / 3

    async def take(self, name: str) -> bool:
        """Take (or renew) `name`; False while another live replica holds it."""
        return bool(await self.store.acquire_lease(name, self.holder, self.ttl))

    async def take_when_free(self, name: str, poll_seconds: float = 0.2) -> bool:
        """Take `name` once nobody else holds it (at the latest when another holder's lease expires)."""
        while True:
            if await self.take(name):
                return True
            await asyncio.sleep(poll_seconds)

    async def give_back(self, name: str) -> None:
        try:
            await self.store.release_lease(name, self.holder)
        except Exception:  # noqa: BLE001 - it expires anyway
            log.warning("could not give back lease %s; it expires in %.0f s", name, self.ttl, exc_info=True)

    @contextlib.asynccontextmanager
    async def held(self, name: str, *, wait: bool = False) -> AsyncIterator[bool]:
        """`async with leases.held(name) as ok`: ok says whether this replica holds `name` now (`wait`:
        once nobody else does); while the block runs it is renewed, and it is given back at the end (a
        cancelled block included)."""
        lock = self._local.setdefault(name, asyncio.Lock())
        if lock.locked() and not wait:
            yield False
            return
        self._users[name] = self._users.get(name, 0) + 1
        try:
            async with lock:
                taken = await self.take_when_free(name) if wait else await self.take(name)
                if not taken:
                    yield False
                    return
                body = asyncio.current_task()
                keeper = asyncio.create_task(self._keep(name, body), name=f"lease:{name}")
                try:
                    yield True
                except asyncio.CancelledError:
                    if name not in self._lost:
                        raise
                finally:
                    keeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await keeper
                    if name in self._lost:
                        self._lost.discard(name)
                        if body is not None and body.cancelling():
                            body.uncancel()  # the stop was this lease's own; the code around goes on
                    else:
                        await asyncio.shield(self.give_back(name))
        finally:
            self._users[name] -= 1
            if not self._users[name]:  # nobody here holds or waits for it: forget its lock
                del self._users[name], self._local[name]

    async def _keep(self, name: str, body: asyncio.Task[object] | None) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            try:
                if not await self.store.renew_lease(name, self.holder, self.ttl):
                    log.error("lease %s was taken by another replica while held here: stopping the work "
                              "under it", name)
                    if body is not None:
                        self._lost.add(name)
                        body.cancel()
                    return
            except Exception:  # noqa: BLE001 - the next beat tries again; the lease outlives two misses
                log.warning("could not renew lease %s", name, exc_info=True)
