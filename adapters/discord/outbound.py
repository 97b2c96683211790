"""Discord's `Transport`: one REST call each, its refusals as `PlatformError`.

An answer to a slash command must go through the interaction (edit the deferred "thinking…" response,
then follow-ups) while its token lives, and to the channel after that, so the primitives route each call
by the message id they are given. Pacing and retries are not here: the shared outbound scheduler does
them, and discord.py itself waits out exhausted buckets and short 429s.
"""

from __future__ import annotations

import io
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import discord

from adapters.delivery import Lanes
from adapters.render import render_discord
from adapters.splitting import measure
from adapters.transport import NativeStream
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import OutgoingFile

log = logging.getLogger(__name__)

INTERACTION_TOKEN_SECONDS = 15 * 60  # Discord's follow-up window
INTERACTION_MARGIN_SECONDS = 30  # stop using a token a little before it expires
MAX_FILE_BYTES = 10 * 1024 * 1024  # a message's attachments, for a bot in a server without boosts

NO_MENTIONS = discord.AllowedMentions.none()  # model text must never ping anyone
UNREACHABLE = (aiohttp.ClientError, OSError, TimeoutError, discord.DiscordServerError)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Bounded(OrderedDict[K, V]):
    """An insertion-ordered dict that forgets its oldest entries beyond `limit`: the adapter remembers
    threads and interactions for as long as they matter, without growing for the life of the process."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


@dataclass
class PendingInteraction:
    interaction: discord.Interaction
    created: float
    original_used: bool = False

    def usable(self, now: float) -> bool:
        return now - self.created < INTERACTION_TOKEN_SECONDS - INTERACTION_MARGIN_SECONDS


async def call(awaitable: Awaitable[T]) -> T:
    """One discord.py call; its refusals become `PlatformError` (with `retry_after` for rate limits), the
    only error the engine and the scheduler understand."""
    try:
        return await awaitable
    except discord.RateLimited as exc:
        raise PlatformError(f"Discord rate limit: retry after {exc.retry_after:.1f}s",
                            retry_after=exc.retry_after) from exc
    except discord.HTTPException as exc:
        if exc.status == 429:  # a 429 discord.py did not handle (e.g. from Cloudflare, without Via)
            retry = exc.response.headers.get("Retry-After") if exc.response is not None else None
            raise PlatformError(f"Discord rate limit ({exc.text or exc.status})",
                                retry_after=float(retry) if retry else 5.0) from exc
        raise PlatformError(f"Discord refused the call ({exc.status}, code {exc.code}): {exc.text}") from exc
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise PlatformError(f"Discord could not be reached: {exc!r}") from exc


def is_transient(exc: BaseException) -> bool:
    """Server errors and network trouble are worth a retry; a refusal (4xx) is not."""
    cause = exc.__cause__ if isinstance(exc, PlatformError) else exc
    if isinstance(cause, (discord.DiscordServerError, aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError,
                          TimeoutError, ConnectionError)):
        return True
    return isinstance(cause, OSError)


class DiscordOutbound:
    """Sends, edits and deletes through the channel or, while its token lives, the interaction."""

    def __init__(self, client: Callable[[], discord.Client | None]) -> None:
        self._client = client
        self.interactions: Bounded[str, PendingInteraction] = Bounded(2_000)  # inbound id -> interaction
        self._interaction_messages: Bounded[str, PendingInteraction] = Bounded(2_000)  # message id -> same
        self._referenced: Bounded[str, bool] = Bounded(2_000)  # reply_to ids already quoted once

    def remember_interaction(self, message_id: str, interaction: discord.Interaction) -> None:
        """Answers to `message_id` go through this interaction while its token lives."""
        self.interactions[message_id] = PendingInteraction(interaction, time.monotonic())

    def _destination(self, target: ReplyTarget) -> discord.PartialMessageable:
        client = self._client()
        assert client is not None, "the Discord client is not started"
        return client.get_partial_messageable(int(target.thread_id or target.chat_id))

    def _pending(self, key: str | None) -> PendingInteraction | None:
        if key is None:
            return None
        pending = self.interactions.get(key)
        if pending is not None and not pending.usable(time.monotonic()):
            return None  # kept, so the id is still known as an interaction's (never quoted as a message)
        return pending

    async def send(self, target: ReplyTarget, text: str) -> str:
        pending = self._pending(target.reply_to_id)
        if pending is not None:
            try:
                return await self._send_interaction(pending, text)
            except PlatformError as exc:
                if exc.retry_after is not None:
                    raise
                log.warning("Discord interaction answer failed (%s); posting to the channel instead", exc)
                pending.created = float("-inf")  # the token is dead: later parts go to the channel too
        channel = self._destination(target)
        reply_to = target.reply_to_id
        # Quote the question once (the first part), never a thread's own starter or an interaction id.
        if (reply_to and reply_to.isdigit() and reply_to != target.thread_id and reply_to not in self._referenced
                and reply_to not in self.interactions):
            reference = discord.MessageReference(message_id=int(reply_to), channel_id=channel.id,
                                                 fail_if_not_exists=False)
            message = await call(channel.send(text, reference=reference, allowed_mentions=NO_MENTIONS))
            self._referenced[reply_to] = True
        else:
            message = await call(channel.send(text, allowed_mentions=NO_MENTIONS))
        return str(message.id)

    async def _send_interaction(self, pending: PendingInteraction, text: str) -> str:
        interaction = pending.interaction
        message: Any
        if not pending.original_used:
            message = await call(interaction.edit_original_response(content=text, allowed_mentions=NO_MENTIONS))
            pending.original_used = True
        else:
            message = await call(interaction.followup.send(text, wait=True, allowed_mentions=NO_MENTIONS))
        self._interaction_messages[str(message.id)] = pending
        return str(message.id)

    def _live_interaction(self, message_id: str) -> PendingInteraction | None:
        pending = self._interaction_messages.get(message_id)
        return pending if pending is not None and pending.usable(time.monotonic()) else None

    async def edit(self, target: ReplyTarget, message_id: str, text: str) -> None:
        pending = self._live_interaction(message_id)
        if pending is not None:
            await call(pending.interaction.followup.edit_message(int(message_id), content=text,
                                                                 allowed_mentions=NO_MENTIONS))
            return
        message = self._destination(target).get_partial_message(int(message_id))
        await call(message.edit(content=text, allowed_mentions=NO_MENTIONS))

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        pending = self._live_interaction(message_id)
        if pending is not None:
            await call(pending.interaction.followup.delete_message(int(message_id)))
            return
        await call(self._destination(target).get_partial_message(int(message_id)).delete())

    async def typing(self, target: ReplyTarget) -> None:
        await call(self._destination(target).typing())

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        """A message with the file attached (multipart `payload_json` + `files[0]`) and the caption as its
        content: a follow-up of a slash command while its token lives, else in the channel or thread."""
        upload = discord.File(io.BytesIO(file.data), filename=file.name)
        caption = file.caption[:2000] or None
        pending = self._pending(target.reply_to_id)
        message: Any
        if pending is not None:
            message = await call(pending.interaction.followup.send(caption or "", file=upload, wait=True,
                                                                   allowed_mentions=NO_MENTIONS))
        else:
            message = await call(self._destination(target).send(caption, file=upload, allowed_mentions=NO_MENTIONS))
        return str(message.id)


class DiscordLanes(Lanes):
    def key(self, target: ReplyTarget) -> Hashable:
        return (target.account, target.thread_id or target.chat_id)  # a thread is a channel of its own


class DiscordTransport:
    """The `Transport` of one bot. Discord reads Markdown in every message, streamed frames too: plain text
    is escaped as a final is, so what the model wrote shows as written while it streams."""

    def __init__(self, outbound: DiscordOutbound, max_length: int) -> None:
        self.outbound = outbound
        self.max_length = max_length

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        return await self.outbound.send(target, text if rendered else self._as_written(text))

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        await self.outbound.edit(target, message_id, text if rendered else self._as_written(text))

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        await self.outbound.delete(target, message_id)

    async def typing(self, target: ReplyTarget) -> None:
        await self.outbound.typing(target)

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        return None  # Discord has no streaming: replies are posted and edited

    def max_file_bytes(self, media_type: str) -> int:
        return MAX_FILE_BYTES

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        return await self.outbound.send_file(target, file)

    def _as_written(self, text: str) -> str:
        """A frame the escapes would push over the limit goes as it is."""
        shown = render_discord(text)
        return shown if measure(shown, "chars") <= self.max_length else text
