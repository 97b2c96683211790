"""Nudge engine: after some turns, a background review decides what is worth saving.

The counters that decide when a review is due live in this replica's memory only: they are a nudge, and a
restart or another replica starting from zero merely delays the next review. A review that is due is
durable: it is marked in the store's `ReviewQueue` before it starts and cleared when it ends (or fails for
good), and it runs under the lease `review:<bot>:<session id>`, so one replica at a time reviews a session.
Every replica looks for due reviews every lease renewal period and runs those whose lease is free: a review
cut off with its replica (`kill -9`, a stop mid-review) is run by another, or by the same one restarted.

A review never speaks to the person and never holds the session's queue: it is background work spawned
after the turn (marking it due included), so the person's next message is never delayed by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_engine.config import ReviewSettings
from hermes_engine.errors import StorageError
from hermes_engine.loops.reviewer import review_prompt, run_review, scope_record, stored_session
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Usage
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.leases import review_lease
from hermes_engine.ports.session import SessionHandle, SessionScope
from hermes_engine.ports.storage import DueReview

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)


@dataclass
class _Counters:
    turns: int = 0
    tool_iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    reviews: int = 0
    last_outcome: str = ""


class ReviewFeature(Feature):
    name = "review"

    def __init__(self, settings: ReviewSettings) -> None:
        self.settings = settings
        self.host: Host | None = None
        self.counters: dict[int, _Counters] = {}  # per session, this replica's turns only (see the module)
        self.running: dict[int, asyncio.Task[Any]] = {}  # reviews under way here, by session id
        self._watch: asyncio.Task[None] | None = None

    async def start(self, host: Host) -> None:
        self.host = host
        self._watch = asyncio.create_task(self._keep_sweeping(), name="review-sweep")

    async def stop(self) -> None:
        """Cut reviews under way short; their records stay due, for another replica or the next start."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for task in list(self.running.values()):
            task.cancel()
        await asyncio.gather(*self.running.values(), return_exceptions=True)

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if outcome.failed or outcome.interrupted or outcome.purpose not in ("turn", "goal"):
            return
        counters = self.counters.setdefault(outcome.scope.session_id, _Counters())
        counters.turns += 1
        counters.tool_iterations += outcome.tool_iterations
        if any(c.name == "skill_manage" for m in outcome.new_messages for c in m.tool_calls):
            counters.tool_iterations = 0  # the live agent just wrote a skill
        memory = skill = False
        every_turns, every_iterations = self.settings.memory_every_turns, self.settings.skill_every_iterations
        if every_turns and counters.turns >= every_turns:
            counters.turns = 0
            memory = True
        if every_iterations and counters.tool_iterations >= every_iterations:
            counters.tool_iterations = 0
            skill = True
        session_id = outcome.scope.session_id
        # One review of a session at a time here: one falling due while another runs is dropped (a nudge).
        if (memory or skill) and self.host is not None and session_id not in self.running:
            self._start(session_id, self._due_after_turn(outcome.scope, outcome.person_id, memory, skill))

    def on_session_evicted(self, scope: SessionScope) -> None:
        self.counters.pop(scope.session_id, None)  # a running review keeps its own reference

    # ------------------------------------------------------------------ the queue and the lease

    def _start(self, session_id: int, work: Coroutine[Any, Any, Any]) -> None:
        assert self.host is not None
        task = self.host.spawn(work, f"review:{session_id}")
        self.running[session_id] = task
        task.add_done_callback(functools.partial(self._finished, session_id))

    def _finished(self, session_id: int, task: asyncio.Task[Any]) -> None:
        if self.running.get(session_id) is task:
            del self.running[session_id]

    async def _due_after_turn(self, scope: SessionScope, person_id: int | None, memory: bool, skill: bool) -> None:
        """Mark the review due, then run it here on the session as this replica has it loaded."""
        assert self.host is not None
        live = self.host.session_by_id(scope.session_id)
        due = await self.host.store.mark_review_due(
            self.host.bot, scope.session_id, session_key=scope.session_key, person_id=person_id,
            memory=memory, skill=skill, scope=scope_record(scope, live.target if live else None))
        await self._run(due, live)

    async def sweep(self) -> None:
        """Run every due review of the bot that is not under way here; one another replica is reviewing
        (its lease is held) is left to it."""
        assert self.host is not None
        for due in await self.host.store.due_reviews(self.host.bot):
            if due.session_id not in self.running:
                self._start(due.session_id, self._run(due, None))

    async def _keep_sweeping(self) -> None:
        assert self.host is not None
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # noqa: BLE001 - the store may be down; the next round tries again
                log.warning("could not look for due reviews: %s", exc)
            await asyncio.sleep(self.host.leases.renew_every)

    async def _run(self, due: DueReview, live: SessionHandle | None) -> None:
        """Run a due review under the session's review lease and clear it; `live`: the session as loaded
        here after the turn that made it due (else a copy is read from the store)."""
        host = self.host
        assert host is not None
        async with host.leases.held(review_lease(host.bot, due.session_id)) as ours:
            if not ours:
                return  # another replica reviews this session now; the record stays due for it
            current = await host.store.due_reviews(host.bot, due.session_id)
            if not current:
                return  # the replica that held the lease before ran it to the end
            due = current[0]
            try:
                await self.review(due, live)
            except StorageError as exc:
                log.warning("review of session %s stays due: %s", due.session_id, exc)
                return
            except Exception:
                log.exception("review of session %s failed; it is dropped", due.session_id)
            try:
                await host.store.clear_review(host.bot, due.session_id, due.version)
            except StorageError as exc:
                log.warning("review of session %s ran but stays due: %s", due.session_id, exc)

    async def review(self, due: DueReview, live: SessionHandle | None = None) -> str:
        """Run one review of `due`'s session; returns the reviewer's last words."""
        host = self.host
        assert host is not None
        loaded = live is not None and live.history.loaded and live.system_prompt is not None
        session = live if loaded else await stored_session(host, due)
        if session is None:
            return ""
        counters, spent = self._counters_of(due.session_id), Usage()
        try:
            result = await run_review(host, self.settings, session, due.person_id,
                                      review_prompt(memory=due.memory, skill=due.skill), spent.add)
        finally:  # a review cut short spent its tokens too; they are the person's, as their turn's are
            counters.usage.add(spent)
            host.spawn(charge(host, due.person_id, spent), "usage-tokens")
        if result is None:
            return ""
        counters.reviews += 1
        counters.last_outcome = result.final_text.strip()[:200]
        log.info("review of session %s: %s (%s tool calls)", due.session_id, counters.last_outcome,
                 result.tool_calls)
        return result.final_text

    def _counters_of(self, session_id: int) -> _Counters:
        """The session's counters when it is live here (what `/status` shows); a throwaway otherwise, so a
        replica reviewing others' sessions keeps nothing for them."""
        assert self.host is not None
        if session_id in self.counters or self.host.session_by_id(session_id) is not None:
            return self.counters.setdefault(session_id, _Counters())
        return _Counters()

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        counters = self.counters.get(scope.session_id)
        if counters is None or not counters.reviews:
            return ["Background reviews: none yet"]
        u = counters.usage
        return [f"Background reviews: {counters.reviews}, {u.input_tokens} in / {u.output_tokens} out tokens "
                f"({u.cache_read_tokens} cache read)"]
