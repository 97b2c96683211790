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
  message under the stream's idempotency key.

Native streaming (Slack `chat.startStream/appendStream/stopStream`) is used instead when
`adapter.uses_native_stream(target)`: deltas are appended (batched at the paced rate) and the final
closes the stream; if the final is not a continuation of what was streamed, or does not fit one message,
the stream is closed and its message is edited/split like an interim message. A native call that fails
makes the stream fall back to post-then-edit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

from adapters.outbound import DROPPED, OutboundScheduler
from adapters.parts import Capabilities, OutPart, SentMessage
from adapters.splitting import split_message
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import ReplyStream


class StreamingAdapter(Protocol):
    """What a streaming reply needs of its adapter (`adapters.base.PlatformAdapter` provides it)."""

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def stream_cursor(self) -> str: ...

    @property
    def scheduler(self) -> OutboundScheduler: ...

    async def call(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                   merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True) -> Any: ...

    def measure(self, text: str) -> int: ...

    def render_parts(self, markdown: str) -> list[OutPart]: ...

    def uses_native_stream(self, target: ReplyTarget) -> bool: ...

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None: ...

    async def edit_part(self, target: ReplyTarget, message: SentMessage, part: OutPart) -> SentMessage: ...

    async def deliver_parts(self, target: ReplyTarget, parts: Sequence[OutPart],
                            existing: list[SentMessage]) -> list[SentMessage]: ...

    async def deliver_once(self, key: str | None, deliver: Callable[[], Awaitable[Sequence[str]]]) -> bool: ...

    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> str: ...

    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None: ...

    async def _delete_quietly(self, target: ReplyTarget, message: SentMessage) -> None: ...

    async def _native_stream_start(self, target: ReplyTarget, markdown: str) -> str: ...

    async def _native_stream_append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None: ...

    async def _native_stream_stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None: ...

__all__ = ["StreamingReply"]

log = logging.getLogger(__name__)

_OPEN, _CLOSING, _FINISHED, _ABORTED = "open", "closing", "finished", "aborted"


