"""Writing a growing answer into platform-native streams (Slack `chat.startStream/appendStream/stopStream`),
one message after another.

A native stream only appends: what went out cannot be taken back or re-cut later. So the cut between two
messages is chosen the moment the open message would outgrow its limit, at the last paragraph, line or
word boundary that still fits; a code block open at the cut is closed in that message and reopened with
the same opener in the next one, so every message renders on its own. Blank lines at a cut are dropped;
nothing else is lost, and the messages read in order give back the answer.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from adapters.parts import SentMessage
from adapters.splitting import Fence, find_fences
from adapters.transport import NativeStream
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget

__all__ = ["NO_NATIVE_STREAM", "NativeStreamWriter"]

_BOUNDARIES = (re.compile(r"\n[ \t]*\n"), re.compile(r"\n"), re.compile(r"[ \t]"))
_MIN_FILL = 0.5  # a boundary is used only if the message it ends is at least half full


class _NoNativeStream:
    """The stream of a reply that posts and edits: a writer on it is never started."""

    async def start(self, target: ReplyTarget, markdown: str) -> str:
        raise PlatformError("this reply has no native stream")

    async def append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        raise PlatformError("this reply has no native stream")

    async def stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        raise PlatformError("this reply has no native stream")


NO_NATIVE_STREAM: NativeStream = _NoNativeStream()


class NativeStreamWriter:
    """Keeps the chat in step with an answer that only grows. `messages` are the streams' messages in
    order (the last one may still be open); `consumed` is how much of the answer they hold."""

    def __init__(self, stream: NativeStream, target: ReplyTarget, *, limit: int,
                 on_new_message: Callable[[Sequence[SentMessage]], Awaitable[None]]) -> None:
        self.stream = stream
        self.target = target
        self.limit = limit
        self.on_new_message = on_new_message
        self.messages: list[SentMessage] = []
        self.consumed = 0
        self._open: str | None = None  # id of the stream still open, if any
        self._carry = ""  # a code fence opener the next message starts with

    @property
    def started(self) -> bool:
        return bool(self.messages)

    async def write(self, answer: str, *, final: bool = False) -> None:
        """Append `answer[consumed:]`, starting new messages as the open one fills up; `final` also
        closes the last stream (its last piece goes with the closing call)."""
        pending = answer[self.consumed:]
        while pending:
            shown = self._carry if self._open is None else self.messages[-1].text
            room = self.limit - len(shown)
            if len(pending) <= room - (0 if final else self.limit // _ENDGAME):
                await self._append(pending, last=final)
                self.consumed += len(pending)
                return
            # Near the end of a message, text is not appended blindly (a chunk may end mid-word): the
            # message ends at the last boundary that fits, and the rest starts the next one.
            cut = _cut(pending, room - _CLOSER_ROOM, len(shown), self.limit)
            head = pending[:cut]
            fence = _open_fence(shown + head)
            closing = ("\n" if not head.endswith("\n") else "") + fence.closer if fence is not None else ""
            if head.rstrip() or closing:
                await self._append(head.rstrip(" \t") + closing)
            await self.close()
            rest = pending[cut:]
            # The boundary itself goes; inside a code block only its newline (indentation is content).
            skipped = len(rest) - len(rest.lstrip()) if fence is None else int(rest.startswith("\n"))
            self.consumed += cut + skipped
            pending = rest[skipped:]
            self._carry = fence.opener + "\n" if fence is not None else ""
        if final:
            await self.close()

    async def close(self) -> None:
        """Stop the open stream, if any; what it shows stays."""
        stream_id, self._open = self._open, None
        if stream_id is not None:
            await self.stream.stop(self.target, stream_id, "")

    async def _append(self, chunk: str, *, last: bool = False) -> None:
        if self._open is None:
            text, self._carry = self._carry + chunk, ""
            self._open = await self.stream.start(self.target, text)
            self.messages.append(SentMessage(self._open, text, True))
            await self.on_new_message(self.messages)
            if last:
                await self.close()
        elif last:
            stream_id, self._open = self._open, None
            await self.stream.stop(self.target, stream_id, chunk)
            self.messages[-1].text += chunk
        else:
            await self.stream.append(self.target, self._open, chunk)
            self.messages[-1].text += chunk


_CLOSER_ROOM = 16  # room kept for a closing fence line at a cut
_ENDGAME = 10  # the last tenth of a message is only filled up to a boundary


def _cut(pending: str, room: int, shown: int, limit: int) -> int:
    """Where to end the open message: after the last boundary that fits and fills it reasonably."""
    room = max(0, room)
    window = pending[:room + 1]
    for boundary in _BOUNDARIES:
        ends = [m.start() for m in boundary.finditer(window) if m.start() <= room]
        if ends and shown + ends[-1] >= limit * _MIN_FILL:
            return ends[-1]
    return room


def _open_fence(text: str) -> Fence | None:
    fences = find_fences(text)
    return fences[-1] if fences and not fences[-1].closed else None
