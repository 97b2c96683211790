"""`StreamingReply`: one answer streamed into a chat, the adapter side of `hermes_engine.ports.reply.ReplyStream`.

Post-then-edit (Telegram, Discord, Slack outside threads):

- `push` only appends to a buffer and wakes a pump task; the engine is never held up by the platform.
- The pump keeps the chat in step with the buffer one call at a time through the adapter's outbound
  lane (paced per chat): the first frame posts a message, later frames edit it in place, as PLAIN text
  (the Markdown as written; optional `adapter.stream_cursor` on the last frame). Each call reads the
  newest buffer when it runs, so frames that fall behind are merged, never queued up. Unchanged frames
  are not sent.
- When the buffer outgrows one message, the interim text is split (`split_message`): the full message is
  edited once more to end at a split boundary (fences closed), and streaming continues in a new message.
- `finish(text)` stops the pump, renders the final Markdown per part (`adapter.render_parts`), edits the
  interim messages into the rendered parts, posts more messages if needed and deletes surplus interim
  messages if the final is shorter. Once per idempotency key: a second `finish` (this stream or another
  with the same key, even concurrently) is a no-op.
- Without edit capability nothing is shown until `finish`, which posts the parts.
- `abort(note)` stops editing and leaves what was shown (cursor removed); a note is posted as its own
  message (under its own key: the answer's key stays open for a restart to finish).
- Every message id is written to the adapter's `DeliveryLedger` as its send returns, and the key is
  marked final once the final lands. A stream opened again under a key that is not final (the process
  died mid-reply) takes over the messages left in the chat and edits them; it never posts them again.

Native streaming (Slack `chat.startStream/appendStream/stopStream`) is used instead when
`adapter.native_stream(target)` gives one: deltas are appended (batched at the paced rate) by a
`NativeStreamWriter`, which continues in a new streamed message whenever one is full; the final writes
the rest and closes the streams. If the final is not a continuation of what was streamed, the streams'
messages are edited/split like interim messages. A native call that fails makes the stream fall back
to post-then-edit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Protocol

from adapters.ledger import OnceLedger
from adapters.native_stream import NO_NATIVE_STREAM, NativeStreamWriter
from adapters.outbound import DROPPED
from adapters.parts import Capabilities, OutPart, SentMessage
from adapters.splitting import measure, split_message
from adapters.transport import NativeStream, Transport
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import Delivery, ReplyStream


class StreamingAdapter(Protocol):
    """What a streaming reply needs of its adapter's outbound side (`adapters.delivery.Outbound`)."""

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def stream_cursor(self) -> str: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def once(self) -> OnceLedger: ...

    async def call(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                   merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True) -> Any: ...

    def drop_interim(self, tag: Hashable) -> None: ...

    def render_parts(self, markdown: str) -> list[OutPart]: ...

    def native_stream(self, target: ReplyTarget) -> NativeStream | None: ...

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None: ...

    async def edit_part(self, target: ReplyTarget, message: SentMessage, part: OutPart) -> SentMessage: ...

    async def deliver_parts(self, target: ReplyTarget, parts: Sequence[OutPart], existing: list[SentMessage],
                            *, key: str | None = None) -> list[SentMessage]: ...

    async def delete_quietly(self, target: ReplyTarget, message: SentMessage) -> None: ...

    async def resume(self, target: ReplyTarget, earlier: Delivery | None) -> list[SentMessage]: ...


__all__ = ["StreamingReply"]

log = logging.getLogger(__name__)

_OPEN, _CLOSING, _FINISHED, _ABORTED = "open", "closing", "finished", "aborted"


