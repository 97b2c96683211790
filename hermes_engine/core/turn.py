"""One agent turn as a pipeline of named phases: prepare → load or replay → run → deliver → complete → hooks.

Each phase is a small method; crash replay is a phase, not a special case in the others. The guarantees
the phases keep together:
- nothing of a turn is stored, shown or run (tools) before the inbox says its event is new, so a
  duplicate costs at most a model call and leaves no trace;
- every step is written behind, in order, while the turn goes on, and the journal is flushed before the
  final answer is shown: a delivered answer is always stored, and a restart never repeats it;
- after a crash, an answer that was stored but not delivered is delivered once, without a model call,
  and a turn cut short goes on from what it stored, however long it was: the model sees every stored tool
  result, and a tool call whose result is stored is not run again;
- a file the person sent is fetched in the prepare phase, after its message was recorded, so a crash in the
  middle of a download loses nothing: the replay fetches again what was not fetched;
- a write that fails because the store cannot write stops the turn at once (a model call in flight
  included); the person hears it once per chat, and no turn starts until the store writes again
  (`StorageHealth`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hermes_engine.agent.long_answers import answer_text
from hermes_engine.agent.loop import AgentLoop, TurnResult
from hermes_engine.agent.prompt import PromptBuilder, load_images
from hermes_engine.attachments.voice import UNHEARD, VOICE_NOTES
from hermes_engine.core.fetching import fetch_pending
from hermes_engine.core.jobs import TurnJob
from hermes_engine.core.journal import Journal
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.core.turn_metrics import FirstRequestRouter, first_request_reporter, report_turn
from hermes_engine.errors import HermesError, ProviderError, StorageError
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.fetching import FetchesAttachments
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import InboundMessage, ReplyTarget
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.models import CallHook
from hermes_engine.ports.reply import BufferedStream, Outlet, ReplyStream
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import Inbox, NewMessage, SessionStore
from hermes_engine.providers.continuation import is_cut
from hermes_engine.secrets import redact

log = logging.getLogger(__name__)

TYPING_EVERY_SECONDS = 4.0
BROKEN = ("⚠️ Something went wrong on my side with this message. Please try again; if it keeps happening, "
          "tell the bot's admin.")


class DuplicateEvent(Exception):
    """The inbox write found the event already recorded: the turn that started meanwhile is dropped."""


class TurnStore(SessionStore, Inbox, Protocol):
    """What a turn writes: its messages and the completion of its inbox event."""


@dataclass
class Turn:
    """The state of one turn in flight."""

    session: SessionHandle
    job: TurnJob
    message: InboundMessage
    stream: ReplyStream
    outlet: Outlet | None
    user: Message | None = None
    journal: Journal[NewMessage] = field(default_factory=Journal)
    result: TurnResult | None = None
    failed: bool = False
    interrupted: bool = False
    undelivered: bool = False
    duplicate: bool = False
    paused: bool = False  # the store could not write: stopped, the event left to be taken again
    error_kind: str | None = None  # for metrics: provider, model, delivery or internal
    started: float = field(default_factory=time.monotonic)


class TurnRunner:
    def __init__(self, *, host: Host, store: TurnStore, prompts: PromptBuilder, agent: AgentLoop,
                 features: Sequence[Feature], streaming: bool, outlet_for: Callable[[str], Outlet | None],
                 stopping: Callable[[str], bool], storage_health: StorageHealth,
                 metrics: Metrics = NO_METRICS) -> None:
        self.host = host
        self.metrics = metrics
        self.store = store
        self.storage_health = storage_health
        self.prompts = prompts
        self.agent = agent
        self.features = features
        self.streaming = streaming
        self.outlet_for = outlet_for
        self.stopping = stopping

    async def run(self, session: SessionHandle, job: TurnJob) -> TurnResult | None:
        try:
            await self.storage_health.ensure_ready()  # no turn, so no model call, while nothing can be stored
            turn = await self.prepare(session, job)
            if await self.replay(turn):
                return None
        except StorageError as exc:
            await self.tell_paused(job.message, exc)
            return None
        except Exception:
            await self.tell_broken(job)
            raise
        typing = asyncio.create_task(self._keep_typing(turn.outlet, job.message.reply_target())) \
            if turn.outlet else None
        try:
            await self._run_agent_until_a_write_fails(turn)
            await _stop(typing)
            await self.deliver(turn)
        except DuplicateEvent:
            turn.duplicate = True
            await _stop(typing)
            session.history.drop()  # what this turn added in memory goes; the store has none of it
        except StorageError as exc:
            await _stop(typing)
            await self.pause(turn, exc)
        except asyncio.CancelledError:
            turn.interrupted = True
            await _stop(typing)
            await asyncio.shield(turn.journal.settle())
            await asyncio.shield(turn.stream.abort(None if self.stopping(session.key) else "Stopped."))
            raise
        except HermesError as exc:
            await _stop(typing)
            await self.fail(turn, exc)
        except Exception:
            turn.error_kind = "internal"
            await _stop(typing)
            with contextlib.suppress(Exception):
                await turn.journal.flush()
            # What broke this turn may be in what it added to the history in memory (text the model's API
            # cannot take): the next turn reads the stored history again, which the store keeps valid.
            session.history.drop()
            with contextlib.suppress(Exception):
                await turn.stream.finish(BROKEN)
            raise
        finally:
            await self.complete(turn)
            await self.hooks(turn)
        return turn.result

    # ----------------------------------------------------------------- phases

    async def prepare(self, session: SessionHandle, job: TurnJob) -> Turn:
        """Open the reply, tell features a turn starts, load the session and build the user message."""
        msg, started = job.message, time.monotonic()
        outlet = self.outlet_for(msg.platform)
        stream: ReplyStream = (outlet.open_stream(msg.reply_target(), idempotency_key=f"{msg.event_id}:reply")
                               if outlet is not None else BufferedStream())
        for feature in self.features:
            await feature.on_turn_start(session.scope)
        msg = await self._expand_command(msg)
        await self.host.ensure_loaded(session, job.person_id)
        msg = await self._fetch(session, msg, outlet)
        msg = await self._hear(session, msg)
        images = await asyncio.to_thread(load_images, msg)  # up to megabytes from disk: off the loop
        user = await self.prompts.user_message(session.scope, msg, job.person_id, images=images)
        user = Message(**{**user.__dict__, "meta": {**user.meta, "event_id": msg.event_id}})
        return Turn(session, job, msg, stream, outlet, user, started=started)

    async def replay(self, turn: Turn) -> bool:
        """After a crash: a user message already stored is not said twice (wherever it is in the history:
        a long turn stores many messages after it, and compression keeps the whole current turn in view),
        the turn goes on from what it stored (a call cut short gets an "interrupted" result,
        `repair_history`), and an answer already stored is delivered (once) instead of generated again.
        True when the turn is thereby done."""
        history = turn.session.history.view()
        event_id = turn.message.event_id
        # Not only a replay here: another replica may have begun this event's turn before it died.
        if not any(m.meta.get("event_id") == event_id for m in reversed(history)):
            return False
        turn.user = None  # stored before the crash: continue from there
        answered = _stored_answer(history, event_id)
        if answered is None:
            return False
        await turn.stream.finish(answered)
        await self._complete(turn.job, turn.session.key)
        return True

    async def _complete(self, job: TurnJob, session_key: str) -> None:
        """Mark the event answered; the session's events still pending come back in the same round trip,
        for the lane to answer next."""
        msg = job.message
        job.pending_after = await asyncio.shield(
            self.store.complete_and_pending(msg.platform, msg.event_id, session_key=session_key))

    async def run_agent(self, turn: Turn) -> None:
        session, job = turn.session, turn.job
        assert session.history.loaded and session.system_prompt is not None

        async def ensure_new() -> None:
            if not await job.is_new():
                raise DuplicateEvent(turn.message.event_id)

        async def store_steps(steps: Sequence[NewMessage]) -> None:
            await ensure_new()
            ids = await self.store.append_messages(session.record.id, steps)
            session.seen_message_id = ids[-1]  # what this replica wrote last: no need to read it back

        turn.journal.store = store_steps

        async def persist(message: Message, usage: Usage | None, model: str | None) -> None:
            user = message.role == "user"
            if not user:
                await ensure_new()  # the user message is written behind; anything after it waits here
            # The user message goes with the turn's next step (for a plain turn its answer): one write.
            turn.journal.write(NewMessage(message, job.person_id if user else None, usage, model), hold=user)
            if usage is not None:
                session.usage.add(usage)
            if model:
                session.last_model = model

        async def push(delta: str) -> None:
            await ensure_new()
            await turn.stream.push(delta)

        hook = await self._call_hook(session, turn.message)
        ctx = self.host.tool_context(session, job.person_id, is_admin=self.host.is_admin(job.message),
                                     message=turn.message)
        ctx.progress = push if self.streaming else None
        router = FirstRequestRouter(self.host.chain_for(session).route(),
                                    first_request_reporter(self.metrics, self.host.bot, turn.message,
                                                           replayed=job.replayed))
        turn.result = await self.agent.run(
            router=router, system=session.system_prompt, history=session.history,
            user=turn.user, ctx=ctx, persist=persist,
            on_delta=push if self.streaming else None, on_restart=turn.stream.rewind if self.streaming else None,
            tools=session.tools,
            purpose=job.purpose, context=hook)

    async def _run_agent_until_a_write_fails(self, turn: Turn) -> None:
        """Run the agent; the first write that fails stops it at once, a model call in flight included,
        and its error is raised in place of the agent's."""
        agent = asyncio.ensure_future(self.run_agent(turn))
        turn.journal.on_failure = lambda _exc: agent.cancel()
        try:
            await agent
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if turn.journal.failure is None or (current is not None and current.cancelling()):
                raise
            raise turn.journal.failure from None

    async def deliver(self, turn: Turn) -> None:
        assert turn.result is not None
        await turn.journal.flush()  # the answer is stored before anyone sees it: a restart never repeats it
        try:
            await turn.stream.finish(turn.result.final_text)
        except Exception:
            turn.undelivered = True
            turn.error_kind = "delivery"  # stays in the inbox: the stored answer is delivered after a restart
            raise

    async def tell_broken(self, job: TurnJob) -> None:
        """A fault of this program before the turn could start: the person hears so once (a replay after a
        restart says it again under the same key, not twice), and the message is marked answered, so it is not
        run again into the same fault."""
        msg = job.message
        self.metrics.error(self.host.bot, "internal")
        with contextlib.suppress(Exception):
            await self.host.notify(msg.reply_target(), BROKEN, idempotency_key=f"{msg.event_id}:broken")
            await self.store.complete_inbound(msg.platform, msg.event_id)

    async def fail(self, turn: Turn, exc: HermesError) -> None:
        """Provider failures and model misbehaviour: one clear sentence instead of an answer."""
        turn.failed = True
        turn.error_kind = "provider" if isinstance(exc, ProviderError) else "model"
        try:
            if not await turn.job.is_new():
                turn.duplicate = True
                return
            await turn.journal.flush()
        except StorageError as error:
            await self.pause(turn, error)
            return
        log.warning("session %s: turn failed: %s", turn.session.key, exc)
        if isinstance(exc, ProviderError):
            text = f"⚠️ The model is not reachable right now ({_short(exc)}). Please try again shortly."
        else:
            text = f"⚠️ Something went wrong with this answer ({_short(exc)}). Please try again."
        await turn.stream.finish(text)

    async def pause(self, turn: Turn, error: StorageError) -> None:
        """The store cannot write: stop here and say so, once per chat. What this turn added in memory is
        dropped (the store has not got it); the event, if it was recorded, stays in the inbox."""
        turn.paused = True
        self.metrics.error(self.host.bot, "storage")
        turn.session.history.drop()
        await turn.journal.settle()
        # The notice goes under its own key: the reply's stays open for the answer once writing works again
        # (what was streamed so far is then edited into it).
        await turn.stream.abort(None)
        await self.tell_paused(turn.message, error)

    async def complete(self, turn: Turn) -> None:
        """Log the turn's one line, and mark the inbox event answered, unless the answer must still be given
        after a restart."""
        _log_turn(turn)
        if not (turn.duplicate or turn.paused):
            report_turn(self.metrics, self.host.bot, turn.message.platform, outcome=_outcome(turn),
                        started=turn.started, error_kind=turn.error_kind, result=turn.result,
                        tools=self.host.tools)
        if (turn.interrupted and self.stopping(turn.session.key)) or turn.undelivered or turn.duplicate or turn.paused:
            return
        try:
            await self._complete(turn.job, turn.session.key)
        except StorageError as error:  # answered, but not marked: a restart delivers the stored answer again
            self.storage_health.failed(error)

    async def hooks(self, turn: Turn) -> None:
        if turn.interrupted or turn.duplicate or turn.paused or not self.storage_health.ok:
            return  # nor reviews or goal judges (model calls) while nothing they decide can be stored
        result = turn.result
        outcome = TurnOutcome(
            scope=turn.session.scope, person_id=turn.job.person_id,
            new_messages=list(result.new_messages) if result else [],
            tool_calls=result.tool_calls if result else 0,
            tool_iterations=result.tool_iterations if result else 0,
            usage=result.usage if result else Usage(), final_text=result.final_text if result else "",
            failed=turn.failed, purpose=turn.job.purpose, message_id=turn.message.message_id)
        for feature in self.features:
            try:
                await feature.on_turn_end(outcome)
            except Exception:
                log.exception("feature %s failed after a turn", feature.name)

    async def tell_paused(self, msg: InboundMessage, error: StorageError) -> None:
        """A message that could not be taken or a turn that could not start: the person hears why once
        per chat."""
        self.storage_health.failed(error)
        target = msg.reply_target()
        if self.storage_health.first_notice(target):
            try:
                await self.host.notify(target, self.storage_health.notice(), idempotency_key=f"{msg.event_id}:paused")
            except Exception as exc:  # noqa: BLE001 - the platform failing too changes nothing here
                log.warning("could not tell %s that the store cannot write: %s", target.chat_id, exc)

    # ----------------------------------------------------------------- helpers

    async def _call_hook(self, session: SessionHandle, msg: InboundMessage) -> CallHook | None:
        for feature in self.features:
            hook = await feature.call_hook(session, msg)
            if hook is not None:
                return hook
        return None

    async def _expand_command(self, msg: InboundMessage) -> InboundMessage:
        """An unregistered `/name args` that a feature knows (a skill) becomes the text it stands for."""
        if msg.command is None or msg.synthetic:
            return msg
        for feature in self.features:
            text = await feature.expand_command(msg.command, msg.args, self.host.bot)
            if text:
                return replace(msg, text=text, command=None, args="")
        return msg

    async def _fetch(self, session: SessionHandle, msg: InboundMessage, outlet: Outlet | None) -> InboundMessage:
        """The files the message offers, fetched through its platform's fetcher (`core/fetching.py`): the
        message was recorded first, so a crash here loses nothing. Not for a message its session already
        stored (a replay: its files were read into the stored user message)."""
        if not any(a.pending for a in msg.attachments) or _stored(session, msg):
            return msg
        fetcher = outlet.attachment_fetcher() if isinstance(outlet, FetchesAttachments) else None

        async def notify(target: ReplyTarget, text: str, key: str) -> None:
            await self.host.notify(target, text, idempotency_key=key)

        return await fetch_pending(msg, session.key, fetcher, notify)

    async def _hear(self, session: SessionHandle, msg: InboundMessage) -> InboundMessage:
        """Voice notes as their transcripts; what the person is to hear of them (no transcriber, a failure,
        the echo) is sent first. Not again for a message its session already stored (a replay)."""
        if not msg.attachments or _stored(session, msg):
            return msg
        heard = await (self.host.services.get(VOICE_NOTES) or UNHEARD).hear(msg)
        for n, notice in enumerate(heard.notices):
            try:
                await self.host.notify(msg.reply_target(), notice, idempotency_key=f"{msg.event_id}:voice:{n}")
            except Exception as exc:  # noqa: BLE001 - the answer still comes; the model knows what was heard
                log.warning("could not tell %s about a voice note: %s", msg.chat_id, exc)
        return heard.message

    async def _keep_typing(self, outlet: Outlet, target: ReplyTarget) -> None:
        while True:
            with contextlib.suppress(Exception):
                await outlet.typing(target)
            await asyncio.sleep(TYPING_EVERY_SECONDS)


