"""Every character the model writes reaches the person, while it streams and in the final: the real
python-telegram-bot, slack-sdk and discord.py against the fakes, each message read as its platform shows it
(`fakes.telegram_reading`, `slack_reading`, `discord_reading`); the real gateway against the fake LLM."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest
from discord_kit import FAST as DISCORD_FAST
from discord_kit import discord_environment
from engine_harness import Engine, make_profile
from fakes import discord_reading, slack_reading
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import Reply
from fakes.fake_slack import FakeSlack
from fakes.fake_telegram import FakeTelegram, FakeUser
from kanban_kit import QUIET_BOARD, shipped_profile
from literal_kit import CORPUS, HELP
from slack_kit import serve_slack, slack_environment

from adapters import discord as discord_platform
from adapters.base import PlatformAdapter
from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.ports.inbound import ReplyTarget

LITERAL = [line for line in CORPUS if line.reads is None and not line.per_platform and not line.gaps]

ALICE = FakeUser(42, "Alice", "alice")
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def bot(engine, telegram):
    """`await bot()` → (engine, adapter): the shipped Telegram assistant's commands and description, started
    against the fake Bot API and stopped at teardown."""
    adapters: list[TelegramAdapter] = []

    async def make() -> tuple[Engine, TelegramAdapter]:
        shipped = shipped_profile("telegram-dm-assistant")
        profile = make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": FAST},
                               description=shipped.description, toolsets=shipped.toolsets, kanban=QUIET_BOARD)
        e = await engine(profile=profile)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        await asyncio.wait_for(adapter.ready.wait(), 5)
        adapters.append(adapter)
        return e, adapter

    yield make
    for adapter in adapters:
        await adapter.stop()


async def test_the_person_reads_the_branch_placeholder_the_model_wrote(bot, telegram: FakeTelegram, fake_llm):
    fake_llm.script(Reply(text="Run git checkout <branch-name> to switch", delay=0.05))
    e, _ = await bot()
    telegram.user_says(42, ALICE, "how do I change branch?")
    message = await telegram.wait_for_text(42, "Run git checkout <branch-name> to switch")
    await e.idle()
    assert telegram.chat(42).bot_texts == ["Run git checkout <branch-name> to switch"]
    assert all("<branch-name>" in text for _, text in message.history if "branch" in text)  # the frames too


async def test_help_reads_in_the_chat_as_the_bot_wrote_it(bot, telegram: FakeTelegram):
    e, _ = await bot()
    telegram.user_says(42, ALICE, "/help")
    shown = await telegram.wait_for_text(42, HELP)
    await e.idle()
    assert [m.text for m in telegram.chat(42).bot_messages] == [shown.text] == [HELP]


async def test_every_line_of_the_corpus_reads_as_written_through_the_bot_api(bot, telegram: FakeTelegram):
    _, adapter = await bot()
    target = ReplyTarget("telegram", adapter.account, "42")
    lines = [line for line in CORPUS if "telegram" not in line.gaps]
    for n, line in enumerate(lines):
        await adapter.send(target, line.text, idempotency_key=f"corpus-{n}")
    await telegram.settle()
    shown: list[Any] = [m.text.rstrip() for m in telegram.chat(42).bot_messages]
    assert shown == [line.reading("telegram") for line in lines]


async def stream_the_corpus(adapter: PlatformAdapter, target: ReplyTarget, reads: Callable[[], str | None],
                            wait_for: Callable[..., Any]) -> None:
    """Streams the corpus's literal lines one at a time, each frame read as the chat shows it before the
    next line comes, then the final."""
    stream = adapter.open_stream(target, idempotency_key="corpus")
    written = ""
    for n, line in enumerate(LITERAL):
        delta = ("\n\n" if n else "") + line.text
        written += delta
        await stream.push(delta)
        frame = written + adapter.stream_cursor
        await wait_for(lambda frame=frame: reads() == frame.rstrip(), message=f"a frame reading {frame[-40:]!r}")
    await stream.finish(written)
    await wait_for(lambda: reads() == written, message="the final")


async def test_a_streamed_reply_reads_as_written_in_every_frame_on_telegram(bot, telegram: FakeTelegram):
    _, adapter = await bot()

    def reads() -> str | None:
        messages = telegram.chat(42).bot_messages
        return messages[-1].text.rstrip() if messages else None

    await stream_the_corpus(adapter, ReplyTarget("telegram", adapter.account, "42"), reads,
                            lambda predicate, message: telegram.wait_for(predicate, 10, message))
    [message] = telegram.chat(42).bot_messages
    assert len(message.history) >= len(LITERAL)  # a frame for each line, then the final (plain: no edit)


async def test_a_streamed_reply_reads_as_written_in_every_frame_on_slack(engine, monkeypatch):
    async with FakeSlack() as fake:
        slack_environment(monkeypatch, fake)
        e = await engine(platform="slack")
        served = await serve_slack(e)
        try:
            def reads() -> str | None:
                messages = fake.bot_messages("DALICE")
                return slack_reading.read(messages[-1].text, messages[-1].mrkdwn).rstrip() if messages else None

            async def wait_for(predicate: Callable[[], bool], message: str) -> None:
                await fake.wait_for(predicate)

            await stream_the_corpus(served.adapter, ReplyTarget("slack", fake.team, "DALICE"), reads, wait_for)
            assert len(fake.bot_messages("DALICE")) == 1
        finally:
            await served.close()


async def test_a_streamed_reply_reads_as_written_in_every_frame_on_discord(engine, monkeypatch):
    async with FakeDiscord() as fake:
        discord_environment(monkeypatch, fake)
        e = await engine(platform="discord")
        adapter = discord_platform.PLATFORM.build(e.gateway, e.settings,
                                                  discord_platform.PLATFORM.parse_options(DISCORD_FAST), None,
                                                  os.environ)
        await adapter.start()
        try:
            def reads() -> str | None:
                messages = fake.bot_messages(fake.channel_id)
                return discord_reading.read(messages[-1].content).rstrip() if messages else None

            await stream_the_corpus(adapter, ReplyTarget("discord", adapter.account, fake.channel_id), reads,
                                    lambda predicate, message: fake.wait_for(predicate, 10, message))
            assert len(fake.bot_messages(fake.channel_id)) == 1
        finally:
            await adapter.stop()