class StreamingReply(ReplyStream):
    """See the module docstring. Created by `PlatformAdapter.open_stream`."""

    def __init__(self, adapter: StreamingAdapter, target: ReplyTarget, *, idempotency_key: str) -> None:
        self.adapter = adapter
        self.target = target
        self.idempotency_key = idempotency_key
        self.messages: list[SentMessage] = []  # what the chat shows for this reply, in order
        self._text = ""
        self._state = _OPEN
        self._delivered = False
        self._dirty = asyncio.Event()
        self._pump_task: asyncio.Task[Any] | None = None
        self._lock = asyncio.Lock()  # serialises finish/abort on this stream
        self._tag = ("stream", id(self), idempotency_key)
        caps = adapter.capabilities
        self._native = adapter.uses_native_stream(target)
        self._native_id: str | None = None
        self._native_sent = ""  # text already appended to the native stream
        self._interim = caps.can_edit or self._native
        cursor = adapter.stream_cursor
        self._cursor = cursor
        self._frame_limit = caps.max_message_length - adapter.measure(cursor)

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
            if self._native and self._native_id is not None:
                await self._fall_back_from_native()
            self._text = ""
            self._pump_task = None
            self._state = _OPEN

    async def finish(self, text: str) -> None:
        async with self._lock:
            if self._delivered or self._state == _ABORTED:
                return
            delivered = await self.adapter.deliver_once(self.idempotency_key, lambda: self._deliver_final(text))
            if not delivered and not self._delivered:
                # Another stream with this key already delivered the final: retire our interim frames.
                await self._stop_interim()
                for message in reversed(self.messages):
                    await self.adapter._delete_quietly(self.target, message)
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
            if note:
                await self.adapter.send(self.target, note, idempotency_key=self.idempotency_key)

    # -- final delivery -----------------------------------------------------------------------------
    async def _deliver_final(self, text: str) -> list[str]:
        await self._stop_interim()
        adapter = self.adapter
        parts = adapter.render_parts(text)
        if self._native and self._native_id is not None:
            await self._finish_native(text)
            if self._delivered:
                return [self._native_id]
        if not parts:
            parts = adapter.render_parts(text.strip() or "…")
        sent = await adapter.deliver_parts(self.target, parts, self.messages)
        self._delivered = True
        self._state = _FINISHED
        return [m.id for m in sent]

    async def _finish_native(self, text: str) -> None:
        """Close the native stream; done if the final was a continuation that fits one message."""
        adapter, target, stream_id = self.adapter, self.target, self._native_id
        assert stream_id is not None
        continuation = text.startswith(self._native_sent) and adapter.measure(text) <= \
            adapter.capabilities.max_message_length
        tail = text[len(self._native_sent):] if continuation else ""
        await adapter.call(target, lambda: adapter._native_stream_stop(target, stream_id, tail))
        self._native = False
        if continuation:
            self.messages[:] = [SentMessage(stream_id, text, True)]
            self._delivered = True
            self._state = _FINISHED
        else:
            # The stream's message now holds what was streamed; treat it as an interim message.
            self.messages[:] = [SentMessage(stream_id, self._native_sent, True)]

    async def _settle_after_abort(self) -> None:
        adapter, target = self.adapter, self.target
        if self._native_id is not None and self._native:
            stream_id = self._native_id
            await adapter.call(target, lambda: adapter._native_stream_stop(target, stream_id, ""))
            self._native = False
            return
        if self._cursor and self.messages:
            last = self.messages[-1]
            if last.text.endswith(self._cursor):
                bare = last.text[: -len(self._cursor)]
                if bare.strip():
                    self.messages[-1] = await adapter.edit_part(target, last, OutPart(bare, None))
                else:
                    await adapter._delete_quietly(target, last)
                    self.messages.pop()

    async def _stop_interim(self) -> None:
        """Stop the pump; queued interim calls are dropped, a running one completes and is recorded."""
        if self._state == _OPEN:
            self._state = _CLOSING
        self.adapter.scheduler.drop_pending(tag=self._tag)
        self._dirty.set()
        task = self._pump_task
        if task is not None and not task.done():
            await asyncio.wait([task])

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
                        await adapter._edit_raw(target, message.id, text, rendered=False, extras={})
                    return text

                shown = await adapter.call(target, edit, interim=True, merge_key=(self._tag, index),
                                           tag=self._tag)
                if shown is DROPPED:
                    return False
                message.text, message.rendered, message.extras = shown, False, {}
                return True

            async def post(index: int = index, frame: str = frame) -> tuple[str, str]:
                text = self._frame(index, frame)
                return await adapter._send_raw(target, text, rendered=False, extras={}), text

            result = await adapter.call(target, post, interim=True, merge_key=(self._tag, index), tag=self._tag)
            if result is DROPPED:
                return False
            message_id, shown = result
            self.messages.append(SentMessage(message_id, shown))
            return True
        return False

    async def _native_step(self) -> bool:
        adapter, target = self.adapter, self.target

        async def native_call() -> str:
            chunk = self._text[len(self._native_sent):]
            if not chunk:
                return ""
            if self._native_id is None:
                self._native_id = await adapter._native_stream_start(target, chunk)
            else:
                await adapter._native_stream_append(target, self._native_id, chunk)
            self._native_sent += chunk
            return chunk

        if len(self._text) == len(self._native_sent):
            return False
        try:
            chunk = await adapter.call(target, native_call, interim=True, merge_key=(self._tag, "native"),
                                       tag=self._tag)
        except Exception as exc:  # noqa: BLE001
            log.warning("native streaming failed in %s (%s); falling back to post-then-edit",
                        target.chat_id, exc)
            await self._fall_back_from_native()
            return True
        return bool(chunk)

    async def _fall_back_from_native(self) -> None:

        self._native = False
        self._interim = self.adapter.capabilities.can_edit
        stream_id, self._native_id = self._native_id, None
        if stream_id is None:
            return
        adapter, target = self.adapter, self.target
        try:  # close the platform stream so its message can be edited like any other
            await adapter.call(target, lambda: adapter._native_stream_stop(target, stream_id, ""))
        except Exception as exc:  # noqa: BLE001
            log.warning("could not close native stream %s: %s", stream_id, exc)
        self.messages[:] = [SentMessage(stream_id, self._native_sent, True)]