def _stored(session: SessionHandle, msg: InboundMessage) -> bool:
    """Whether the session already stored this message's user message (a replay after a crash)."""
    return any(m.meta.get("event_id") == msg.event_id for m in session.history.view())


def _log_turn(turn: Turn) -> None:
    """One line per turn at INFO: who, where, how it ended, how long it took, what it cost. Its fields go
    to the JSON log as they are."""
    if turn.duplicate or turn.paused:
        return  # not a turn: the other copy logs it; a paused turn is logged as the store failing
    outcome = _outcome(turn)
    usage = turn.result.usage if turn.result else Usage()
    latency_ms = round((time.monotonic() - turn.started) * 1000)
    tokens_in, tokens_out = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens, usage.output_tokens
    log.info("turn %s for person %s on %s in %.2f s: %s tokens in, %s out", outcome, turn.job.person_id,
             turn.message.platform, latency_ms / 1000, tokens_in, tokens_out,
             extra={"event": "turn", "outcome": outcome, "person_id": turn.job.person_id,
                    "platform": turn.message.platform, "latency_ms": latency_ms, "tokens_in": tokens_in,
                    "tokens_out": tokens_out, "model": turn.session.last_model})


def _outcome(turn: Turn) -> str:
    return ("interrupted" if turn.interrupted else "failed" if turn.failed else "undelivered"
            if turn.undelivered else "error" if turn.result is None else "answered")


def _stored_answer(history: Sequence[Message], event_id: str) -> str | None:
    """The final answer stored for the user message of `event_id`, if the turn got that far."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user" and history[index].meta.get("event_id") == event_id:
            after = history[index + 1:]
            if after and after[-1].role == "assistant" and not after[-1].tool_calls and not is_cut(after[-1]):
                return answer_text(after)
            return None  # not answered yet, or cut at the output limit: the turn goes on from there
    return None


async def _stop(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _short(exc: Exception) -> str:
    """The first line of the error, secrets redacted: it is shown to a person."""
    text = redact(str(exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
