"""`Outbound`: everything an adapter sends, composed around its platform's `Transport`.

One object per adapter holds the pieces and joins them: the pacer (`OutboundScheduler`, one lane per
chat), the delivery ledger (`OnceLedger`), the part renderer (`PartRenderer`) and the transport. Every
call to the platform goes through `call`, so replies, notices, approval questions and typing all wait
out a 429 in their chat's lane instead of failing. `StreamingReply` works on it for streamed answers;
`send` and `typing` are the rest of the engine's `Outlet`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from adapters.ledger import OnceLedger
from adapters.outbound import OutboundScheduler
from adapters.part_rendering import PartRenderer
from adapters.parts import NO_EXTRAS, Capabilities, OutPart, SentMessage
from adapters.streaming import StreamingReply
from adapters.transport import FileTransport, NativeStream, Transport
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import Delivery, DeliveryLedger, OutgoingFile

__all__ = ["Lanes", "Outbound"]

log = logging.getLogger(__name__)

UNKNOWN_TEXT = "\x00(shown before a restart)"  # what a resumed message shows as far as we know: never equal
UPLOADING = "(uploading)"  # the ledger's mark of a file upload begun and not answered: no platform's message id


def _never(exc: BaseException) -> bool:
    return False


class Lanes:
    """Which pacing lane a target's calls take, and how far apart. Platforms rate-limit per chat, threads
    included, so the default lane is (account, chat); Discord threads are channels of their own."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def key(self, target: ReplyTarget) -> Hashable:
        return (target.account, target.chat_id)

    def interval_for(self, target: ReplyTarget) -> float:
        return self.interval


