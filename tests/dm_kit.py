"""A person's DM with the bot on each platform: the real Telegram, Slack and Discord adapters against their
fakes, in front of a gateway made with the `engine` fixture, so a test of what a person sees runs on every
platform alike. Each context manager takes the profile to run, made for the person's id on that platform."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from discord_kit import FAST, discord_environment
from fakes.fake_discord import FakeDiscord
from fakes.fake_slack import FakeSlack
from fakes.fake_telegram import FakeTelegram
from slack_kit import serve_slack, slack_environment

from adapters.render import render_discord, render_slack, render_telegram
from hermes_engine.config import BotProfile

TIMEOUT = 30  # a hang guard, not a pace: waits end as soon as the text is shown


@dataclass(frozen=True)
class DM:
    say: Callable[[str], Awaitable[None]]  # the person writes this
    command: Callable[[str, str], Awaitable[None]]  # the person runs /name with text, as the platform offers it
    shown: Callable[[str], Awaitable[None]]  # waits until the person sees this Markdown, as the platform shows it


ProfileFor = Callable[[str], BotProfile]  # the person's id on the platform -> the bot's profile
OpenDM = Callable[[Any, pytest.MonkeyPatch, ProfileFor], Any]


@asynccontextmanager
async def telegram_dm(engine: Any, monkeypatch: pytest.MonkeyPatch, profile_for: ProfileFor) -> AsyncIterator[DM]:
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

            async def command(name: str, text: str) -> None:
                await say(f"/{name} {text}".strip())

            async def shown(markdown: str) -> None:
                await fake.wait_for_text(4242, render_telegram(markdown).text, TIMEOUT)

            yield DM(say, command, shown)
        finally:
            await adapter.stop()


@asynccontextmanager
async def slack_dm(engine: Any, monkeypatch: pytest.MonkeyPatch, profile_for: ProfileFor) -> AsyncIterator[DM]:
    async with FakeSlack() as fake:
        slack_environment(monkeypatch, fake)
        e = await engine(profile=profile_for("UALICE"), platform="slack")
        served = await serve_slack(e, events_from=fake)
        try:
            async def say(text: str) -> None:
                await fake.say("UALICE", "DALICE", text)

            async def command(name: str, text: str) -> None:
                answer = await fake.post_command(f"/{name}", text, channel="DALICE", user="UALICE")
                assert answer.status == 200, answer

            async def shown(markdown: str) -> None:
                text = render_slack(markdown)
                try:
                    await fake.wait_for(lambda: any(m.visible == text for m in fake.bot_messages("DALICE")),
                                        TIMEOUT)
                except TimeoutError:
                    seen = [m.visible for m in fake.bot_messages("DALICE")]
                    raise TimeoutError(f"{text!r} not in the DM, which shows {seen!r}") from None

            yield DM(say, command, shown)
        finally:
            await served.close()


@asynccontextmanager
async def discord_dm(engine: Any, monkeypatch: pytest.MonkeyPatch, profile_for: ProfileFor) -> AsyncIterator[DM]:
    from adapters.discord import PLATFORM

    async with FakeDiscord() as fake:
        discord_environment(monkeypatch, fake)
        alice = fake.user("alice")
        e = await engine(profile=profile_for(alice["id"]))
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        dm = fake.dm_channel(alice)
        try:
            async def say(text: str) -> None:
                await fake.user_says(dm["id"], alice, text)

            async def command(name: str, text: str) -> None:
                await fake.slash(dm["id"], alice, name, {"text": text} if text else None)

            async def shown(markdown: str) -> None:
                text = render_discord(markdown)
                await fake.wait_for(lambda: any(m.content == text for m in fake.bot_messages(dm["id"])), TIMEOUT,
                                    f"{text!r} in the DM")

            yield DM(say, command, shown)
        finally:
            await adapter.stop()


DMS: dict[str, OpenDM] = {"telegram": telegram_dm, "slack": slack_dm, "discord": discord_dm}
