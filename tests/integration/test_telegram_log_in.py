"""The Telegram adapter's log-in ahead of its start: the serving process runs it while the model SDK
imports, so getMe, deleteWebhook and setMyCommands are not waited for after it. Nothing is received until
the start, which then does not make those calls again; a log-in that failed is the start's to do again and
report. The real python-telegram-bot against the fake Bot API, the real gateway against the fake LLM."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from aiohttp import web
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeUser

from adapters.telegram import PLATFORM
from hermes_engine.errors import ConfigError

FAST = {"poll_timeout": 1, "poll_backoff": 0.2, "poll_backoff_max": 1.0, "edit_interval_seconds": 0.05}
ALICE = FakeUser(42, "Alice", "alice")
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def _adapter(engine: Any, options: dict[str, Any] | None = None) -> Any:
    options = {**FAST, **(options or {})}
    e = await engine(profile=make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": options}))
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), web.Application(), os.environ)
    e.gateway.attach(adapter)
    return adapter


def _methods(telegram: Any) -> list[str]:
    return [call.method for call in telegram.requests]


async def test_the_log_in_registers_the_menu_receives_nothing_and_the_start_does_not_repeat_it(
        engine, telegram, fake_llm):
    fake_llm.default_reply = Reply(text="hello Alice")
    telegram.user_says(42, ALICE, "a message waiting before the start")
    adapter = await _adapter(engine)
    try:
        await adapter.log_in()
        assert _methods(telegram) == ["getMe", "deleteWebhook", "setMyCommands"]
        assert "new" in [command["command"] for command in telegram.commands or []]
        await asyncio.sleep(0.3)
        assert "getUpdates" not in _methods(telegram) and telegram.chat(42).bot_messages == []

        await adapter.start()
        await asyncio.wait_for(adapter.ready.wait(), 5)
        await telegram.wait_for_text(42, "hello Alice", 10)
        assert [m for m in _methods(telegram) if m in ("getMe", "deleteWebhook", "setMyCommands")] == \
            ["getMe", "deleteWebhook", "setMyCommands"]
    finally:
        await adapter.stop()


async def test_a_token_refused_at_the_log_in_is_reported_by_the_start(engine, telegram, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:refused-token")
    adapter = await _adapter(engine)
    try:
        await adapter.log_in()  # says nothing: the start is what refuses to serve
        with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN was refused"):
            await adapter.start()
    finally:
        await adapter.stop()


async def test_a_webhook_bot_logs_in_without_registering_its_webhook_before_the_server_listens(
        engine, telegram, monkeypatch):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "a-secret")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "https://bot.example.org/telegram/hook")
    adapter = await _adapter(engine, {"mode": "webhook"})
    try:
        await adapter.log_in()
        assert _methods(telegram) == ["getMe"]
    finally:
        await adapter.stop()