class StreamingReply(ReplyStream):
    """See the module docstring. Created by `Outbound.open_stream`."""

    def __init__(self, adapter: StreamingAdapter, target: ReplyTarget, *, idempotency_key: str) -> None:
        self.adapter = adapter
        self.target = target
        self.idempotency_key = idempotency_key
        self.messages: list[SentMessage] = []  # what the chat shows for this reply, in order
        self._text = ""
        self._state = _OPEN
        self._delivered = False
        self._resumed = False  # whether what an earlier life of this answer left in the chat was looked up
        self._dirty = asyncio.Event()
        self._pump_task: asyncio.Task[Any] | None = None
        self._lock = asyncio.Lock()  # serialises finish/abort on this stream
        self._tag = ("stream", id(self), idempotency_key)
        caps = adapter.capabilities
        stream = adapter.native_stream(target)
        self._native = stream is not None
        self._writer = NativeStreamWriter(stream or NO_NATIVE_STREAM, target,
                                          limit=int(caps.max_message_length * caps.render_headroom),
                                          on_new_message=lambda ms: self._remember([m.id for m in ms]))
        self._interim = caps.can_edit or self._native
        cursor = adapter.stream_cursor
        self._cursor = cursor
        self._frame_limit = caps.max_message_length - measure(cursor, caps.length_unit)

    # -- ReplyStream --------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """Everything pushed so far."""
        return self._text

    async def push(self, delta: str) -> None:
        if self._state != _OPEN or not delta:
            return
        self._text += delta
        if not self._interim:
            return
        self._dirty.set()
        if self._pump_task is None:
            self._pump_task = asyncio.get_running_loop().create_task(
                self._pump(), name=f"stream:{self.idempotency_key}")

    async def rewind(self) -> None:
        """Start the answer again in the messages already shown: the pump stops (a call under way ends),
        the buffer empties, and the next push edits message 0 onwards; `finish` removes surplus messages.
        A native stream cannot take back what it appended, so it is closed and its message edited."""
        async with self._lock:
            if self._state != _OPEN:
                return
            await self._stop_interim()
            if self._native and self._writer.started:
                await self._fall_back_from_native()
            self._text = ""
            self._pump_task = None
            self._state = _OPEN

    async def finish(self, text: str) -> None:
        async with self._lock:
            if self._delivered or self._state == _ABORTED:
                return
            delivered = await self.adapter.once.deliver_once(
                self.idempotency_key, lambda earlier: self._deliver_final(text, earlier))
            if not delivered and not self._delivered:
                # Another stream with this key already delivered the final: retire our interim frames.
                await self._stop_interim()
                for message in reversed(self.messages):
                    await self.adapter.delete_quietly(self.target, message)
                self.messages.clear()
                self._state = _FINISHED

    async def abort(self, note: str | None = None) -> None:
        async with self._lock:
            if self._delivered or self._state == _ABORTED:
                return
            await self._stop_interim()
            self._state = _ABORTED
            try:
                await self._settle_after_abort()
            except PlatformError as exc:
                log.warning("could not tidy the aborted reply in %s: %s", self.target.chat_id, exc)
            if note:  # its own key: the answer's key stays open for a restart to finish
                await self.adapter.send(self.target, note, idempotency_key=f"{self.idempotency_key}:note")

    # -- final delivery -----------------------------------------------------------------------------
    async def _deliver_final(self, text: str, earlier: Delivery | None) -> list[str]:
        await self._stop_interim()
        await self._resume(earlier)
        adapter = self.adapter
        if self._native and self._writer.started:
            await self._finish_native(text)
            if self._delivered:
                return [m.id for m in self.messages]
        parts = adapter.render_parts(text)
        if not parts:
            parts = adapter.render_parts(text.strip() or "…")
        sent = await adapter.deliver_parts(self.target, parts, self.messages, key=self.idempotency_key)
        self._delivered = True
        self._state = _FINISHED
        return [m.id for m in sent]

    async def _finish_native(self, text: str) -> None:
        """Write the rest of the final into the streams and close them: done if the final continues what
        was streamed. Otherwise the streams' messages become interim messages, edited into the final."""
        adapter, target, writer = self.adapter, self.target, self._writer
        continuation = text.startswith(self._text[:writer.consumed])

        async def finish_streams() -> None:
            if continuation:
                await writer.write(text, final=True)
            await writer.close()

        await adapter.call(target, finish_streams)
        self._native = False
        self.messages[:] = writer.messages
        if continuation:
            self._delivered = True
            self._state = _FINISHED

    async def _settle_after_abort(self) -> None:
        adapter, target = self.adapter, self.target
        if self._native and self._writer.started:
            await adapter.call(target, self._writer.close)
            self._native = False
            self.messages[:] = self._writer.messages
            return
        if self._cursor and self.messages:
            last = self.messages[-1]
            if last.text.endswith(self._cursor):
                bare = last.text[: -len(self._cursor)]
                if bare.strip():
                    self.messages[-1] = await adapter.edit_part(target, last, OutPart(bare, None))
                else:
                    await adapter.delete_quietly(target, last)
                    self.messages.pop()

    async def _stop_interim(self) -> None:
        """Stop the pump; queued interim calls are dropped, a running one completes and is recorded."""
        if self._state == _OPEN:
            self._state = _CLOSING
        self.adapter.drop_interim(self._tag)
        self._dirty.set()
        task = self._pump_task
        if task is not None and not task.done():
            await asyncio.wait([task])

    async def _resume(self, earlier: Delivery | None) -> None:
        """Take over the messages an earlier life of this answer left (a crash mid-reply): they are
        edited into this answer in place, so the chat never shows it twice."""
        if self._resumed:
            return
        self._resumed = True
        left = await self.adapter.resume(self.target, earlier)
        if left:
            self.messages[:0] = left
            self._native = False  # a native stream would start a new message below the old one
            self._interim = self.adapter.capabilities.can_edit

    async def _remember(self, message_ids: Sequence[str]) -> None:
        await self.adapter.once.record(self.idempotency_key, message_ids)

    # -- interim frames -----------------------------------------------------------------------------
    def _frames(self) -> list[str]:
        caps = self.adapter.capabilities
        frames = split_message(self._text, self._frame_limit, caps.length_unit)
        if frames and self._cursor:
            frames[-1] += self._cursor
        return frames

    def _frame(self, index: int, fallback: str) -> str:
        frames = self._frames()
        return frames[index] if index < len(frames) else fallback

    async def _pump(self) -> None:
        try:
            earlier = await self.adapter.once.get(self.idempotency_key)
            if earlier is not None and earlier.final:
                self._interim = False  # already answered in full before a restart; finish will see it
                return
            await self._resume(earlier)
            while self._state == _OPEN:
                await self._dirty.wait()
                if self._state != _OPEN:
                    return
                self._dirty.clear()
                if self._native:
                    more = await self._native_step()
                else:
                    more = await self._edit_step()
                if more:
                    self._dirty.set()
        except Exception as exc:  # noqa: BLE001 - interim trouble must not lose the final
            log.warning("interim updates stopped in %s: %s", self.target.chat_id, exc)
            self._interim = False

    async def _edit_step(self) -> bool:
        """Bring the first out-of-date message up to date; True if something was done."""

        adapter, target = self.adapter, self.target
        for index, frame in enumerate(self._frames()):
            if index < len(self.messages):
                message = self.messages[index]
                if message.text == frame:
                    continue

                async def edit(message: SentMessage = message, index: int = index, frame: str = frame) -> str:
                    text = self._frame(index, frame)
                    if text != message.text:
                        await adapter.transport.edit(target, message.id, text, rendered=False, extras={})
                    return text

                shown = await adapter.call(target, edit, interim=True, merge_key=(self._tag, index),
                                           tag=self._tag)
                if shown is DROPPED:
                    return False
                message.text, message.rendered, message.extras = shown, False, {}
                return True

            async def post(index: int = index, frame: str = frame) -> tuple[str, str]:
                text = self._frame(index, frame)
                return await adapter.transport.send(target, text, rendered=False, extras={}), text

            result = await adapter.call(target, post, interim=True, merge_key=(self._tag, index), tag=self._tag)
            if result is DROPPED:
                return False
            message_id, shown = result
            self.messages.append(SentMessage(message_id, shown))
            await self._remember([m.id for m in self.messages])
            return True
        return False

    async def _native_step(self) -> bool:
        adapter, target = self.adapter, self.target

        async def native_call() -> bool:
            before = self._writer.consumed
            await self._writer.write(self._text)
            return self._writer.consumed > before

        if len(self._text) == self._writer.consumed:
            return False
        try:
            wrote = await adapter.call(target, native_call, interim=True, merge_key=(self._tag, "native"),
                                       tag=self._tag)
        except Exception as exc:  # noqa: BLE001
            log.warning("native streaming failed in %s (%s); falling back to post-then-edit",
                        target.chat_id, exc)
            await self._fall_back_from_native()
            return True
        return wrote is not DROPPED and bool(wrote)

    async def _fall_back_from_native(self) -> None:

        self._native = False
        self._interim = self.adapter.capabilities.can_edit
        if not self._writer.started:
            return
        try:  # close the platform stream so its message can be edited like any other
            await self.adapter.call(self.target, self._writer.close)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not close the native stream in %s: %s", self.target.chat_id, exc)
        self.messages[:] = self._writer.messages
