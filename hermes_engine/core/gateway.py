"""The gateway: routes inbound messages to sessions and runs at most one turn per session at a time.

Adapters call `Gateway.handle(msg)`; it records the event in the durable inbox (so a duplicate is ignored
and a message received before a crash is answered after restart), resolves the person, dispatches chat
commands, and queues turns on the session's worker. Many sessions run concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

from hermes_engine.compression.service import load_history, turn_context
from hermes_engine.agent.loop import AgentLoop, TurnResult
from hermes_engine.agent.prompt import PromptBuilder, SessionScope, load_images
from hermes_engine.core.commands import CommandContext, CommandRegistry
from hermes_engine.config import BotProfile, Settings
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.errors import HermesError, ProviderError
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.inbound import (ChatKind, InboundMessage, ReplyTarget, message_from_payload,
                                    message_to_payload)
from hermes_engine.ports.reply import BufferedStream, Outlet, ReplyStream
from hermes_engine.tools.registry import ToolContext, ToolRegistry
from hermes_engine.ports.storage import SessionRecord, Store

log = logging.getLogger(__name__)

TYPING_EVERY_SECONDS = 4.0


@dataclass
class TurnJob:
    message: InboundMessage
    person_id: int
    purpose: str = "turn"  # "turn" | "goal" | "command"
    replayed: bool = False  # re-run after a restart; the user message may already be stored
    done: asyncio.Future[TurnResult | None] | None = None
    recorded: asyncio.Future[bool] | None = None  # the inbox write under way; False: a duplicate

    async def is_new(self) -> bool:
        return True if self.recorded is None else await asyncio.shield(self.recorded)


class DuplicateEvent(Exception):
    """The inbox write found the event already recorded: the turn that started meanwhile is dropped."""


@dataclass
class SessionHandle:
    """A live session in this process: its record, frozen prompt, cached history and work queue."""

    key: str
    record: SessionRecord
    scope: SessionScope
    target: ReplyTarget
    history: list[Message] | None = None
    system_prompt: str | None = None
    queue: asyncio.Queue[TurnJob] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[Any] | None = None
    usage: Usage = field(default_factory=Usage)
    last_model: str | None = None


class Gateway:
    def __init__(self, *, settings: Settings, profile: BotProfile, store: Store,
                 chain_factory: Callable[[list[str]], Any], tools: ToolRegistry,
                 features: list[Feature] | None = None) -> None:
        self.settings = settings
        self.profile = profile
        self.bot = profile.name
        self.store = store
        self._chain_factory = chain_factory
        self._chains: dict[tuple[str, ...], Any] = {}
        self.features = list(features or [])
        self.tools = tools
        self.services: dict[str, Any] = {}
        contributors = []
        for feature in self.features:
            for t in feature.tools():
                self.tools.register(t)
            self.services.update(feature.services())
            contributors.extend(feature.contributors())
        self.tools = self.tools.select(profile.toolsets)
        self.prompts = PromptBuilder(profile.soul, self.tools, contributors)
        self.agent = AgentLoop(self.tools, max_iterations=profile.max_iterations,
                               max_output_tokens=profile.max_output_tokens)
        self.commands = CommandRegistry()
        from hermes_engine.core.builtin_commands import register_builtin_commands

        register_builtin_commands(self.commands)
        for feature in self.features:
            feature.register_commands(self.commands)
        self.outlets: dict[str, Outlet] = {}
        self.sessions: dict[str, SessionHandle] = {}
        self._session_lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._started = False
        self._stopping = False
        self._people: dict[tuple[str, str, str], int] = {}  # (platform, account, user id) → person

    # ----------------------------------------------------------------- lifecycle

    def attach(self, outlet: Outlet) -> None:
        self.outlets[outlet.platform] = outlet

    async def start(self) -> None:
        """Start features, then answer whatever was received but not answered before a restart."""
        if self._started:
            return
        self._started = True
        for feature in self.features:
            await feature.start(self)
        await self.replay_pending()

    async def replay_pending(self) -> None:
        for event in await self.store.pending_inbound():
            if event.platform not in self.outlets or event.payload.get("bot", self.bot) != self.bot:
                continue
            msg = message_from_payload(event.payload["message"])
            # Adapters start first, so an event taken live a moment ago is pending too; its replay waits
            # behind it in the session's queue and finds the answer stored and delivered (same key).
            log.info("answering pending %s event %s", event.platform, event.event_id)
            await self._accept(msg, replayed=True, purpose=event.payload.get("purpose", "turn"))

    async def stop(self) -> None:
        self._stopping = True  # turns cut short now stay in the inbox and are answered after restart
        for session in list(self.sessions.values()):
            for task in (session.turn, session.worker):
                if task is not None:
                    task.cancel()
        for task in list(self._background):
            task.cancel()
        tasks = [t for s in self.sessions.values() for t in (s.turn, s.worker) if t] + list(self._background)
        await asyncio.gather(*tasks, return_exceptions=True)
        for feature in self.features:
            await feature.stop()
        for chain in self._chains.values():
            await chain.aclose()

    # ----------------------------------------------------------------- inbound

    async def handle(self, msg: InboundMessage, *, purpose: str = "turn") -> bool:
        """Accept one inbound message. Returns False for a duplicate. Returns before the turn runs.

        `purpose="goal"` marks an engine-made goal continuation; it goes through the same durable inbox,
        so a restart neither loses nor repeats it."""
        payload = {"bot": self.bot, "message": message_to_payload(msg), "purpose": purpose}
        # The turn starts while the event is being recorded; nothing of it is stored, shown or done
        # (tools) before the record says the event is new. The caller hears back once it is durable.
        recorded = asyncio.ensure_future(self.store.record_inbound(msg.platform, msg.event_id, payload))
        try:
            await self._accept(msg, purpose=purpose, recorded=recorded)
        finally:
            new = await recorded
        if not new:
            log.info("duplicate %s event %s ignored", msg.platform, msg.event_id)
        return new

    async def _accept(self, msg: InboundMessage, replayed: bool = False, purpose: str = "turn",
                      recorded: asyncio.Future[bool] | None = None) -> None:
        person_id = await self.person_of(msg.platform, msg.account, msg.user_id, msg.user_name)
        session = await self.session_for(msg)
        command = self.commands.get(msg.command) if purpose == "turn" else None
        job = TurnJob(msg, person_id, "command" if command else purpose, replayed=replayed, recorded=recorded)
        if command is not None and command.immediate:  # answered at once, without holding up the caller
            self.spawn(self._run_command(session, job), f"command:{msg.command}")
            return
        await self.enqueue(session, job)

    async def person_of(self, platform: str, account: str, user_id: str, display_name: str = "") -> int:
        """The person behind a platform account (cached; `forget_people` after accounts are linked)."""
        key = (platform, account, user_id)
        person_id = self._people.get(key)
        if person_id is None:
            record = await self.store.resolve_account(platform, account, user_id, display_name)
            person_id = self._people[key] = record.person_id
        return person_id

    def forget_people(self) -> None:
        self._people.clear()

    async def enqueue(self, session: SessionHandle, job: TurnJob) -> None:
        session.queue.put_nowait(job)
        if session.worker is None or session.worker.done():
            session.worker = asyncio.create_task(self._work(session), name=f"session:{session.key}")

    async def session_for(self, msg: InboundMessage) -> SessionHandle:
        key = msg.session_key(self.profile.shared_sessions)
        async with self._session_lock:
            session = self.sessions.get(key)
            if session is None:
                record = await self.store.active_session(key, self.bot)
                session = self._handle_for(key, record, msg)
                self.sessions[key] = session
        return session

    def _handle_for(self, key: str, record: SessionRecord, msg: InboundMessage) -> SessionHandle:
        dm = msg.chat_kind is ChatKind.DM
        scope = SessionScope(bot=self.bot, session_id=record.id, session_key=key, chat_kind=msg.chat_kind.value,
                             person_id=None, shared_scope=None if dm else f"{msg.platform}:{msg.account}:{msg.chat_id}")
        target = ReplyTarget(msg.platform, msg.account, msg.chat_id, msg.thread_id)
        return SessionHandle(key=key, record=record, scope=scope, target=target)

    async def new_session(self, session: SessionHandle) -> SessionHandle:
        """`/new`: a fresh session for the same key, linked to the old one; prompts are frozen anew."""
        record = await self.store.new_session(session.key, self.bot, parent_id=session.record.id)
        session.record = record
        session.scope = SessionScope(**{**session.scope.__dict__, "session_id": record.id})
        session.history = None
        session.system_prompt = None
        session.usage = Usage()
        return session

    # ----------------------------------------------------------------- work

    async def _work(self, session: SessionHandle) -> None:
        while not session.queue.empty():
            job = session.queue.get_nowait()
            try:
                if job.recorded is not None and job.recorded.done() and not job.recorded.result():
                    result = None  # a duplicate, known by now: not even a model call
                elif job.purpose == "command":
                    await self._run_command(session, job)
                    result = None
                elif not await self._accepted(job):
                    await self.store.complete_inbound(job.message.platform, job.message.event_id)
                    result = None
                else:
                    session.turn = asyncio.create_task(self._run_turn(session, job))
                    try:
                        result = await session.turn
                    except asyncio.CancelledError:
                        if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                            raise  # the worker itself is being stopped
                        result = None
                    finally:
                        session.turn = None
                if job.done is not None and not job.done.done():
                    job.done.set_result(result)
            except asyncio.CancelledError:
                if job.done is not None and not job.done.done():
                    job.done.cancel()
                raise
            except Exception as exc:  # keep the worker alive for the next message
                log.exception("session %s: job failed", session.key)
                if job.done is not None and not job.done.done():
                    job.done.set_exception(exc)

    async def _accepted(self, job: TurnJob) -> bool:
        for feature in self.features:
            if not await feature.accept_turn(job.message, job.purpose):
                return False
        return True

    async def _run_command(self, session: SessionHandle, job: TurnJob) -> None:
        if not await job.is_new():
            return
        msg, person_id = job.message, job.person_id
        command = self.commands.get(msg.command)
        assert command is not None
        is_admin = msg.user_id in self.profile.access.admins
        outlet = self.outlets.get(msg.platform)
        try:
            if command.admin_only and not is_admin:
                text: str | None = "Only an admin of this bot can use that command."
            else:
                text = await command.handler(CommandContext(self, session, msg, person_id, msg.args, is_admin))
        except HermesError as exc:
            text = str(exc)
        if text and outlet is not None:
            await outlet.send(msg.reply_target(), text, idempotency_key=f"{msg.event_id}:command")
        await self.store.complete_inbound(msg.platform, msg.event_id)

    async def ensure_loaded(self, session: SessionHandle, person_id: int | None) -> None:
        """Load history and freeze the system prompt once per session (persisted, so a restart keeps it)."""
        if session.history is None:
            session.history = await load_history(self.store, session.record.id)  # compressed view, if any
            session.usage = await self.store.session_usage(session.record.id)
        if session.system_prompt is None:
            frozen = session.record.state.get("system_prompt")
            if frozen is None:
                scope = session.scope
                if scope.chat_kind == "dm":
                    scope = SessionScope(**{**scope.__dict__, "person_id": person_id})
                    session.scope = scope
                frozen = await self.prompts.system_prompt(scope)
                state = {**session.record.state, "system_prompt": frozen, "owner": person_id}
                await self.store.update_session(session.record.id, state=state)
                session.record = SessionRecord(**{**session.record.__dict__, "state": state})
            elif session.scope.chat_kind == "dm":
                session.scope = SessionScope(**{**session.scope.__dict__,
                                                "person_id": session.record.state.get("owner")})
            session.system_prompt = frozen

    def chain_for(self, session: SessionHandle) -> Any:
        models = self.profile.models(self.settings)
        if session.record.model:
            models = [session.record.model, *[m for m in models if m != session.record.model]]
        return self.chain(models)

    def chain(self, models: list[str]) -> Any:
        """The provider chain for these models, built once and shared by turns, judges and reviews."""
        key = tuple(models)
        if key not in self._chains:
            self._chains[key] = self._chain_factory(models)
        return self._chains[key]

    def tool_context(self, session: SessionHandle, person_id: int | None, *, in_review: bool = False) -> ToolContext:
        return ToolContext(bot=self.bot, session_id=session.record.id, session_key=session.key,
                           person_id=person_id, chat_kind=session.scope.chat_kind,
                           shared_scope=session.scope.shared_scope, services=self.services, in_review=in_review)

    async def _run_turn(self, session: SessionHandle, job: TurnJob) -> TurnResult | None:
        msg = job.message
        outlet = self.outlets.get(msg.platform)
        stream: ReplyStream = (outlet.open_stream(msg.reply_target(), idempotency_key=f"{msg.event_id}:reply")
                               if outlet is not None else BufferedStream())
        for feature in self.features:
            await feature.on_turn_start(session.scope)
        msg = await self._expand_command(msg)
        await self.ensure_loaded(session, job.person_id)
        assert session.history is not None and session.system_prompt is not None
        user: Message | None = await self.prompts.user_message(session.scope, msg, job.person_id,
                                                               images=load_images(msg))
        user = Message(**{**user.__dict__, "meta": {**user.meta, "event_id": msg.event_id}})
        if job.replayed and any(m.meta.get("event_id") == msg.event_id for m in session.history[-50:]):
            user = None  # stored before the crash: continue from there instead of saying it twice
            answered = _stored_answer(session.history, msg.event_id)
            if answered is not None:  # the answer was stored but never delivered: deliver it, once
                await stream.finish(answered)
                await self.store.complete_inbound(msg.platform, msg.event_id)
                return None

        journal = Journal()

        async def ensure_new() -> None:
            if not await job.is_new():
                raise DuplicateEvent(msg.event_id)

        async def store_message(message: Message, usage: Usage | None, model: str | None) -> None:
            await ensure_new()
            await self.store.append_message(session.record.id, message, usage=usage, model=model,
                                            person_id=job.person_id if message.role == "user" else None)

        async def persist(message: Message, usage: Usage | None, model: str | None) -> None:
            if message.role != "user":
                await ensure_new()  # the user message is written behind; anything after it waits here
            journal.write(lambda: store_message(message, usage, model))
            if usage is not None:
                session.usage.add(usage)
            if model:
                session.last_model = model

        typing = asyncio.create_task(self._keep_typing(outlet, msg.reply_target())) if outlet else None

        async def push(delta: str) -> None:
            await ensure_new()
            await stream.push(delta)

        on_delta = push if self.profile.streaming else None
        failed = interrupted = undelivered = duplicate = False
        result: TurnResult | None = None
        try:
            context = await turn_context(self, session, msg)  # compression: hygiene now, then before each call
            result = await self.agent.run(
                router=self.chain_for(session).route(), system=session.system_prompt, history=session.history,
                user=user, ctx=self.tool_context(session, job.person_id), persist=persist, on_delta=on_delta,
                purpose=job.purpose, context=context)
            await _stop(typing)
            await journal.flush()  # the answer is stored before anyone sees it: a restart never repeats it
            try:
                await stream.finish(result.final_text)
            except Exception:
                undelivered = True  # stays in the inbox: the stored answer is delivered after a restart
                raise
        except DuplicateEvent:
            duplicate = True
            await _stop(typing)
            session.history = None  # drop what this turn added in memory; the store has none of it
            return None
        except asyncio.CancelledError:
            interrupted = True
            await _stop(typing)
            await asyncio.shield(journal.flush())
            await asyncio.shield(stream.abort(None if self._stopping else "Stopped."))
            raise
        except HermesError as exc:  # provider failures and model misbehaviour: one clear sentence
            failed = True
            await _stop(typing)
            if not await job.is_new():
                duplicate = True
                return None
            await journal.flush()
            log.warning("session %s: turn failed: %s", session.key, exc)
            if isinstance(exc, ProviderError):
                text = f"⚠️ The model is not reachable right now ({_short(exc)}). Please try again shortly."
            else:
                text = f"⚠️ Something went wrong with this answer ({_short(exc)}). Please try again."
            await stream.finish(text)
        finally:
            if not (interrupted and self._stopping) and not undelivered and not duplicate:
                await asyncio.shield(self.store.complete_inbound(msg.platform, msg.event_id))
            if not interrupted and not duplicate:
                outcome = TurnOutcome(
                    scope=session.scope, person_id=job.person_id,
                    new_messages=list(result.new_messages) if result else [],
                    tool_calls=result.tool_calls if result else 0,
                    tool_iterations=result.tool_iterations if result else 0,
                    usage=result.usage if result else Usage(), final_text=result.final_text if result else "",
                    failed=failed, purpose=job.purpose)
                for feature in self.features:
                    try:
                        await feature.on_turn_end(outcome)
                    except Exception:
                        log.exception("feature %s failed after a turn", feature.name)
        return result

    async def _expand_command(self, msg: InboundMessage) -> InboundMessage:
        """An unregistered `/name args` that a feature knows (a skill) becomes the text it stands for."""
        if msg.command is None or msg.synthetic:
            return msg
        for feature in self.features:
            text = await feature.expand_command(msg.command, msg.args, self.bot)
            if text:
                return replace(msg, text=text, command=None, args="")
        return msg

    async def _keep_typing(self, outlet: Outlet, target: ReplyTarget) -> None:
        while True:
            with contextlib.suppress(Exception):
                await outlet.typing(target)
            await asyncio.sleep(TYPING_EVERY_SECONDS)

    async def interrupt(self, session: SessionHandle) -> bool:
        """Cancel the turn in flight (if any). Queued messages stay queued."""
        task = session.turn
        if task is None or task.done():
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait({task}, timeout=10)
        return True

    @property
    def busy(self) -> bool:
        """Work is queued or running: a turn, a command, a goal's judge or next turn, a review."""
        return bool(self._background) or any((s.worker is not None and not s.worker.done()) or not s.queue.empty()
                                             for s in self.sessions.values())

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """Run background work owned by the gateway (cancelled on stop)."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task


def _stored_answer(history: list[Message], event_id: str) -> str | None:
    """The final answer stored for the user message of `event_id`, if the turn got that far."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user" and history[index].meta.get("event_id") == event_id:
            after = history[index + 1:]
            if after and after[-1].role == "assistant" and not after[-1].tool_calls:
                return after[-1].content
            return None
    return None


class Journal:
    """Ordered write-behind for one turn's messages.

    Each write starts at once and lands after the one before it, while the turn goes on: the user message
    is stored during the model call, a tool call during its tools. `flush` waits for all of them; the
    gateway flushes before the final answer is shown, so a crash loses at most the step in flight and a
    delivered answer is always stored."""

    def __init__(self) -> None:
        self._last: asyncio.Task[Any] | None = None

    def write(self, operation: Callable[[], Awaitable[Any]]) -> None:
        previous = self._last

        async def in_order() -> None:
            if previous is not None:
                await previous
            await operation()

        self._last = asyncio.ensure_future(in_order())

    async def flush(self) -> None:
        if self._last is not None:
            await self._last


async def _stop(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
