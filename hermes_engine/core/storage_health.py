"""Whether the store can write, as the engine last found out.

A store that cannot write (the disk is full, the database read-only or gone) is an outage, not a failure
of one message: every turn started during it would pay for model calls whose results cannot be kept, and
a platform that redelivers what was not recorded would start them again and again. So the first failed
write opens an outage. Until a probe write succeeds, no turn starts (no model call), each chat is told
once, and the readiness endpoint says why. The probe is a real write through the narrowest role that
writes (a lease taken and given back), made when someone asks (a message, a queued turn, `/ready`), and
shared by everyone asking at the same moment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from hermes_engine.errors import StorageError
from hermes_engine.holders import new_holder
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.storage import LeaseStore

log = logging.getLogger(__name__)

PROBE_LEASE = "storage-probe"
PROBE_TTL_SECONDS = 60.0


class StorageHealth:
    def __init__(self, leases: LeaseStore) -> None:
        self._leases = leases
        self._holder = new_holder()
        self.failure: StorageError | None = None
        self._told: set[Hashable] = set()
        self._probe: asyncio.Future[None] | None = None
        self._on_recovery: list[Callable[[], Awaitable[None]]] = []

    def when_recovered(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` each time an outage ends, before the probe that found it ended returns: a gateway
        queues what was left waiting in its inbox ahead of the message that asked."""
        self._on_recovery.append(hook)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def reason(self) -> str:
        return self.failure.reason if self.failure is not None else ""

    def notice(self) -> str:
        """The one sentence a person gets when their message cannot be taken."""
        return f"⚠️ I can't save anything right now ({self.reason}), so I'm pausing; please try again later."

    def failed(self, error: StorageError) -> None:
        """A write failed: the outage starts (or goes on, with the newest reason)."""
        if self.failure is None:
            log.error("%s: no turn starts until a probe write succeeds", error)
            self._told.clear()
        self.failure = error

    def first_notice(self, target: ReplyTarget) -> bool:
        """True once per chat per outage: whoever gets True tells the person."""
        chat = (target.platform, target.account, target.chat_id, target.thread_id)
        if self.failure is None or chat in self._told:
            return False
        self._told.add(chat)
        return True

    async def ensure_ready(self) -> None:
        """Return when the store can write; raise the `StorageError` while it cannot. During an outage each
        call waits for a probe write (callers at the same moment share one)."""
        if self.failure is None:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._write_probe())
            self._probe.add_done_callback(_retrieve)
        await asyncio.shield(self._probe)

    async def _write_probe(self) -> None:
        name = f"{PROBE_LEASE}:{self._holder}"
        try:
            await self._leases.acquire_lease(name, self._holder, PROBE_TTL_SECONDS)
            await self._leases.release_lease(name, self._holder)
        except StorageError as exc:
            self.failed(exc)
            raise
        if self.failure is not None:
            log.warning("the store writes again (it could not: %s); turns go on", self.failure.reason)
            self.failure = None
            self._told.clear()
            for hook in self._on_recovery:
                try:
                    await hook()
                except Exception:  # one gateway's trouble must not keep the others waiting
                    log.exception("taking up what waited for the store failed")


def _retrieve(probe: asyncio.Future[None]) -> None:
    """A probe's failure is its callers' to handle; one whose callers were cancelled is not an error."""
    if not probe.cancelled():
        probe.exception()
