"""Is the bot in a Discord channel (or thread) named by id, and may it post there? The channel is fetched over
REST (fresh permission overwrites), its server must be one the bot serves and is connected to, and the bot's
permissions there (discord.py's `permissions_for` of the bot's member) must let it see the channel and send
messages (in a thread: send messages in threads); so must the person the bot posts for, a member of that server.
An unknown or hidden channel is absent; a server error is raised, to be asked again later."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import discord

from hermes_engine.ports.inbound import ChatKind
from hermes_engine.ports.reply import ChatPresence

_NAMED = re.compile(r"^(?:<#(\d{15,21})>|(\d{15,21}))$")
SPELLING = ("a Discord channel is named by its id, such as 112233445566778899, or a mention, such as "
            "<#112233445566778899>")


def reference(named: str) -> str | None:
    """The channel id in what a person wrote: the id, or a channel mention."""
    match = _NAMED.match(named.strip())
    return next(group for group in match.groups() if group) if match else None


async def chat_presence(client: discord.Client | None, named: str, serves: Callable[[int, str], bool],
                        writer: str | None = None) -> ChatPresence:
    """The bot's presence in the channel `named` (an id or a mention) names, through discord.py."""
    channel_id = reference(named)
    if channel_id is None:
        return ChatPresence(False, why=SPELLING)
    if client is None or client.user is None:
        return ChatPresence(False, why="I am not connected to Discord yet")
    try:
        channel: Any = await client.fetch_channel(int(channel_id))
    except discord.NotFound:
        return ChatPresence(False, why="Discord shows me no such channel")
    except discord.Forbidden:
        return ChatPresence(False, why="I cannot see that channel")
    if isinstance(channel, (discord.DMChannel, discord.GroupChannel)):
        return ChatPresence(True, str(channel.id), ChatKind.DM)
    guild = client.get_guild(int(getattr(channel, "guild_id", 0) or getattr(channel.guild, "id", 0)))
    if guild is None or not serves(guild.id, guild.name):
        return ChatPresence(False, why="that channel is in a server I do not serve")
    me = guild.me or await guild.fetch_member(client.user.id)
    thread = isinstance(channel, discord.Thread)
    chat_id, thread_id = (str(channel.parent_id), str(channel.id)) if thread else (str(channel.id), None)
    kind = ChatKind.THREAD if thread else ChatKind.CHANNEL
    if not _may_send(channel.permissions_for(me), thread):
        return ChatPresence(False, chat_id, kind, why="I may not send messages there", thread_id=thread_id)
    if writer is not None and writer.isdigit():
        try:
            member = await guild.fetch_member(int(writer))
        except discord.NotFound:
            return ChatPresence(False, chat_id, kind, why="you are not a member of that server", thread_id=thread_id)
        if not _may_send(channel.permissions_for(member), thread):
            return ChatPresence(False, chat_id, kind, why="you may not send messages there", thread_id=thread_id)
    return ChatPresence(True, chat_id, kind, thread_id=thread_id)


def _may_send(permissions: discord.Permissions, thread: bool) -> bool:
    return permissions.view_channel and (permissions.send_messages_in_threads if thread else
                                         permissions.send_messages)
