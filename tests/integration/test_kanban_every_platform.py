"""The kanban board is done when, on every platform, a person can ask the bot to split a piece of work into
cards, watch `/kanban`, and is told when the last card is done. The real Telegram, Slack and Discord adapters
run against their fakes in front of a gateway whose dispatcher ticks fast, so the messages the dispatcher
posts on its own (a card started, a card done, the whole request done) reach a real adapter, not a recording."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from dm_kit import DMS, TIMEOUT
from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.config import BotProfile, KanbanSettings
from hermes_engine.kanban.worker import WORKER_SYSTEM

# python-telegram-bot warns about its own RetryAfter.retry_after type change when it builds the error.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# Cards start within a tick; the lease outlasts the test, so a card held back is never taken from its worker.
FAST = KanbanSettings(tick_seconds=0.2, lease_seconds=60.0)
TASKS = ["write the outline", "write the chapters"]
RESULTS = {"write the outline": "three parts, nine chapters", "write the chapters": "all nine written"}


def profile_for(person: str) -> BotProfile:
    return make_profile(toolsets=["core", "kanban"], kanban=FAST,
                        access={"allowed_users": [person], "pairing": False})


class Model:
    """The bot and its workers. The second card's worker holds its answer until the person has looked at the
    board, so what `/kanban` shows is known: one card done, the other running."""

    def __init__(self) -> None:
        self.board_seen = asyncio.Event()

    async def __call__(self, request: Any) -> Reply:
        answered = any(m["role"] == "tool" for m in request.messages)
        if not request.system.startswith(WORKER_SYSTEM.splitlines()[0]):
            if answered:
                return Reply(text="I put it on the board.")
            return Reply(tool_calls=[("kanban", {"tasks": TASKS, "dependencies": ["2:1"]})])
        if answered:
            return Reply(text="Done.")
        card, title = request.last_user_text.split("Card #", 1)[1].split("\n", 1)[0].split(": ", 1)
        if title == TASKS[1]:
            await asyncio.wait_for(self.board_seen.wait(), TIMEOUT)
        return Reply(tool_calls=[("kanban_complete", {"card_id": int(card), "result": RESULTS[title]})])


@pytest.mark.parametrize("platform", list(DMS))
async def test_on_every_platform_work_split_into_cards_is_shown_on_the_board_and_its_end_is_told(
        platform, engine, fake_llm, monkeypatch):
    model = Model()
    fake_llm.responder = model
    async with DMS[platform](engine, monkeypatch, profile_for) as dm:
        await dm.say("write me a book, the outline first")
        await dm.shown("I put it on the board.")
        await dm.shown("✅ Card #1 done: write the outline\nthree parts, nine chapters")
        await dm.shown("▶️ Started: write the chapters")
        await dm.command("kanban", "")
        await dm.shown("**⚙️ running**\n- #2 write the chapters (after #1)\n**✅ done**\n- #1 write the outline")
        model.board_seen.set()
        await dm.shown("✅ Card #2 done: write the chapters\nall nine written")
        await dm.shown("🏁 All 2 cards of this request are done.")
    first_steps = [r.last_user_text.split("Card #", 1)[1].split(":", 1)[0] for r in fake_llm.requests
                   if r.system.startswith(WORKER_SYSTEM.splitlines()[0])
                   and not any(m["role"] == "tool" for m in r.messages)]
    assert sorted(first_steps) == ["1", "2"]  # each card was worked once, by its own worker
