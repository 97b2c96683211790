"""Every character the model writes reaches the person: the real python-telegram-bot against the fake Bot
API (which reads formatting as Telegram does), the real gateway against the fake LLM."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from engine_harness import Engine, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram, FakeUser
from kanban_kit import QUIET_BOARD, shipped_profile
from literal_kit import CORPUS, HELP

from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.ports.inbound import ReplyTarget

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
    await telegram.wait_for_text(42, HELP)
    await e.idle()


async def test_every_line_of_the_corpus_reads_as_written_through_the_bot_api(bot, telegram: FakeTelegram):
    _, adapter = await bot()
    target = ReplyTarget("telegram", adapter.account, "42")
    for n, line in enumerate(CORPUS):
        await adapter.send(target, line.text, idempotency_key=f"corpus-{n}")
    await telegram.settle()
    shown: list[Any] = [m.text.rstrip() for m in telegram.chat(42).bot_messages]
    assert shown == [line.reading("telegram") for line in CORPUS]
