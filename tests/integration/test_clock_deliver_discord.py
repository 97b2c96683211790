"""A reminder made in a Discord DM and delivered to a server channel named by mention: the real discord.py
client against the fake Discord (the channel fetched over REST, the bot's `send_messages` there read from its
roles and the channel's overwrites), the fake LLM calling `cronjob`, the real gateway and clock on SQLite."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import make_profile
from fakes.fake_discord import FakeDiscord, FakeMessage
from fakes.fake_llm import Reply
from kanban_kit import shipped_profile

from adapters.discord import PLATFORM

REMINDER = "⏰ Reminder: standup"
SEND_MESSAGES = 1 << 11


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_clock(engine, fake_discord, monkeypatch):
    """The Discord bot with the shipped Discord profile's tools, Alice allowed to write to it directly, and a
    second channel, #announcements, to deliver to."""
    discord_environment(monkeypatch, fake_discord)
    alice = fake_discord.user("alice")
    announcements = fake_discord.add_channel(fake_discord.guild_id, "announcements", position=1)
    profile = make_profile(toolsets=shipped_profile("discord-server-helper").toolsets,
                           access={"allowed_users": [alice["id"]]})
    e = await engine(profile=profile, platform="discord")
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({**FAST, "threads": False}), None,
                             os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    yield e, fake_discord.dm_channel(alice)["id"], announcements
    await adapter.stop()


def schedules(deliver: str, schedule: str = "in 2 seconds"):
    def respond(request: Any) -> Reply:
        if request.turn_tool_results:
            return Reply(text=request.turn_tool_results[-1])
        if request.last_user_text.endswith("remind the server"):
            return Reply(tool_calls=[("cronjob", json.dumps({
                "action": "create", "name": "standup", "message": "standup", "schedule": schedule,
                "deliver": deliver}))])
        return Reply(text="Noted.")
    return respond


def texts(fake: FakeDiscord, channel_id: str) -> list[str]:
    return [m.content for m in fake.bot_messages(channel_id)]


async def shown(fake: FakeDiscord, channel_id: str, pattern: str, timeout: float = 10) -> FakeMessage:
    found = re.compile(pattern)
    return await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(channel_id) if found.search(m.content)), None), timeout,
        f"a bot message matching {pattern!r} in {channel_id}; it shows {texts(fake, channel_id)!r}")


def deny_sending(fake: FakeDiscord, channel: dict[str, Any]) -> None:
    channel["permission_overwrites"] = [{"id": fake.bot["id"], "type": 1, "allow": "0", "deny": str(SEND_MESSAGES)}]


async def test_a_reminder_made_in_a_dm_for_a_server_channel_arrives_there_once(discord_clock, fake_discord,
                                                                              fake_llm):
    e, dm, announcements = discord_clock
    fake_llm.responder = schedules(f"<#{announcements['id']}>")
    await fake_discord.user_says(dm, "alice", "remind the server")
    await shown(fake_discord, dm, r"^Reminder #\d+ set")
    await shown(fake_discord, announcements["id"], f"^{re.escape(REMINDER)}$")
    await asyncio.sleep(2)
    assert texts(fake_discord, announcements["id"]).count(REMINDER) == 1
    assert REMINDER not in texts(fake_discord, dm)

    await fake_discord.user_says(announcements["id"], "alice", "what was that?", mentions_bot=True)
    await shown(fake_discord, announcements["id"], r"^Noted\.$")
    answered = [r for r in fake_llm.requests if r.last_user_text.endswith("what was that?")]
    assert REMINDER in answered[-1].texts  # the channel's conversation has the reminder


async def test_a_channel_where_the_bot_may_not_send_is_refused_in_one_sentence(discord_clock, fake_discord,
                                                                              fake_llm):
    e, dm, announcements = discord_clock
    deny_sending(fake_discord, announcements)
    fake_llm.responder = schedules(announcements["id"])
    await fake_discord.user_says(dm, "alice", "remind the server")
    await shown(fake_discord, dm, r"^Error: I cannot post in \d+: I may not send messages there\.$")
    assert await e.store.list_jobs(e.gateway.bot) == []


async def test_a_channel_the_bot_lost_before_the_run_is_refused_and_paused(discord_clock, fake_discord, fake_llm):
    e, dm, announcements = discord_clock
    fake_llm.responder = schedules(announcements["id"], "in 3 seconds")
    await fake_discord.user_says(dm, "alice", "remind the server")
    await shown(fake_discord, dm, r"^Reminder #\d+ set")
    deny_sending(fake_discord, announcements)

    job = None
    for _ in range(100):
        jobs = await e.store.list_jobs(e.gateway.bot)
        if jobs and jobs[0].state == "paused":
            job = jobs[0]
            break
        await asyncio.sleep(0.1)
    assert job is not None and (job.last_outcome or "").startswith("refused: I cannot post in"), job
    await asyncio.sleep(1)
    assert texts(fake_discord, announcements["id"]) == []


async def test_a_channel_the_owner_may_not_send_in_is_refused_though_the_bot_may(discord_clock, fake_discord,
                                                                                fake_llm):
    e, dm, announcements = discord_clock
    alice = fake_discord.user("alice")
    announcements["permission_overwrites"] = [
        {"id": alice["id"], "type": 1, "allow": "0", "deny": str(SEND_MESSAGES)}]
    fake_llm.responder = schedules(announcements["id"])
    await fake_discord.user_says(dm, "alice", "remind the server")
    await shown(fake_discord, dm, r"^Error: I cannot post in \d+: you may not send messages there\.$")
    assert await e.store.list_jobs(e.gateway.bot) == []