class Outbound:
    """See the module docstring."""

    def __init__(self, transport: Transport, renderer: PartRenderer, scheduler: OutboundScheduler,
                 ledger: DeliveryLedger, *, lanes: Lanes, stream_cursor: str = "",
                 is_markup_error: Callable[[BaseException], bool] = _never,
                 files: FileTransport | None = None) -> None:
        self.transport = transport
        self.files = files
        self.renderer = renderer
        self.scheduler = scheduler
        self.once = OnceLedger(ledger)
        self.lanes = lanes
        self.stream_cursor = stream_cursor
        self.is_markup_error = is_markup_error

    @property
    def capabilities(self) -> Capabilities:
        return self.renderer.capabilities

    @property
    def ledger(self) -> DeliveryLedger:
        return self.once.ledger

    @ledger.setter
    def ledger(self, ledger: DeliveryLedger) -> None:
        self.once.ledger = ledger

    # -- the pacer ----------------------------------------------------------------------------------
    async def call(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                   merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True) -> Any:
        """Run one platform call through this target's lane (paced, retried); returns its result or
        `DROPPED` for an interim call that was superseded."""
        return await self.scheduler.submit(self.lanes.key(target), fn, interim=interim, merge_key=merge_key,
                                           tag=tag, paced=paced, interval=self.lanes.interval_for(target))

    def drop_interim(self, tag: Hashable) -> None:
        """Drop the queued interim calls of one streamed reply (a call under way completes)."""
        self.scheduler.drop_pending(tag=tag)

    # -- the Outlet ---------------------------------------------------------------------------------
    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> StreamingReply:
        return StreamingReply(self, target, idempotency_key=idempotency_key)

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        """Render, split and post a complete message; with a key, at most once per key (and after a crash
        mid-way, the parts already posted are edited, not posted again)."""
        async def deliver(earlier: Delivery | None) -> list[str]:
            existing = await self.resume(target, earlier)
            sent = await self.deliver_parts(target, self.render_parts(text), existing, key=idempotency_key)
            return [m.id for m in sent]

        await self.deliver_once(idempotency_key, deliver)

    async def typing(self, target: ReplyTarget) -> None:
        """Best effort, never waits: skipped when the chat is busy or paused (a reply is on its way), and
        when the adapter's global rate has no token to spare (at the cap, answers go first)."""
        if not self.capabilities.typing_indicator:
            return
        key = self.lanes.key(target)
        if self.scheduler.is_busy(key):
            return

        async def typing_call() -> None:
            try:
                await self.transport.typing(target)
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise  # let the scheduler pause the chat
                log.debug("typing indicator failed in %s: %s", target.chat_id, exc)

        with contextlib.suppress(PlatformError):  # the scheduler stopped
            self.scheduler.enqueue(key, typing_call, interim=True, merge_key=("typing",), paced=False, spare=True)

    def max_file_bytes(self, media_type: str) -> int:
        return self.files.max_file_bytes(media_type) if self.files is not None else 0

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool:
        """Upload a file through the chat's lane (a 429 waits there, the upload is then tried again: the
        platform refused the first, so nothing was posted), at most once per key.

        The ledger is told before the upload starts (a record with no message). An attempt that finds such
        a record left by an earlier process does not upload again: that process may have died after the
        platform took the file and before its message id was recorded, and a file shown twice cannot be
        taken back. Returns whether this call sent the file."""
        files = self.files
        if files is None:
            raise PlatformError(f"{self.renderer.platform} cannot send files")
        cut_short = False

        async def deliver(earlier: Delivery | None) -> list[str]:
            nonlocal cut_short
            if earlier is not None and UPLOADING in earlier.message_ids:
                log.warning("file %s (%s): an earlier upload was cut short; not sent again", file.name,
                            idempotency_key)
                cut_short = True
                return [mid for mid in earlier.message_ids if mid != UPLOADING]
            await self.once.record(idempotency_key, [UPLOADING])
            try:
                mid = await self.call(target, lambda: files.send_file(target, file))
            except PlatformError:
                await self.once.record(idempotency_key, [])  # the platform refused it: nothing was posted
                raise
            return [str(mid)]

        sent = await self.deliver_once(idempotency_key, deliver)
        return sent and not cut_short

    # -- rendering ----------------------------------------------------------------------------------
    def render_parts(self, markdown: str) -> list[OutPart]:
        return self.renderer.parts(markdown)

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        """The platform's native stream for `target`: where it has one, and the target is a thread
        (Slack's streaming API needs one)."""
        if not self.capabilities.native_streaming or target.thread_id is None:
            return None
        return self.transport.native_stream(target)

    # -- parts --------------------------------------------------------------------------------------
    async def send_part(self, target: ReplyTarget, part: OutPart) -> SentMessage:
        """Post one final part; on a markup error, post its Markdown source as plain text instead."""
        send = self.transport.send
        if part.rendered is not None:
            text, extras = part.rendered
            try:
                mid = await self.call(target, lambda: send(target, text, rendered=True, extras=extras))
                return SentMessage(mid, text, True, extras)
            except Exception as exc:
                if not self.is_markup_error(exc):
                    raise
                log.warning("%s rejected the formatting (%s); sending plain text", self.renderer.platform, exc)
        mid = await self.call(target, lambda: send(target, part.source, rendered=False, extras=NO_EXTRAS))
        return SentMessage(mid, part.source, False)

    async def edit_part(self, target: ReplyTarget, message: SentMessage, part: OutPart) -> SentMessage:
        """Turn an existing message into a final part (markup fallback as in `send_part`)."""
        edit, mkey = self.transport.edit, ("message", message.id)
        if part.rendered is not None:
            text, extras = part.rendered
            if message.shows(text, True, extras):
                return message
            try:
                await self.call(target, lambda: edit(target, message.id, text, rendered=True, extras=extras),
                                merge_key=mkey)
                return SentMessage(message.id, text, True, extras)
            except Exception as exc:
                if not self.is_markup_error(exc):
                    raise
                log.warning("%s rejected the formatting (%s); editing to plain text", self.renderer.platform, exc)
        if message.shows(part.source, False, NO_EXTRAS):
            return message
        await self.call(target, lambda: edit(target, message.id, part.source, rendered=False, extras=NO_EXTRAS),
                        merge_key=mkey)
        return SentMessage(message.id, part.source, False)

    async def deliver_parts(self, target: ReplyTarget, parts: Sequence[OutPart], existing: list[SentMessage],
                            *, key: str | None = None) -> list[SentMessage]:
        """Make the chat show `parts`: edit `existing` messages in order, post the rest, delete surplus.

        `existing` is updated in place as calls succeed, so a retry after a failure resumes rather than
        repeats; the ledger learns the messages under `key` each time a post or delete changed them. If a
        message cannot be edited any more, its part is posted anew.
        """
        remember = self.once.remembering(key)
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
            await self.delete_quietly(target, surplus)
            existing.pop()
            if remember is not None:
                await remember(existing)
        return list(existing)

    async def delete_quietly(self, target: ReplyTarget, message: SentMessage) -> None:
        """Take a message away if the platform lets us; one it refuses stays (a 429 still waits)."""
        if not self.capabilities.can_delete:
            return
        try:
            await self.call(target, lambda: self.transport.delete(target, message.id))
        except PlatformError as exc:
            if exc.retry_after is not None:
                raise
            log.warning("could not delete surplus message %s: %s", message.id, exc)

    # -- the ledger ---------------------------------------------------------------------------------
    async def deliver_once(self, key: str | None,
                           deliver: Callable[[Delivery | None], Awaitable[Sequence[str]]]) -> bool:
        return await self.once.deliver_once(key, deliver)

    async def resume(self, target: ReplyTarget, earlier: Delivery | None) -> list[SentMessage]:
        """The messages an earlier, unfinished attempt left in the chat, to be edited into the answer.
        What they show is unknown, so the first edit of each always goes out. A native stream the crash
        left open is closed first (it cannot be edited while open)."""
        if earlier is None or not earlier.message_ids:
            return []
        messages = [SentMessage(mid, UNKNOWN_TEXT) for mid in earlier.message_ids]
        stream = self.native_stream(target)
        if stream is not None:
            last = messages[-1].id
            try:
                await self.call(target, lambda: stream.stop(target, last, ""))
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise
                log.debug("message %s was no open stream (%s)", last, exc)
        return messages
