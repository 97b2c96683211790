"""What a platform gives the outbound machinery: its calls, one each, with no retries and no pacing.

The outbound side (`adapters.delivery.Outbound`) owns these contracts and composes pacing, the delivery
ledger, splitting and rendering around them, so a platform writes only what talks to its API. Each
call translates the SDK's rate-limit answer into ``PlatformError(..., retry_after=seconds)`` and other
refusals into `PlatformError`: the pacer waits out the first and the engine only ever sees the second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import OutgoingFile

__all__ = ["FileTransport", "NativeStream", "NoTransport", "Transport"]


class NativeStream(Protocol):
    """A platform's own streaming of one growing message (Slack's ``chat.startStream`` family)."""

    async def start(self, target: ReplyTarget, markdown: str) -> str:
        """Open a stream in `target`'s thread with a first chunk; return its message id."""
        ...

    async def append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None: ...

    async def stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        """Close the stream, appending `markdown` (may be empty) first."""
        ...


class Transport(Protocol):
    """The four calls every platform has, and its native stream where it has one."""

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        """Post `text` to `target` (its thread, replying to `reply_to_id` if the platform does that) and
        return the new message id.

        `rendered=True`: `text` and `extras` come from the platform's renderer (Telegram: the entities, no
        parse mode). `rendered=False`: show `text` literally — interim frames and the markup fallback.
        Either way, model text never mentions everyone."""
        ...

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        """Replace the text of a message. "Message is not modified" is success; raise `PlatformError` only
        when the message cannot be edited (then the final is sent anew)."""
        ...

    async def delete(self, target: ReplyTarget, message_id: str) -> None: ...

    async def typing(self, target: ReplyTarget) -> None: ...

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        """The platform's native stream for a reply to `target`, or None to post and edit."""
        ...


class FileTransport(Protocol):
    """A platform's upload of one file into a chat: one call (its steps, where the platform has several),
    no retry and no pacing; a 429 is ``PlatformError(..., retry_after=seconds)`` as for every call."""

    def max_file_bytes(self, media_type: str) -> int:
        """The platform's documented limit for a file of this type sent by a bot."""
        ...

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        """Post `file` (with its caption) to `target`, in its thread; return the new message's id."""
        ...


class NoTransport:
    """The transport of an adapter that only renders (it reaches no platform): every call is refused."""

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        raise PlatformError("this adapter has no platform to send to")

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        raise PlatformError("this adapter has no platform to send to")

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        raise PlatformError("this adapter has no platform to send to")

    async def typing(self, target: ReplyTarget) -> None:
        raise PlatformError("this adapter has no platform to send to")

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        return None
