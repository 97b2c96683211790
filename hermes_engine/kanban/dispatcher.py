"""The dispatcher: one per database and profile (a lease), ticking every `tick_seconds` and at once when a
card changes, in six phases:

1. reclaim stale claims: running cards whose lease (renewed by heartbeats) expired — their worker's process
   died or hung — fail that attempt and go back to ready (or blocked, by the circuit breaker);
2. detect crashed workers of this process: an attempt task that died without ending its attempt fails it;
   a card waiting for its parts (split by its worker) is blocked when one of them is;
3. auto-decompose triage cards (a few per tick, with the model);
4. promote todo cards whose dependencies are done to ready;
5. claim ready cards (at most `max_in_progress_per_profile` running) and start their workers;
6. sleep until the next tick or a poke.

When one of its workers finishes, the leading dispatcher only refills (phases 4 and 5) while its lease is
live: the other phases look for trouble that a finished attempt does not cause, and skipping them halves
what each card costs the database.

Progress goes out in batches: the cards started by one claim, and those taken back in one tick, are one
call of `on_batch` each, so fifty cards starting at once make one message per conversation, not fifty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from hermes_engine.config import KanbanSettings
from hermes_engine.kanban.attempt import AttemptEnd
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.storage import CardRecord, CardStore, LeaseStore

log = logging.getLogger(__name__)

RunAttempt = Callable[[CardRecord, str], Awaitable[AttemptEnd]]
OnCard = Callable[[CardRecord], Awaitable[None]]
Progress = Literal["started", "taken back"]
OnBatch = Callable[[Progress, Sequence[CardRecord]], Awaitable[None]]
TICK_GRACE_SECONDS = 10.0  # a stop waits this long for a tick in progress to end before cutting it


class BoardStore(CardStore, LeaseStore, Protocol):
    """What the dispatcher needs of the store."""


@dataclass
class TickReport:
    leader: bool = False
    reclaimed: list[int] = field(default_factory=list)
    crashed: list[int] = field(default_factory=list)
    decomposed: list[int] = field(default_factory=list)
    promoted: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)


class Dispatcher:
    def __init__(self, store: BoardStore, profile: str, settings: KanbanSettings, run_attempt: RunAttempt, *,
                 holder: str, on_card: OnCard | None = None, on_batch: OnBatch | None = None,
                 decompose: Callable[[CardRecord], Awaitable[None]] | None = None,
                 metrics: Metrics = NO_METRICS) -> None:
        self.store = store
        self.metrics = metrics
        self.profile = profile
        self.settings = settings
        self.run_attempt = run_attempt
        self.holder = holder
        self.on_card = on_card  # a card finished or was blocked
        self.on_batch = on_batch  # cards started, or taken back to run again: one call per kind and tick
        self.decompose = decompose
        self.workers: dict[int, tuple[str, asyncio.Task[AttemptEnd]]] = {}  # card id → (claim, attempt)
        self._wake = asyncio.Event()
        self._full = True  # the next wake runs every phase (a poke, the interval), not only a refill
        self._leader_until = 0.0  # monotonic time the dispatcher lease surely lasts until
        self._leading = False  # as last reported in the leases-held metric
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def lease_name(self) -> str:
        return f"kanban-dispatcher:{self.profile}"

    @property
    def interval(self) -> float:
        """Seconds between full ticks: often enough to notice expired claims well within their lease."""
        return min(self.settings.tick_seconds, self.settings.lease_seconds / 2)

    @property
    def lease_ttl(self) -> float:
        """The dispatcher's own lease: three missed ticks and another process takes over."""
        return self.interval * 3

    def poke(self) -> None:
        """A card changed: tick now rather than at the next interval."""
        self._full = True
        self._wake.set()

    async def tick(self) -> TickReport:
        report = TickReport()
        ttl = self.lease_ttl
        asked = time.monotonic()
        if not await self.store.acquire_lease(self.lease_name, self.holder, ttl):
            self._leader_until = 0.0
            self._lead(False)
            return report  # another process dispatches this board
        self._leader_until = asked + ttl / 2
        self._lead(True)
        report.leader = True
        limit = self.settings.max_failures
        again: list[CardRecord] = []  # taken back, to run again
        for card in await self.store.reclaim_stale(self.profile, max_failures=limit):
            report.reclaimed.append(card.id)
            log.warning("kanban: card %s reclaimed (%s)", card.id, card.reason)
            await self._ended(card, again)
        for card_id, (claim, task) in list(self.workers.items()):
            if not task.done():
                continue
            del self.workers[card_id]
            if task.cancelled() or task.exception() is not None:
                why = "cancelled" if task.cancelled() else repr(task.exception())
                end = await self.store.finish_attempt(card_id, claim, ok=False, max_failures=limit,
                                                      handoff={"error": f"the worker crashed: {why}"})
                if end is not None:
                    report.crashed.append(card_id)
                    await self._ended(end, again)
        await self._batch("taken back", again)
        for card in await self.store.block_waiting_parents(self.profile, actor="dispatcher"):
            await self._tell(card)
        if self.decompose is not None and self.settings.decompose_per_tick:
            for card in (await self.store.list_cards(profile=self.profile, status="triage"))[
                    :self.settings.decompose_per_tick]:
                await self.decompose(card)
                report.decomposed.append(card.id)
        await self._refill(report)
        return report

    async def refill(self) -> TickReport:
        """Phases 4 and 5 only, while this dispatcher surely leads; a full tick otherwise."""
        if time.monotonic() >= self._leader_until:
            return await self.tick()
        report = TickReport(leader=True)
        await self._refill(report)
        return report

    async def _refill(self, report: TickReport) -> None:
        report.promoted = await self.store.promote_ready(self.profile)
        started: list[CardRecord] = []
        for card in await self.store.claim_cards(self.profile, self.holder, lease_seconds=self.settings.lease_seconds,
                                                 max_running=self.settings.max_in_progress_per_profile):
            assert card.claim is not None
            task = asyncio.create_task(self._attempt(card, card.claim), name=f"kanban-card:{card.id}")
            self.workers[card.id] = (card.claim, task)
            report.started.append(card.id)
            started.append(card)
        await self._batch("started", started)

    async def _attempt(self, card: CardRecord, claim: str) -> AttemptEnd:
        try:
            end = await self.run_attempt(card, claim)
        except Exception:
            self._full = True  # a crash: the next tick's phase 2 fails the attempt
            raise
        finally:
            self._wake.set()  # a slot is free and dependants may be ready: refill
        if end.card is not None and end.card.claim is None:
            if end.card.status == "blocked" and end.card.parent_id is not None:
                self._full = True  # the next wake blocks the parent waiting for it
            await self._tell(end.card)
        return end

    async def _tell(self, card: CardRecord) -> None:
        if self.on_card is None:
            return
        try:
            await self.on_card(card)
        except Exception:  # a conversation that is gone never stops the board
            log.warning("kanban: could not post about card %s", card.id, exc_info=True)

    async def _ended(self, card: CardRecord, again: list[CardRecord]) -> None:
        """An attempt this tick ended for the worker: a blocked card is told now, one back in ready joins the
        tick's batch of cards taken back."""
        if card.status == "ready":
            again.append(card)
        else:
            await self._tell(card)

    async def _batch(self, kind: Progress, cards: Sequence[CardRecord]) -> None:
        if self.on_batch is None or not cards:
            return
        try:
            await self.on_batch(kind, cards)
        except Exception:
            log.warning("kanban: could not post that %d card(s) %s", len(cards), kind, exc_info=True)

    async def _run(self) -> None:
        delay = self.interval
        next_full = 0.0
        while not self._stopping:
            full = self._full or time.monotonic() >= next_full
            self._full = False
            self._wake.clear()
            try:
                if full:
                    next_full = time.monotonic() + delay
                    await self.tick()
                else:
                    await self.refill()
            except Exception:
                log.exception("kanban dispatcher tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, next_full - time.monotonic()))

    def start(self) -> None:
        if self._loop is None or self._loop.done():
            self._stopping = False
            self._loop = asyncio.create_task(self._run(), name=f"kanban-dispatcher:{self.profile}")

    async def stop(self) -> None:
        """End the loop between two ticks, then cut the workers and give their cards back. The loop is not
        cancelled mid-tick unless a tick outlasts `TICK_GRACE_SECONDS`: a claim cut off in flight can commit
        on the server with no worker to run it, leaving the card running until its claim goes stale."""
        self._stopping = True
        self._wake.set()
        if self._loop is not None and not (await asyncio.wait({self._loop}, timeout=TICK_GRACE_SECONDS))[0]:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        self._loop = None
        tasks = [task for _claim, task in self.workers.values() if not task.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for card_id, (claim, _task) in list(self.workers.items()):  # stopped, not failed: back to ready
            with contextlib.suppress(Exception):  # the store is gone: the claim goes stale and is reclaimed
                await self.store.release_card(card_id, claim, reason="the gateway stopped")
        self.workers.clear()
        self._lead(False)
        with contextlib.suppress(Exception):
            await self.store.release_lease(self.lease_name, self.holder)

    def _lead(self, leading: bool) -> None:
        """The board's lease in the leases-held metric, as this replica last found it."""
        if leading != self._leading:
            self._leading = leading
            self.metrics.lease_held(self.lease_name, leading)
