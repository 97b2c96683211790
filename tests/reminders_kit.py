"""What the clock's platform tests share: a fake model that makes the `cronjob` call a message asks for, and
Alice's Telegram DM served by the real adapter with the clock's toolset."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from engine_harness import Engine, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import ChatMessage, FakeTelegram, FakeUser

from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.ports.feature import Feature

FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
ALICE = FakeUser(42, "Alice", "alice")
REMINDER = "⏰ Reminder: stretch"


def calling(calls: dict[str, tuple[str, dict[str, Any]]]):
    """A fake-LLM responder: a message ending in a key of `calls` becomes one call of the tool it names with its
    arguments (a Slack message reaches the model labelled with its speaker, so the end is what counts); once
    the tool answered, the model repeats its answer; anything else is answered "Noted."."""
    def respond(request: Any) -> Reply:
        if request.turn_tool_results:
            return Reply(text=request.turn_tool_results[-1])
        for said, (name, arguments) in calls.items():
            if request.last_user_text.endswith(said):
                return Reply(tool_calls=[(name, json.dumps(arguments))])
        return Reply(text="Noted.")
    return respond


def schedules(calls: dict[str, dict[str, Any]]):
    """`calling` with `cronjob` for every message in `calls`."""
    return calling({said: ("cronjob", arguments) for said, arguments in calls.items()})


async def start(engine: Any, *, features: list[Feature] | None = None, home: Path | None = None,
                allowed: tuple[str, ...] = ("42",)) -> tuple[Engine, TelegramAdapter]:
    """A gateway with the clock (`toolsets: core, clock`) and the real Telegram adapter, ready."""
    profile = make_profile(access={"allowed_users": list(allowed)}, platforms={"telegram": FAST},
                           toolsets=["core", "clock"])
    e = await engine(profile=profile, features=features, home=home)
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    await asyncio.wait_for(adapter.ready.wait(), 5)
    return e, adapter


def bot_texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.chat(ALICE.id).bot_messages]


async def shown(telegram: FakeTelegram, pattern: str, timeout: float = 10) -> ChatMessage:
    """The first bot message in Alice's chat whose text matches `pattern` (a reply still streaming is waited for)."""
    found = re.compile(pattern)
    return await telegram.wait_for(
        lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if found.search(m.text)), None), timeout,
        f"no bot message matching {pattern!r}; chat shows {bot_texts(telegram)!r}")
