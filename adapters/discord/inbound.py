"""Discord messages in, `InboundMessage`s out: which messages are the bot's to answer, and where.

A guild channel is shared by people talking to each other, so the bot answers there only when addressed
(mentioned, by name or through its managed role, or replied to). With threads on it then opens a thread
on that message, so the conversation has a place of its own that it can follow without further mentions.
A DM is always addressed to the bot. Whether the person may be answered at all is the engine's call
(`EnginePort.admit`); what this module reports is the facts: who, where, whether it was a DM, whether
they hold the configured admin role, and whether the operator listed the server (only there may the engine
count the role). Servers the operator did not list are not read at all.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import discord

from adapters.discord.outbound import Bounded
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

if TYPE_CHECKING:
    from adapters.discord.host import DiscordHost as DiscordAdapter

log = logging.getLogger(__name__)

THREAD_NAME_LIMIT = 100
THREAD_ALREADY_EXISTS = 160004  # Discord's error code when the message already has a thread
CONTENT_INTENT_HINT = (
    "Discord delivered a message without its text: the bot lacks the Message Content intent. Enable "
    "'Message Content Intent' in the Discord developer portal (Applications → your app → Bot → Privileged "
    "Gateway Intents) and restart; until then the bot only sees messages that mention it.")


def place(channel: Any, channel_id: int | None, guild_id: int | None) -> tuple[ChatKind, str, str | None]:
    """(kind, chat id, thread id) of a channel: a thread's chat is its parent, so goals and sessions of a
    channel can find their threads."""
    if guild_id is None:
        return ChatKind.DM, str(channel_id), None
    if isinstance(channel, discord.Thread):
        return ChatKind.THREAD, str(channel.parent_id), str(channel.id)
    return ChatKind.CHANNEL, str(channel_id), None


def holds_role(user: Any, role: str | None) -> bool:
    """Whether a guild member holds `role`. Asked afresh for every message, so taking the role away
    takes effect at once; outside a guild nobody holds one."""
    return bool(role) and isinstance(user, discord.Member) and any(r.name == role for r in user.roles)


def mentions(message: discord.Message, me: discord.ClientUser) -> bool:
    if any(user.id == me.id for user in message.mentions):
        return True
    return any(role.tags is not None and role.tags.bot_id == me.id for role in message.role_mentions)


def replies_to(message: discord.Message, me: discord.ClientUser) -> bool:
    ref = message.reference
    if ref is None or ref.message_id is None:
        return False
    resolved = ref.resolved if isinstance(ref.resolved, discord.Message) else ref.cached_message
    return resolved is not None and resolved.author.id == me.id


def missing_content(message: discord.Message) -> bool:
    """Nothing to read at all: the sign that the Message Content intent is off."""
    return (not message.content and not message.attachments and not message.embeds
            and not message.stickers and getattr(message, "poll", None) is None)


def clean_text(message: discord.Message, me: discord.ClientUser) -> str:
    """The text with the bot's own mention removed (the model need not read it) and other mentions made
    readable, since the model cannot resolve ``<@123>``."""
    text = re.sub(rf"<@!?{me.id}>", "", message.content)
    for user in message.mentions:
        if user.id != me.id:
            text = re.sub(rf"<@!?{user.id}>", "@" + user.display_name, text)
    for role in message.role_mentions:
        replacement = "" if role.tags is not None and role.tags.bot_id == me.id else "@" + role.name
        text = text.replace(f"<@&{role.id}>", replacement)
    for channel in message.channel_mentions:
        text = text.replace(f"<#{channel.id}>", "#" + getattr(channel, "name", str(channel.id)))
    return text.strip()


def thread_name(message: discord.Message, me: discord.ClientUser) -> str:
    """The question's first line, so the channel's thread list reads as a list of topics."""
    text = clean_text(message, me)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    name = first or f"Chat with {message.author.display_name}"
    if len(name) > THREAD_NAME_LIMIT - 10:
        name = name[: THREAD_NAME_LIMIT - 11].rstrip() + "…"
    return name


class MessageReceiver:
    """Turns gateway MESSAGE_CREATE events into engine messages; remembers the threads it follows."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        self.adapter = adapter
        self.threads: Bounded[int, bool] = Bounded(10_000)  # followed beyond the bot's own threads
        self._content_hint_logged = False

    async def on_message(self, message: discord.Message) -> None:
        arrived = time.monotonic()  # before the calls below (admission, a thread), which are the gateway's time too
        adapter = self.adapter
        client = adapter.client
        if client is None or client.user is None or not adapter.receiving:
            return
        me = client.user
        if message.author.id == me.id or message.webhook_id is not None:
            return
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return
        if message.guild is None:
            await self._on_dm(message, arrived)
            return
        if not adapter.serves(message.guild.id, message.guild.name):
            return
        if missing_content(message):
            self._hint_content_intent()
            return
        channel: Any = message.channel
        if isinstance(channel, discord.PartialMessageable):
            with contextlib.suppress(discord.HTTPException):
                channel = await client.fetch_channel(channel.id)
        addressed = mentions(message, me) or replies_to(message, me)
        if isinstance(channel, discord.Thread):
            following = channel.owner_id == me.id or channel.id in self.threads
            if not (addressed or following):
                return
            if not (await adapter.admit(message.author, channel.id, direct=False)).allowed:
                return
            self.threads[channel.id] = True
            await self._submit(message, ChatKind.THREAD, str(channel.parent_id), str(channel.id), addressed,
                               arrived)
            return
        if not addressed:
            return
        if not (await adapter.admit(message.author, channel.id, direct=False)).allowed:
            return
        kind, thread_id = ChatKind.CHANNEL, None
        if adapter.options.threads:
            thread_id = await self._open_thread(message, me)
            if thread_id is not None:
                kind = ChatKind.THREAD
        await self._submit(message, kind, str(channel.id), thread_id, True, arrived)

    async def _on_dm(self, message: discord.Message, arrived: float) -> None:
        if missing_content(message):
            return  # DMs carry their text even without the Message Content intent: nothing to answer
        channel_id = str(message.channel.id)
        decision = await self.adapter.admit(message.author, message.channel.id, direct=True)
        if decision.reply:
            target = ReplyTarget(self.adapter.platform, self.adapter.account, channel_id)
            try:
                await self.adapter.send(target, decision.reply)
            except Exception as exc:  # noqa: BLE001 - the stranger stays unanswered; nothing else depends on it
                log.warning("could not answer Discord user %s: %s", message.author.id, exc)
        if decision.allowed:
            await self._submit(message, ChatKind.DM, channel_id, None, True, arrived)

    def _hint_content_intent(self) -> None:
        if not self._content_hint_logged:
            self._content_hint_logged = True
            log.warning(CONTENT_INTENT_HINT)

    async def _open_thread(self, message: discord.Message, me: discord.ClientUser) -> str | None:
        """A thread on the message; None when threads cannot be used here (then the channel it is)."""
        try:
            thread = await message.create_thread(name=thread_name(message, me),
                                                 auto_archive_duration=self.adapter.options.thread_auto_archive_minutes)
        except discord.HTTPException as exc:
            if exc.code == THREAD_ALREADY_EXISTS:  # e.g. the event was replayed: the thread has the message's id
                self.threads[message.id] = True
                return str(message.id)
            log.warning("could not open a Discord thread in channel %s (%s); answering in the channel",
                        message.channel.id, exc)
            return None
        self.threads[thread.id] = True
        return str(thread.id)

    async def _submit(self, message: discord.Message, kind: ChatKind, chat_id: str, thread_id: str | None,
                      mentioned: bool, arrived: float) -> None:
        adapter = self.adapter
        me = adapter.me()
        text = clean_text(message, me) or ("" if message.attachments else f"@{me.display_name}")
        ref = message.reference.message_id if message.reference and message.reference.message_id else None
        msg = InboundMessage(
            platform=adapter.platform, account=adapter.account, chat_kind=kind, chat_id=chat_id,
            thread_id=thread_id, user_id=str(message.author.id), user_name=message.author.display_name,
            text=text, message_id=str(message.id), mentioned=mentioned, reply_to_id=str(ref) if ref else None,
            received_at=message.created_at, arrived=arrived,
            platform_admin=holds_role(await self._member(message), adapter.options.admin_role),
            place_listed=message.guild is not None and adapter.options.guild_allowed(message.guild.id),
            raw={"guild_id": message.guild.id if message.guild else None, "channel_id": message.channel.id,
                 "message_id": message.id})
        if message.attachments and adapter.files is not None:  # fetched in the turn, once the inbox recorded them
            msg = replace(msg, attachments=adapter.files.offered(message))
            if not msg.text.strip() and not msg.attachments:
                return
        await adapter.engine.handle(msg)

    async def _member(self, message: discord.Message) -> Any:
        """The author as a member of the message's guild, where the admin role is asked: a message read back
        over REST shows only the user (the gateway sends the member with it)."""
        author = message.author
        if message.guild is None or isinstance(author, discord.Member) or not self.adapter.options.admin_role:
            return author
        with contextlib.suppress(discord.HTTPException):
            return message.guild.get_member(author.id) or await message.guild.fetch_member(author.id)
        return author
