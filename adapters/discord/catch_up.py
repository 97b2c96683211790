"""What was posted while the bot had no gateway session, read back over REST when a new one is ready.

Discord sends a gateway event once, to the session connected then. A session resumed after a short drop
is sent what it missed (discord.py RESUMEs by itself), but a new one (a restart, another replica taking
the connection over, a session Discord would not resume) never hears of what was posted in between. So
when a new session is ready the adapter reads back, in each conversation where the inbox recorded a
person's message lately, what was posted after the last one recorded there, and hands each message, oldest
first, to the receiver as if it had just come: the same filters, mention rules and admission, and the
inbox drops what it already has (a message seen live and read back is answered once).

Bounded so that a start cannot flood Discord or the model: only conversations written in within
``catch_up_hours`` (the `MAX_CONVERSATIONS` most recent), and in each at most ``catch_up_messages`` of the
newest messages after the mark (those posted during the gap; older ones were seen live). A channel whose
last message id, as Discord gave it, is not newer than the mark is not read at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import discord

from adapters.discord.host import DiscordHost
from hermes_engine.ports.inbound import LastInbound

log = logging.getLogger(__name__)

MAX_CONVERSATIONS = 200


def reading_plan(marks: Iterable[LastInbound]) -> dict[int, int]:
    """Discord channel id → the id after which to read it. A conversation is a channel, a DM or a thread;
    a thread opened on a message has that message's id, so a thread's id also marks how far its parent
    channel was read. Ids that are not Discord's (no number) are passed over."""
    plan: dict[int, int] = {}

    def read(channel: int, after: int) -> None:
        plan[channel] = max(plan.get(channel, 0), after)

    for mark in marks:
        try:
            chat, message = int(mark.chat_id), int(mark.message_id)
            thread = int(mark.thread_id) if mark.thread_id else None
        except ValueError:
            continue
        if thread is None:
            read(chat, message)
        else:
            read(thread, message)
            read(chat, thread)
    return plan


class CatchUp:
    """Reads back, per connection that became ready, what it missed; one reading per shard at a time."""

    def __init__(self, adapter: DiscordHost, hand_over: Callable[[discord.Message], Awaitable[None]]) -> None:
        self.adapter = adapter
        self.hand_over = hand_over  # the receiver's, for live messages too
        self._tasks: dict[int | None, asyncio.Task[None]] = {}

    def start(self, shard_id: int | None = None) -> None:
        """Begin reading back for a new session (of shard `shard_id`, or the whole client); a reading still
        going for it starts over, from the marks as they are now."""
        running = self._tasks.pop(shard_id, None)
        if running is not None:
            running.cancel()
        self._tasks[shard_id] = asyncio.create_task(self._run(shard_id), name=f"discord-catch-up-{shard_id}")

    async def stop(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, shard_id: int | None) -> None:
        adapter = self.adapter
        options = adapter.options
        if options.catch_up_hours <= 0:
            return
        try:
            since = datetime.now(UTC) - timedelta(hours=options.catch_up_hours)
            marks = await adapter.engine.last_inbound(adapter.platform, adapter.account, since=since,
                                                      limit=MAX_CONVERSATIONS)
            read = 0
            for channel_id, after in reading_plan(marks).items():
                channel = await self._channel(channel_id)
                if channel is not None and self._ours(channel, shard_id) and self._may_have_news(channel, after):
                    read += await self._read(channel, after)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - e.g. the store is down: live messages still come
            log.exception("could not read back what Discord sent while the bot was away")
            return
        if read:
            log.info("read back %d Discord message(s) posted while the bot was away", read)

    async def _channel(self, channel_id: int) -> Any:
        client = self.adapter.client
        channel = client.get_channel(channel_id)
        if channel is None:
            try:
                channel = await client.fetch_channel(channel_id)
            except (discord.NotFound, discord.Forbidden):
                return None  # deleted, or the bot was removed: nothing of it to answer
            except discord.HTTPException as exc:
                log.warning("could not look up Discord channel %s to read it back (%s)", channel_id, exc)
                return None
        return channel if isinstance(channel, discord.abc.Messageable) else None

    def _ours(self, channel: Any, shard_id: int | None) -> bool:
        """In a served guild (or a DM), and on the shard whose session this is (DMs are shard 0's)."""
        guild = getattr(channel, "guild", None)
        if guild is not None and not self.adapter.options.guild_allowed(guild.id):
            return False
        return shard_id is None or (guild.shard_id if guild is not None else 0) == shard_id

    @staticmethod
    def _may_have_news(channel: Any, after: int) -> bool:
        last = getattr(channel, "last_message_id", None)
        return last is None or last > after

    async def _read(self, channel: Any, after: int) -> int:
        """Hand over the newest messages after `after`, oldest first; how many were read."""
        try:
            found = [m async for m in channel.history(limit=self.adapter.options.catch_up_messages,
                                                      after=discord.Object(after), oldest_first=False)]
        except discord.HTTPException as exc:
            log.warning("could not read back Discord channel %s (%s)", channel.id, exc)
            return 0
        for message in reversed(found):
            try:
                await self.hand_over(message)
            except Exception:  # noqa: BLE001 - as a live message: logged, the next one is still read
                log.exception("Discord message %s read back could not be handled", message.id)
        return len(found)
