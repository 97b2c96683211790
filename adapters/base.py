"""The adapter base every platform adapter subclasses: capability flags, low-level primitives, and the
shared machinery on top of them (pacing, splitting, rendering with plain fallback, idempotent delivery).

A concrete adapter supplies only the platform half:

- class attributes `platform` and `capabilities`;
- `start()` / `stop()` (call ``await super().stop()`` to drain outbound calls);
- four primitives, each one API call, no retries, no pacing (the scheduler does that):
  `_send_raw`, `_edit_raw`, `_delete_raw`, `_typing_raw`;
- `render(markdown)` for the final format (see `adapters.render`);
- optionally `is_markup_error(exc)`, `is_transient_error(exc)`, `scheduler_key(target)`,
  `pacing_interval(target)`, and the native streaming hooks `_native_stream_start/_append/_stop`.

Primitives translate their SDK's rate-limit error into ``PlatformError(..., retry_after=seconds)`` and
other refusals into `PlatformError`; the engine only ever sees `PlatformError`.

What the engine uses (the `hermes_engine.ports.reply.Outlet` protocol): `open_stream`, `send`, `typing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from adapters.election import Election
from adapters.outbound import DROPPED, OutboundScheduler, default_is_transient
from adapters.parts import NO_EXTRAS, Capabilities, InMemoryDeliveryLedger, OutPart, SentMessage
from adapters.render import Rendered
from adapters.splitting import measure, split_message
from adapters.streaming import StreamingReply
from hermes_engine.errors import PlatformError
from hermes_engine.ports.approval import ApprovalAsker
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.metrics import NO_METRICS, Metrics
from hermes_engine.ports.reply import Delivery, DeliveryLedger
from hermes_engine.ports.storage import LeaseStore

__all__ = ["DROPPED", "PlatformAdapter", "RejectedLog"]

log = logging.getLogger(__name__)

Remember = Callable[[Sequence[SentMessage]], Awaitable[None]]


class RejectedLog(Protocol):
    """Where an adapter keeps inbound events too malformed to read, for an operator to see (the gateway's
    durable inbox: `hermes-gateway inbox rejected`)."""

    async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None: ...
UNKNOWN_TEXT = "\x00(shown before a restart)"  # what a resumed message shows as far as we know: never equal



# --- the adapter -------------------------------------------------------------------------------------

class PlatformAdapter(ABC):
    """Base of the Telegram, Slack, Discord and console adapters. Implements the engine's `Outlet`."""

    platform: ClassVar[str] = ""
    capabilities: Capabilities  # a class attribute; an adapter configured per bot may set its own
    stream_cursor: ClassVar[str] = ""  # appended to interim frames, e.g. " ▌"
    connected: bool = False  # set by the adapter while the platform accepts it; `/ready` reports it

    def __init__(self, *, ledger: DeliveryLedger | None = None,
                 scheduler: OutboundScheduler | None = None) -> None:
        caps = getattr(self, "capabilities", None)
        if not isinstance(caps, Capabilities):
            raise TypeError(f"{type(self).__name__} must set the class attribute `capabilities`")
        self.ledger: DeliveryLedger = ledger if ledger is not None else InMemoryDeliveryLedger()
        self.scheduler = scheduler if scheduler is not None else OutboundScheduler(
            caps.edit_interval_seconds, global_rate=caps.global_rate_per_second,
            is_transient=self.is_transient_error)
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self.metrics: Metrics = NO_METRICS
        self.leases: LeaseStore | None = None  # where receiving that must run on one replica is elected
        self.holder = ""
        self.elections: list[Election] = []
        self.rejects: RejectedLog | None = None  # see `keep_rejects_in`

    def approval_asker(self) -> ApprovalAsker | None:
        """How this platform shows approval requests (buttons); None: it cannot, and they are denied."""
        return None

    def report_to(self, metrics: Metrics) -> None:
        """Count the platform's rate-limit answers in `metrics` (every outbound call goes through the
        scheduler, which sees them all)."""
        platform = self.platform
        self.metrics = metrics
        self.scheduler.on_rate_limited = lambda: metrics.rate_limited(platform)

    def elect_with(self, leases: LeaseStore, holder: str) -> None:
        """Replicas sharing `leases` elect which of them receives where only one may (a Telegram poller, a
        Discord gateway connection); `holder` names this replica. Without it the adapter receives alone."""
        self.leases, self.holder = leases, holder

    def election(self, name: str, ttl_seconds: float) -> Election | None:
        """The election of lease `name` among the replicas, or None when this adapter is not elected."""
        if self.leases is None:
            return None
        election = Election(self.leases, name, self.holder, ttl_seconds=ttl_seconds, metrics=self.metrics)
        self.elections.append(election)
        return election

    def roles(self) -> dict[str, str]:
        """Per elected lease, this replica's role in it ("leader", "stand-by"): `/ready` reports them."""
        return {election.name: election.role for election in self.elections}

    def keep_deliveries_in(self, ledger: DeliveryLedger) -> None:
        """Record deliveries in `ledger` (the gateway's durable one) instead of this process's memory."""
        self.ledger = ledger

    def keep_rejects_in(self, rejects: RejectedLog) -> None:
        """Record inbound events too malformed to read in `rejects`, before the platform is told they were
        taken (an adapter whose platform can send such events; without it they are only logged)."""
        self.rejects = rejects

    # -- lifecycle (platform half) ------------------------------------------------------------------
    @abstractmethod
    async def start(self) -> None:
        """Connect and start receiving updates."""

    async def stop_receiving(self) -> None:
        """Stop taking new messages where the platform keeps them for later (shutdown, first step), while
        replies in flight may still go out. Adapters whose platform pushes to the gateway's HTTP server, or
        does not send a message again (Discord), need do nothing: what comes while the gateway stops is
        recorded for its next start."""
        return None

    async def stop(self) -> None:
        """Disconnect. Subclasses call ``await super().stop()`` first: it drains queued finals."""
        await self.scheduler.stop()

    # -- primitives (platform half): one API call each, no retry, no pacing ------------------------------
    @abstractmethod
    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> str:
        """Post `text` to `target` (its thread, replying to `reply_to_id` if the platform does that) and
        return the new message id.

        `rendered=True`: `text` and `extras` come from `render()` (Telegram: send with the entities and
        no parse mode). `rendered=False`: show `text` literally — interim frames and the markup
        fallback (Telegram: no parse mode, no entities; Slack: ``escape_slack(text)`` with
        ``mrkdwn=False``; Discord, which reads Markdown in any message: as `render` escapes it, when that
        fits). Either way, never let model text mention everyone
        (Discord ``allowed_mentions``; Slack escaping)."""

    @abstractmethod
    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None:
        """Replace the text of a message. Treat "message is not modified" as success; raise
        `PlatformError` only when the message cannot be edited (then the final is sent anew)."""

    @abstractmethod
    async def _delete_raw(self, target: ReplyTarget, message_id: str) -> None: ...

    @abstractmethod
    async def _typing_raw(self, target: ReplyTarget) -> None: ...

    @abstractmethod
    def render(self, markdown: str) -> str | Rendered:
        """Render one part of a final from Markdown to the platform's format (see `adapters.render`)."""

    # -- hooks with defaults ------------------------------------------------------------------------
    def is_markup_error(self, exc: BaseException) -> bool:
        """Whether a rendered send/edit failed because of its formatting (e.g. Telegram's "can't parse
        entities"); the part is then resent as plain text."""
        return False

    def is_transient_error(self, exc: BaseException) -> bool:
        """Whether a failed call is worth retrying with backoff (rate limits are handled separately)."""
        return default_is_transient(exc)

    def scheduler_key(self, target: ReplyTarget) -> Hashable:
        """The pacing lane of a target. Platforms rate-limit per chat/channel, threads included, so
        the default is (account, chat). Discord threads are channels of their own: override there."""
        return (target.account, target.chat_id)

    def pacing_interval(self, target: ReplyTarget) -> float:
        """Seconds between calls to this target's chat (e.g. Telegram groups allow 20 a minute)."""
        return self.capabilities.edit_interval_seconds

    # -- native streaming hooks (optional) ----------------------------------------------------------
    async def _native_stream_start(self, target: ReplyTarget, markdown: str) -> str:
        """Open a platform-native stream in `target`'s thread with a first chunk; return its message id."""
        raise NotImplementedError

    async def _native_stream_append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        raise NotImplementedError

    async def _native_stream_stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        """Close the stream, appending `markdown` (may be empty) first."""
        raise NotImplementedError

    def uses_native_stream(self, target: ReplyTarget) -> bool:
        """Native streaming is used when the platform has it, the adapter implements it and the
        target is a thread (Slack's streaming API needs one)."""
        return (self.capabilities.native_streaming and target.thread_id is not None
                and type(self)._native_stream_start is not PlatformAdapter._native_stream_start)

    # -- Outlet -------------------------------------------------------------------------------------
    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> StreamingReply:

        return StreamingReply(self, target, idempotency_key=idempotency_key)

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        """Render, split and post a complete message; with a key, at most once per key (and after a crash
        mid-way, the parts already posted are edited, not posted again)."""
        async def deliver(earlier: Delivery | None) -> list[str]:
            existing = await self.resume(target, earlier)
            sent = await self.deliver_parts(target, self.render_parts(text), existing,
                                            remember=self.remembering(idempotency_key))
            return [m.id for m in sent]

        await self.deliver_once(idempotency_key, deliver)

    async def typing(self, target: ReplyTarget) -> None:
        """Best effort, never waits: skipped when the chat is busy or paused (a reply is on its way)."""
        if not self.capabilities.typing_indicator:
            return
        key = self.scheduler_key(target)
        if self.scheduler.is_busy(key):
            return

        async def typing_call() -> None:
            try:
                await self._typing_raw(target)
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise  # let the scheduler pause the chat
                log.debug("typing indicator failed in %s: %s", target.chat_id, exc)

        with contextlib.suppress(PlatformError):  # the scheduler stopped
            self.scheduler.enqueue(key, typing_call, interim=True, merge_key=("typing",), paced=False)

    # -- building blocks (used by StreamingReply and `send`) ------------------------------------------
    def measure(self, text: str) -> int:
        return measure(text, self.capabilities.length_unit)

    def render_parts(self, markdown: str) -> list[OutPart]:
        """Split the Markdown source with headroom, render each part, and re-split any part whose
        rendering exceeds the limit. A part that cannot be rendered within the limit goes out plain."""
        caps = self.capabilities
        first = max(16, int(caps.max_message_length * caps.render_headroom))
        parts: list[OutPart] = []
        for source in split_message(markdown, first, caps.length_unit):
            parts.extend(self._render_fitting(source, first, depth=0))
        return parts

    def _render_fitting(self, source: str, source_limit: int, *, depth: int) -> list[OutPart]:
        limit, unit = self.capabilities.max_message_length, self.capabilities.length_unit
        try:
            rendered = Rendered.of(self.render(source))
        except Exception:  # noqa: BLE001 - a renderer bug must not lose the reply
            log.exception("rendering failed on %s; sending the part as plain text", self.platform)
            return [OutPart(source, None)]
        if not rendered.text.strip():
            return [OutPart(source, None)] if source.strip() else []
        size = self.measure(rendered.text)
        if size <= limit:
            return [OutPart(source, rendered)]
        smaller = min(source_limit - 1, int(source_limit * limit / size * 0.9))
        if depth >= 4 or smaller < 32:
            return [OutPart(p, None) for p in split_message(source, limit, unit)]
        parts: list[OutPart] = []
        for piece in split_message(source, smaller, unit):
            parts.extend(self._render_fitting(piece, smaller, depth=depth + 1))
        return parts

    async def call(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                   merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True) -> Any:
        """Run one platform call through this target's lane (paced, retried); returns its result or
        `DROPPED` for an interim call that was superseded."""
        return await self.scheduler.submit(self.scheduler_key(target), fn, interim=interim,
                                           merge_key=merge_key, tag=tag, paced=paced,
                                           interval=self.pacing_interval(target))

    async def send_part(self, target: ReplyTarget, part: OutPart) -> SentMessage:
        """Post one final part; on a markup error, post its Markdown source as plain text instead."""
        if part.rendered is not None:
            text, extras = part.rendered
            try:
                mid = await self.call(target, lambda: self._send_raw(target, text, rendered=True, extras=extras))
                return SentMessage(mid, text, True, extras)
            except Exception as exc:
                if not self.is_markup_error(exc):
                    raise
                log.warning("%s rejected the formatting (%s); sending plain text", self.platform, exc)
        mid = await self.call(target, lambda: self._send_raw(target, part.source, rendered=False,
                                                             extras=NO_EXTRAS))
        return SentMessage(mid, part.source, False)

    async def edit_part(self, target: ReplyTarget, message: SentMessage, part: OutPart) -> SentMessage:
        """Turn an existing message into a final part (markup fallback as in `send_part`)."""
        mkey = ("message", message.id)
        if part.rendered is not None:
            text, extras = part.rendered
            if message.shows(text, True, extras):
                return message
            try:
                await self.call(target, lambda: self._edit_raw(target, message.id, text, rendered=True,
                                                               extras=extras), merge_key=mkey)
                return SentMessage(message.id, text, True, extras)
            except Exception as exc:
                if not self.is_markup_error(exc):
                    raise
                log.warning("%s rejected the formatting (%s); editing to plain text", self.platform, exc)
        if message.shows(part.source, False, NO_EXTRAS):
            return message
        await self.call(target, lambda: self._edit_raw(target, message.id, part.source, rendered=False,
                                                       extras=NO_EXTRAS), merge_key=mkey)
        return SentMessage(message.id, part.source, False)

    async def deliver_parts(self, target: ReplyTarget, parts: Sequence[OutPart], existing: list[SentMessage],
                            *, remember: Remember | None = None) -> list[SentMessage]:
        """Make the chat show `parts`: edit `existing` messages in order, post the rest, delete surplus.

        `existing` is updated in place as calls succeed, so a retry after a failure resumes rather than
        repeats; `remember` is told the messages each time a post or delete changed them (the ledger). If
        a message cannot be edited any more, its part is posted anew.
        """
        can_edit = self.capabilities.can_edit
        for i, part in enumerate(parts):
            if i < len(existing) and can_edit:
                try:
                    existing[i] = await self.edit_part(target, existing[i], part)
                    continue
                except PlatformError as exc:
                    if exc.retry_after is not None:
                        raise
                    log.warning("could not edit message %s (%s); posting the part anew", existing[i].id, exc)
                    existing[i] = await self.send_part(target, part)
                    if remember is not None:
                        await remember(existing)
                    continue
            sent = await self.send_part(target, part)
            if i < len(existing):
                existing[i] = sent
            else:
                existing.append(sent)
            if remember is not None:
                await remember(existing)
        while len(existing) > len(parts):
            surplus = existing[-1]
            await self._delete_quietly(target, surplus)
            existing.pop()
            if remember is not None:
                await remember(existing)
        return list(existing)

    async def _delete_quietly(self, target: ReplyTarget, message: SentMessage) -> None:
        if not self.capabilities.can_delete:
            return
        try:
            await self.call(target, lambda: self._delete_raw(target, message.id))
        except PlatformError as exc:
            if exc.retry_after is not None:
                raise
            log.warning("could not delete surplus message %s: %s", message.id, exc)

    async def deliver_once(self, key: str | None,
                           deliver: Callable[[Delivery | None], Awaitable[Sequence[str]]]) -> bool:
        """Run `deliver` unless `key` was already delivered in full; concurrent callers with one key wait
        for the first and do nothing if it succeeded. `deliver` gets what an earlier attempt left (a crash
        between the first send and the final edit): the messages to finish in place. Returns whether this
        call delivered."""
        if key is None:
            await deliver(None)
            return True
        while True:
            running = self._inflight.get(key)
            if running is None:
                break
            try:
                await asyncio.shield(running)
                return False
            except Exception:  # noqa: BLE001 - the other attempt failed: try ourselves
                continue
        mine: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        mine.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._inflight[key] = mine
        try:
            earlier = await self.ledger.get(key)
            if earlier is not None and earlier.final:
                mine.set_result(None)
                return False
            ids = await deliver(earlier)
            await self.ledger.record(key, list(ids), final=True)
            mine.set_result(list(ids))
            return True
        except BaseException as exc:
            if not mine.done():
                mine.set_exception(exc if isinstance(exc, Exception) else PlatformError("delivery cancelled"))
            raise
        finally:
            if self._inflight.get(key) is mine:
                del self._inflight[key]

    def remembering(self, key: str | None) -> Remember | None:
        """The ledger callback for `deliver_parts`: a message posted is recorded before anything else
        happens, so a crash after it leaves a message to edit, never one to repeat."""
        if key is None:
            return None

        async def remember(messages: Sequence[SentMessage]) -> None:
            await self.ledger.record(key, [m.id for m in messages], final=False)

        return remember

    async def resume(self, target: ReplyTarget, earlier: Delivery | None) -> list[SentMessage]:
        """The messages an earlier, unfinished attempt left in the chat, to be edited into the answer.
        What they show is unknown, so the first edit of each always goes out. A native stream the crash
        left open is closed first (it cannot be edited while open)."""
        if earlier is None or not earlier.message_ids:
            return []
        messages = [SentMessage(mid, UNKNOWN_TEXT) for mid in earlier.message_ids]
        if self.uses_native_stream(target):
            last = messages[-1].id
            try:
                await self.call(target, lambda: self._native_stream_stop(target, last, ""))
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise
                log.debug("message %s was no open stream (%s)", last, exc)
        return messages
