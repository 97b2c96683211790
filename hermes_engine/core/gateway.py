"""The gateway: routes inbound messages to sessions and runs at most one turn per session at a time.

Adapters call `handle(msg)` (the `EnginePort`); it records the event in the durable inbox (a duplicate is
ignored, a message received before a crash answered after restart), resolves the person, dispatches chat
commands and queues turns on the session's lane (many sessions run concurrently; the turn is the `TurnRunner`'s;
features see the gateway as their `Host`). While the store cannot write, no message is taken: told once per chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from hermes_engine.agent.loop import AgentLoop, TurnResult
from hermes_engine.agent.prompt import PromptBuilder
from hermes_engine.config import BotProfile, Settings
from hermes_engine.core.access_notices import chat_access, chat_presence, replies_to, teller
from hermes_engine.core.builtin_commands import register_builtin_commands
from hermes_engine.core.jobs import Lane, TurnJob
from hermes_engine.core.lane_work import LaneWork
from hermes_engine.core.leases import Leases
from hermes_engine.core.pending import PendingEvents
from hermes_engine.core.people_cache import PeopleCache
from hermes_engine.core.scheduler import JobFunc, Scheduler
from hermes_engine.core.session_load import ensure_loaded
from hermes_engine.core.sessions import SessionTable, new_handle, unload
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.core.turn import TurnRunner
from hermes_engine.errors import HermesError, StorageError
from hermes_engine.holders import process_holder
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.untrusted import has_read_untrusted, sends_files
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.engine import AccessDecision, CommandInfo
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.history import HistoryView
from hermes_engine.ports.inbound import InboundMessage, LastInbound, ReplyTarget, message_to_payload
from hermes_engine.ports.leases import session_lease
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.prompt import PromptContributor
from hermes_engine.ports.reply import ChatPresence, Outlet
from hermes_engine.ports.services import Services
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import SessionRecord, Store
from hermes_engine.ports.tools import ToolContext
from hermes_engine.providers.chain import ProviderChain
from hermes_engine.secrets import redact
from hermes_engine.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class Gateway:
    """One bot profile's engine: implements the `Host` features see and the `EnginePort` adapters call."""

    def __init__(self, *, settings: Settings, profile: BotProfile, store: Store,
                 chain_factory: Callable[[Sequence[str]], ProviderChain], tools: ToolRegistry,
                 access: AccessGate, history_view: HistoryView, features: list[Feature] | None = None,
                 storage_health: StorageHealth | None = None, metrics: Metrics = NO_METRICS) -> None:
        self.settings, self.history_view, self.metrics = settings, history_view, metrics
        self.profile = profile
        self.bot = profile.name
        self.store = store
        self.storage_health = storage_health or StorageHealth(store)
        self.access = access
        self._chain_factory = chain_factory
        self._chains: dict[tuple[str, ...], ProviderChain] = {}
        self.features = list(features or [])
        self.services = Services()
        contributors: list[PromptContributor] = []
        for feature in self.features:
            for t in feature.tools():
                tools.register(t)
            self.services = self.services.joined(feature.services())
            contributors.extend(feature.contributors())
        self.tools = tools.select(profile.toolsets)
        self.prompts = PromptBuilder(profile.soul, self.tools, contributors)
        self.agent = AgentLoop(self.tools, max_iterations=profile.max_iterations,
                               max_output_tokens=profile.max_output_tokens)
        self.commands = CommandRegistry()
        register_builtin_commands(self.commands, self, self.features)
        for feature in self.features:
            feature.register_commands(self.commands)
        self.outlets: dict[str, Outlet] = {}
        self.leases = Leases(store, ttl_seconds=settings.session_lease_seconds,
                             holder=process_holder(settings.replica_id))
        self.pending = PendingEvents(store, self.bot, self.outlets, self.session_key)
        self.lanes = LaneWork(self)
        self.scheduler = Scheduler(store, metrics=metrics)  # the features' periodic jobs (`schedule`)
        self.commands_running: set[tuple[str, str]] = set()  # immediate commands under way here
        self.sessions = SessionTable(settings.max_live_sessions)
        self._lanes: dict[str, Lane] = {}
        self._letting_go: dict[str, asyncio.Task[None]] = {}  # evicted lanes' workers giving their lease back
        self._background: set[asyncio.Task[Any]] = set()
        self._watchers: set[asyncio.Task[Any]] = set()  # long-lived: pairing approvals per platform
        self._started = False
        self._stopping = self.winding_down = False  # see `finish_turns` and `stop`
        self.people = PeopleCache(store, settings.max_live_sessions)
        self.turns = TurnRunner(host=self, store=store, prompts=self.prompts, agent=self.agent,
                                features=self.features, streaming=profile.streaming, outlet_for=self.outlets.get,
                                stopping=self._leaving, storage_health=self.storage_health, metrics=metrics)

    # ----------------------------------------------------------------- lifecycle

    def attach(self, outlet: Outlet) -> None:
        self.outlets[outlet.platform] = outlet

    async def start(self) -> None:
        """Start features, then answer whatever was received but not answered before a restart."""
        if self._started:
            return
        self._started = True
        await self.scheduler.start()
        for feature in self.features:
            await feature.start(self)
        watched = self.outlets if self.profile.access.pairing else {}
        self._watchers.update(asyncio.create_task(self._watch_approvals(p), name=f"pairing:{p}") for p in watched)
        self.storage_health.when_recovered(lambda: self.replay_pending(forced=True))  # paused by an outage
        await self.replay_pending(forced=True)
        self._watchers.add(asyncio.create_task(self._take_over(), name="inbox-takeover"))

    async def replay_pending(self, *, forced: bool = False) -> None:
        """Wake every session with events received but not answered that no lane here is busy with; its
        lane answers them unless another live replica holds the session (then that one does). Adapters
        start first, so an event taken live a moment ago is pending too: the lane answers it once."""
        if self.winding_down:
            return
        for key, events in (await self.pending.by_session(forced=forced)).items():
            lane = self._lanes.get(key)
            if lane is not None and lane.busy:
                continue
            event, msg = events[0]
            if forced:
                for other, _ in events:
                    self.pending.forget(other.platform, other.event_id)
            log.info("answering pending %s event %s", event.platform, event.event_id)
            await self._accept(msg, replayed=True, purpose=event.payload.get("purpose", "turn"))

    async def _take_over(self) -> None:
        """Every third of a lease: events of sessions whose replica died (their lease expired) are taken."""
        while True:
            await asyncio.sleep(self.leases.renew_every)
            try:
                await self.replay_pending()
            except Exception as exc:  # noqa: BLE001 - the store may be down; the next round tries again
                log.warning("could not look for pending events to take over: %s", exc)

    def _leaving(self, session_key: str) -> bool:
        """A turn cut short now is left in the inbox for whoever answers next: this replica after a restart,
        or the one that took the session's lease over."""
        return self._stopping or self.leases.lost(session_lease(self.bot, session_key))

    async def finish_turns(self, seconds: float) -> None:
        """Give the turns running now up to `seconds` to finish, so a rolling restart does not cut a reply in
        half; `stop` cuts whatever still runs then. From now on no turn begins here: a message that comes, or
        waits in a session's queue, is kept in the inbox for whoever answers next. Immediate commands still
        run (a `/stop` is honoured: its turn ends as stopped, not kept to be answered after the restart)."""
        self.winding_down = True
        for lane in self._lanes.values():
            lane.wake()  # a lane waiting for its session's next message gives its lease back now
        workers = [lane.worker for lane in self._lanes.values() if lane.worker and not lane.worker.done()]
        workers += [t for t in self._background if t.get_name().startswith("command:")]  # a /stop under way
        if workers and seconds > 0:
            await asyncio.wait(workers, timeout=seconds)

    async def stop(self) -> None:
        self._stopping = self.winding_down = True  # turns cut short now stay in the inbox for the next start
        tasks = [t for lane in self._lanes.values() for t in (lane.turn, lane.worker) if t]
        tasks += [*self._background, *self._watchers]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.scheduler.stop()
        for feature in self.features:
            await feature.stop()
        for chain in self._chains.values():
            await chain.aclose()

    def schedule(self, name: str, every_seconds: float, job: JobFunc) -> None:
        self.scheduler.every(name, every_seconds, job)

    # ----------------------------------------------------------------- the engine port (adapters)

    async def handle(self, msg: InboundMessage, *, purpose: str = "turn") -> bool:
        """Accept one inbound message. Returns False for a duplicate. Returns before the turn runs.
        Raises `StorageError` when the message cannot be recorded (the store cannot write): nothing of it
        runs then, and the person is told once per chat.

        `purpose="goal"` marks an engine-made goal continuation; it goes through the same durable inbox,
        so a restart neither loses nor repeats it."""
        try:
            await self.storage_health.ensure_ready()
            return await self._record(msg, purpose)
        except StorageError as exc:
            await self.turns.tell_paused(msg, exc)
            raise

    async def _record(self, msg: InboundMessage, purpose: str) -> bool:
        payload = {"bot": self.bot, "message": message_to_payload(msg), "purpose": purpose}
        record = self.store.record_inbound(msg.platform, msg.event_id, payload, session_key=self.session_key(msg))
        if self._stopping:  # kept for whoever answers next: this replica after its restart, or another one
            return await record
        # The turn starts while the event is being recorded; nothing of it is stored, shown or done
        # (tools) before the record says the event is new. The caller hears back once it is durable.
        recorded = asyncio.ensure_future(record)
        try:
            await self._accept(msg, purpose=purpose, recorded=recorded)
        finally:
            new = await recorded
        if not new:
            log.debug("duplicate %s event %s ignored", msg.platform, msg.event_id)
        return new

    def command_menu(self) -> list[CommandInfo]:
        return [CommandInfo(c.name, c.summary, c.admin_only) for c in self.commands.listing()]

    def knows_command(self, name: str) -> bool:
        return self.commands.get(name) is not None

    async def admit(self, platform: str, user_id: str, *, user_name: str = "", chat_id: str | None = None,
                    direct: bool, is_bot: bool = False, also_allowed: Collection[str] = (),
                    membership_boundary: bool = False) -> AccessDecision:
        return await self.access.admit(platform, user_id, user_name=user_name, chat_id=chat_id, direct=direct,
                                       is_bot=is_bot, also_allowed=also_allowed,
                                       membership_boundary=membership_boundary, tell=teller(self.outlets, platform))

    def session_key(self, msg: InboundMessage) -> str:
        return msg.session_key(self.profile.shared_sessions)

    async def goal_thread(self, platform: str, account: str, chat_id: str) -> str | None:
        prefix = f"{platform}:{account}:thread:{chat_id}:"
        goals = [g for g in await self.store.list_goals(bot=self.bot) if g.session_key.startswith(prefix)]
        newest = max(goals, key=lambda g: g.id, default=None)
        return newest.session_key[len(prefix):] if newest else None

    async def last_inbound(self, platform: str, account: str, *, since: datetime, limit: int) -> list[LastInbound]:
        return await self.store.last_inbound(platform, account, since=since, limit=limit)

    # ----------------------------------------------------------------- the host (features, loops, commands)

    async def notify(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> bool:
        if (outlet := self.outlets.get(target.platform)) is None:
            return False
        await outlet.send(target, text, idempotency_key=idempotency_key)
        return True

    def chain_for(self, session: SessionHandle) -> ProviderChain:
        models = self.profile.models(self.settings)
        if session.record.model:
            models = [session.record.model, *[m for m in models if m != session.record.model]]
        return self.chain(models)

    def chain(self, models: Sequence[str]) -> ProviderChain:
        """The provider chain for these models, built once and shared by turns, judges and reviews."""
        if (key := tuple(models)) not in self._chains:
            self._chains[key] = self._chain_factory(list(models))
        return self._chains[key]

    def tool_context(self, session: SessionHandle, person_id: int | None, *, in_review: bool = False,
                     is_admin: bool = False, message: InboundMessage | None = None) -> ToolContext:
        # A goal continuation (synthetic) acts for the person who set the goal, with that person's access.
        untrusted = has_read_untrusted(session.history.view()) or (message is not None and sends_files(message))
        return ToolContext(bot=self.bot, session_id=session.record.id, session_key=session.key,
                           person_id=person_id, chat_kind=session.scope.chat_kind,
                           shared_scope=session.scope.shared_scope, services=self.services, in_review=in_review,
                           is_admin=is_admin, untrusted=untrusted,
                           user_id=message.user_id if message is not None else None,
                           unattended=message is not None and message.synthetic,
                           target=message.reply_target() if message is not None else None)

    def is_admin(self, msg: InboundMessage) -> bool:
        return self.access.is_admin(msg)

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        return self.access.listed(user_id) or await asyncio.to_thread(self.access.granted, platform, user_id)

    async def may_write(self, target: ReplyTarget, user_id: str, *, direct: bool) -> bool:
        return await self.access.may_write(target.platform, user_id, chat_access(self.outlets, target, direct=direct))

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        return await chat_presence(self.outlets, target, writer=writer)

    async def replies_to(self, target: ReplyTarget, idempotency_key: str) -> tuple[ReplyTarget, ...]:
        return await replies_to(self.outlets, target, idempotency_key)

    def session(self, key: str) -> SessionHandle | None:
        return self.sessions.get(key)

    def session_by_id(self, session_id: int) -> SessionHandle | None:
        return next((s for s in self.sessions.values() if s.record.id == session_id), None)

    async def ensure_loaded(self, session: SessionHandle, person_id: int | None) -> None:
        await ensure_loaded(session, person_id, store=self.store, prompts=self.prompts, tools=self.tools,
                            features=self.features, view=self.history_view)

    async def new_session(self, session: SessionHandle) -> SessionHandle:
        """`/new`: a fresh session for the same key, linked to the old one; prompts are frozen anew."""
        record = await self.store.new_session(session.key, self.bot, parent_id=session.record.id)
        self.adopt(session, record)
        return session

    def drop_session(self, key: str) -> None:
        if (session := self.sessions.get(key)) is not None:
            unload(session)

    def adopt(self, session: SessionHandle, record: SessionRecord) -> None:
        """The key's session is now `record`: prompts are frozen anew."""
        self._evicted(session)  # what features keep for the old session goes with it
        session.record = record
        session.scope = replace(session.scope, session_id=record.id)
        unload(session)

    async def interrupt(self, session: SessionHandle) -> bool:
        """Cancel the turn in flight (if any). Queued messages stay queued."""
        task = lane.turn if (lane := self._lanes.get(session.key)) is not None else None
        if task is None or task.done():
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait({task}, timeout=10)
        return True

    def forget_people(self) -> None:
        self.people.clear()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run background work owned by the gateway (cancelled on stop)."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    @property
    def holding(self) -> bool:
        """A lane here holds its session's lease: running, or waiting for the session's next message."""
        return any(lane.active for lane in self._lanes.values())

    @property
    def busy(self) -> bool:
        """Work is queued or running: a turn, a command, a goal's judge or next turn, a review."""
        return bool(self._background) or any(lane.busy for lane in self._lanes.values())

    # ----------------------------------------------------------------- routing

    async def _accept(self, msg: InboundMessage, replayed: bool = False, purpose: str = "turn",
                      recorded: asyncio.Future[bool] | None = None) -> None:
        person_id = await self.person_of(msg.platform, msg.account, msg.user_id, msg.user_name)
        session = await self.session_for(msg)
        job = self.job_for(msg, person_id, purpose, replayed=replayed, recorded=recorded)
        if not msg.synthetic and not replayed:
            for feature in self.features:
                feature.on_message(session.key, msg)
        command = self.commands.get(msg.command) if job.purpose == "command" else None
        if command is not None and command.immediate and not replayed:  # at once, not holding up the caller
            self.spawn(self._run_command(session, job), f"command:{msg.command}")
            return
        self.enqueue(session, job)

    def job_for(self, msg: InboundMessage, person_id: int, purpose: str, *, replayed: bool,
                 recorded: asyncio.Future[bool] | None = None) -> TurnJob:
        command = self.commands.get(msg.command) if purpose == "turn" else None
        return TurnJob(msg, person_id, "command" if command else purpose, replayed=replayed, recorded=recorded)

    async def person_of(self, platform: str, account: str, user_id: str, display_name: str = "") -> int:
        return await self.people.person_of(platform, account, user_id, display_name)

    def enqueue(self, session: SessionHandle, job: TurnJob) -> None:
        lane = self._lanes.setdefault(session.key, Lane(left=lambda: self.metrics.turns_pending(self.bot, -1)))
        lane.put(job)
        self.metrics.turns_pending(self.bot, 1)
        if lane.worker is None or lane.worker.done():
            after = self._letting_go.pop(session.key, None)
            lane.worker = asyncio.create_task(self.lanes.work(session, lane, after), name=f"session:{session.key}")

    async def session_for(self, msg: InboundMessage) -> SessionHandle:
        key = self.session_key(msg)
        return self.sessions.use(key) or await self.sessions.load(key, lambda: self._load_session(key, msg))

    async def _load_session(self, key: str, msg: InboundMessage) -> SessionHandle:
        session = new_handle(self.bot, key, await self.store.active_session(key, self.bot), msg)
        for idle in self.sessions.add(session, busy=lambda k: k in self._lanes and self._lanes[k].busy):
            lane = self._lanes.pop(idle.key, None)
            if lane is not None and lane.active:  # waiting for its next message: it gives the lease back now
                assert lane.worker is not None
                lane.worker.cancel()
                self._letting_go[idle.key] = lane.worker
                lane.worker.add_done_callback(functools.partial(self._let_go, idle.key))
            self._evicted(idle)
        return session

    def _let_go(self, key: str, worker: asyncio.Task[None]) -> None:
        if self._letting_go.get(key) is worker:
            del self._letting_go[key]

    def _evicted(self, session: SessionHandle) -> None:
        for feature in self.features:
            try:
                feature.on_session_evicted(session.scope)
            except Exception:
                log.exception("feature %s failed to drop session %s", feature.name, session.key)

    async def run_job(self, session: SessionHandle, lane: Lane, job: TurnJob) -> TurnResult | None:
        if job.known_duplicate():
            return None
        if job.purpose == "command":
            await self._run_command(session, job)
            return None
        if not await self._accepted(job):
            await self.store.complete_inbound(job.message.platform, job.message.event_id)
            return None
        turn = lane.turn = asyncio.create_task(self.turns.run(session, job))
        try:
            return await turn
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the worker itself is being stopped
            return None  # only the turn was interrupted (/stop)
        finally:
            lane.turn = None

    async def _accepted(self, job: TurnJob) -> bool:
        for feature in self.features:
            if not await feature.accept_turn(job.message, job.purpose):
                return False
        return True

    async def _run_command(self, session: SessionHandle, job: TurnJob) -> None:
        """A command runs once: under its own lease, as an immediate one runs beside the session's turns
        (and so outside the session's lease) while another replica may be taking its event over."""
        if not await job.is_new():
            return
        key = (job.message.platform, job.message.event_id)
        self.commands_running.add(key)
        try:
            async with self.leases.held(f"command:{self.bot}:{key[0]}:{key[1]}") as ours:
                if ours:
                    await self._command(session, job)
        finally:
            self.commands_running.discard(key)

    async def _command(self, session: SessionHandle, job: TurnJob) -> None:
        msg, person_id = job.message, job.person_id
        command = self.commands.get(msg.command)
        assert command is not None
        is_admin = self.is_admin(msg)
        try:
            if command.admin_only and not is_admin:
                text: str | None = "Only an admin of this bot can use that command."
            else:
                text = await command.handler(CommandContext(self, session, msg, person_id, msg.args, is_admin))
        except HermesError as exc:
            text = str(exc)
        if text:  # error text quotes URLs and headers: no secret reaches the person
            await self.notify(msg.reply_target(), redact(text), idempotency_key=f"{msg.event_id}:command")
        await self.store.complete_inbound(msg.platform, msg.event_id)

    async def _watch_approvals(self, platform: str) -> None:
        tell = teller(self.outlets, platform)
        if tell is not None:
            await self.access.watch_approvals(platform, tell)
