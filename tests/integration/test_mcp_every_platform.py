"""A profile with `mcp_servers` gives the agent those tools on every platform: the real Telegram, Slack and
Discord adapters against their fakes, each in front of a gateway whose profile names the small SDK MCP
server (stdio). The model calls the server's echo tool and answers from its result; the person sees that
answer in a DM."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import discord
import pytest
from aiohttp import web
from discord.gateway import DiscordWebSocket
from engine_harness import make_profile
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import Reply
from fakes.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from fakes.fake_telegram import FakeTelegram

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
ANSWER = "The server answered: fake says: hello from every platform"
TIMEOUT = 30  # a hang guard: the server starts with the gateway

# python-telegram-bot warns about its own RetryAfter.retry_after type change when it builds the error.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

Say = Callable[[str], Awaitable[None]]
Shown = Callable[[str], Awaitable[None]]  # waits until the person sees this text


def respond(request: Any) -> Reply:
    """Call the server's echo tool, then answer with the line it said."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if results:
        said = next((line for line in results[0].splitlines() if "says:" in line), results[0])
        return Reply(text=f"The server answered: {said}")
    return Reply(tool_calls=[("fake__echo", {"text": "hello from every platform"})])


def profile_for(person: str) -> Any:
    server = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20}
    return make_profile(mcp_servers={"fake": server}, access={"allowed_users": [person], "pairing": False})


@asynccontextmanager
async def telegram_dm(engine: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Say, Shown]]:
    from adapters.telegram import PLATFORM

    async with FakeTelegram() as fake:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake.token)
        monkeypatch.setenv("TELEGRAM_API_BASE_URL", fake.base_url)
        e = await engine(profile=profile_for("4242"))
        options = {"edit_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2, "poll_backoff_max": 1.0}
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        try:
            await asyncio.wait_for(adapter.ready.wait(), 5)

            async def say(text: str) -> None:
                fake.user_says(4242, 4242, text)

            async def shown(text: str) -> None:
                await fake.wait_for_text(4242, text, TIMEOUT)

            yield say, shown
        finally:
            await adapter.stop()


@asynccontextmanager
async def slack_dm(engine: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Say, Shown]]:
    from adapters.slack import PLATFORM

    async with FakeSlack() as fake:
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
        monkeypatch.setenv("SLACK_API_URL", fake.api_url)
        e = await engine(profile=profile_for("UALICE"), platform="slack")
        http = web.Application()
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({"edit_interval_seconds": 0.02}),
                                 http, os.environ)
        e.gateway.attach(adapter)
        runner = web.AppRunner(http, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        fake.events_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/slack/events"
        await adapter.start()
        try:
            async def say(text: str) -> None:
                await fake.say("UALICE", "DALICE", text)

            async def shown(text: str) -> None:
                await fake.wait_for(lambda: any(m.visible == text for m in fake.bot_messages("DALICE")), TIMEOUT)

            yield say, shown
        finally:
            await adapter.stop()
            await runner.cleanup()


@asynccontextmanager
async def discord_dm(engine: Any, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Say, Shown]]:
    from adapters.discord import PLATFORM

    # The adapter sets these class attributes (discord.py's own configuration points); restore them after.
    monkeypatch.setattr(discord.http.Route, "BASE", discord.http.Route.BASE)
    monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", DiscordWebSocket.DEFAULT_GATEWAY)
    async with FakeDiscord() as fake:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", fake.token)
        monkeypatch.setenv("DISCORD_API_BASE_URL", fake.url)
        monkeypatch.setenv("DISCORD_GATEWAY_URL", fake.gateway_url)
        alice = fake.user("alice")
        e = await engine(profile=profile_for(alice["id"]))
        options = {"edit_interval_seconds": 0.05, "guild_ready_timeout": 0.05, "ready_timeout": 10}
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        dm = fake.dm_channel(alice)
        try:
            async def say(text: str) -> None:
                await fake.user_says(dm["id"], alice, text)

            async def shown(text: str) -> None:
                await fake.wait_for(lambda: any(m.content == text for m in fake.bot_messages(dm["id"])), TIMEOUT,
                                    f"{text!r} in the DM")

            yield say, shown
        finally:
            await adapter.stop()


DMS = {"telegram": telegram_dm, "slack": slack_dm, "discord": discord_dm}


@pytest.mark.parametrize("platform", list(DMS))
async def test_the_profiles_mcp_tools_answer_the_person_on_every_platform(platform, engine, fake_llm, monkeypatch):
    fake_llm.responder = respond
    async with DMS[platform](engine, monkeypatch) as (say, shown):
        await say("ask the server to say hello")
        await shown(ANSWER)
    tool_calls = [c["function"]["name"] for r in fake_llm.requests for m in r.messages
                  for c in m.get("tool_calls") or ()]
    assert tool_calls == ["fake__echo"]
    assert "fake__echo" in [t["function"]["name"] for t in fake_llm.requests[0].tools]
