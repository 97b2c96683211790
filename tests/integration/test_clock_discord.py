"""Reminders in a Discord server, end to end: the real discord.py client against the fake Discord (REST and the
websocket gateway on loopback), the fake LLM calling `cronjob`, the real gateway and its clock on SQLite. A
reminder arrives once where it was made: in the channel (threads off) or in the thread the bot opened."""

from __future__ import annotations

import asyncio
import json
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import make_profile
from fakes.fake_discord import FakeDiscord, FakeMessage
from fakes.fake_llm import Reply
from kanban_kit import shipped_profile

from adapters.discord import PLATFORM

REMINDER = "⏰ Reminder: stretch"
ASK = "remind me in 2 seconds to stretch"


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_clock(engine, fake_discord, monkeypatch):
    """`await discord_clock(threads=...)`: the Discord bot with the tools of the shipped Discord profile (the
    clock among them), connected to the fake."""
    discord_environment(monkeypatch, fake_discord)
    started: list[Any] = []

    async def make(*, threads: bool) -> Any:
        toolsets = shipped_profile("discord-server-helper").toolsets
        e = await engine(profile=make_profile(toolsets=toolsets), platform="discord")
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({**FAST, "threads": threads}), None,
                                 os.environ)
        e.gateway.attach(adapter)
        started.append(adapter)
        await adapter.start()
        return e

    yield make
    for adapter in started:
        await adapter.stop()


def schedules(request: Any) -> Reply:
    """A fake-LLM responder: the person's ask becomes one `cronjob` call (Discord messages reach the model
    labelled with their speaker); once the tool answered, the model repeats its answer; anything else is
    answered "Noted."."""
    if request.turn_tool_results:
        return Reply(text=request.turn_tool_results[-1])
    if request.last_user_text.endswith(ASK):
        return Reply(tool_calls=[("cronjob", json.dumps({
            "action": "create", "name": "stretch", "message": "stretch", "schedule": "in 2 seconds"}))])
    return Reply(text="Noted.")


def texts(fake: FakeDiscord, channel_id: str) -> list[str]:
    return [m.content for m in fake.bot_messages(channel_id)]


async def shown(fake: FakeDiscord, channel_id: str, pattern: str, timeout: float = 10) -> FakeMessage:
    found = re.compile(pattern)
    return await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(channel_id) if found.search(m.content)), None), timeout,
        f"a bot message matching {pattern!r} in {channel_id}; it shows {texts(fake, channel_id)!r}")


def fires_about_two_seconds_after(confirmation: str, asked: datetime) -> bool:
    said = re.search(r"fires \w{3} \d+ \w{3} \d{4}, (\d\d:\d\d:\d\d) UTC \(UTC\)", confirmation)
    assert said is not None, confirmation
    fires = datetime.combine(asked.date(), datetime.strptime(said.group(1), "%H:%M:%S").time(), UTC)
    return abs(fires - (asked + timedelta(seconds=2))) < timedelta(seconds=3)


async def reminded_once(fake: FakeDiscord, where: str, started: float) -> None:
    """The reminder arrives in `where`, on time, and only once."""
    await shown(fake, where, f"^{re.escape(REMINDER)}$")
    assert asyncio.get_running_loop().time() - started - 2 < 2  # on time, give or take a tick and the fake
    await asyncio.sleep(2.5)
    assert texts(fake, where).count(REMINDER) == 1


async def test_a_reminder_made_in_a_server_channel_arrives_once_in_that_channel(discord_clock, fake_discord,
                                                                               fake_llm):
    await discord_clock(threads=False)
    fake_llm.responder = schedules
    channel = fake_discord.channel_id
    asked_at, started = datetime.now(UTC), asyncio.get_running_loop().time()
    await fake_discord.user_says(channel, "alice", ASK, mentions_bot=True)
    confirmation = await shown(fake_discord, channel, r"^Reminder #\d+ set")
    assert fires_about_two_seconds_after(confirmation.content, asked_at)

    await reminded_once(fake_discord, channel, started)
    assert fake_discord.threads() == []  # in the channel itself
    await fake_discord.user_says(channel, "alice", "done, what did you remind me of?", mentions_bot=True)
    await shown(fake_discord, channel, r"^Noted\.$")
    answered = [r for r in fake_llm.requests if r.last_user_text.endswith("what did you remind me of?")]
    assert REMINDER in answered[-1].texts  # the reply has the reminder in context


async def test_a_reminder_made_in_a_thread_the_bot_opened_arrives_once_in_that_thread(discord_clock, fake_discord,
                                                                                     fake_llm):
    await discord_clock(threads=True)
    fake_llm.responder = schedules
    started = asyncio.get_running_loop().time()
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", ASK, mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked), what="a thread on the message")
    await shown(fake_discord, thread["id"], r"^Reminder #\d+ set")

    await reminded_once(fake_discord, thread["id"], started)
    assert fake_discord.bot_messages(fake_discord.channel_id) == []  # nothing in the channel itself
    await fake_discord.user_says(thread["id"], "bob", "what was that about?")  # no mention needed in the thread
    await shown(fake_discord, thread["id"], r"^Noted\.$")
    answered = [r for r in fake_llm.requests if r.last_user_text.endswith("what was that about?")]
    assert REMINDER in answered[-1].texts  # the thread's shared conversation has it
