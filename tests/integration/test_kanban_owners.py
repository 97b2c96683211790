"""Whose cards `/kanban` shows and changes, as people on Telegram see it: the real python-telegram-bot against
the fake Bot API, in front of the real gateway on SQLite and PostgreSQL. Bob never learns that Alice's DM
card exists; a group's cards are the group's; an admin sees every card."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from engine_harness import Engine, make_profile
from fakes.fake_telegram import FakeTelegram, FakeUser
from kanban_kit import QUIET_BOARD, planning
from postgres import BACKENDS, empty_database

from adapters.render import render_telegram
from adapters.telegram import PLATFORM

pytestmark = [pytest.mark.parametrize("backend", BACKENDS),
              pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

ALICE, BOB, CAROL = FakeUser(42, "Alice"), FakeUser(43, "Bob"), FakeUser(44, "Carol")
GROUP = -1001234567890
EMPTY = "The board is empty. Add a card with /kanban add <title>."


class Chats:
    """People writing to the bot on the fake Telegram: `ask` sends a message and returns the bot's answer."""

    def __init__(self, telegram: FakeTelegram, engine: Engine) -> None:
        self.telegram, self.engine = telegram, engine

    async def plan(self, user: FakeUser, text: str, *, chat: int) -> None:
        """`user` asks the agent for work it puts on the board, and sees its answer."""
        self.telegram.user_says(chat, user, text, chat_type="supergroup" if chat < 0 else None)
        await self.telegram.wait_for_text(chat, "On the board.", 20)
        await self.engine.idle(20)

    async def ask(self, user: FakeUser, text: str, *, chat: int | None = None) -> str:
        chat_id = chat if chat is not None else user.id
        before = len(self.telegram.chat(chat_id).bot_messages)
        self.telegram.user_says(chat_id, user, text, chat_type="supergroup" if chat_id < 0 else None)
        return (await self.telegram.wait_for_messages(chat_id, before + 1, 20))[before].text


@pytest.fixture
async def chats(backend, tmp_path, engine, telegram) -> AsyncIterator[Chats]:
    async with empty_database(backend, str(tmp_path / "board.db")) as database:
        profile = make_profile(toolsets=["core", "kanban"], kanban=QUIET_BOARD,
                               access={"allowed_users": ["42", "43"], "admins": ["44"]})
        e = await engine(profile=profile, database=database)
        options = {"poll_timeout": 1, "edit_interval_seconds": 0.05, "group_interval_seconds": 0.05}  # no pacing
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        try:
            yield Chats(telegram, e)
        finally:
            await adapter.stop()


def shown(markdown: str) -> str:
    return render_telegram(markdown).text


async def test_bob_cannot_list_show_move_or_cancel_alices_card_and_is_told_it_does_not_exist(chats):
    assert await chats.ask(ALICE, "/kanban add Alice's private plan: leave the company in May") == \
        "Added card #1: Alice's private plan"
    assert await chats.ask(BOB, "/kanban") == shown(EMPTY)
    assert await chats.ask(BOB, "/kanban show #1") == "No card #1."
    assert await chats.ask(BOB, "/kanban show #99") == "No card #99."  # a card that does not exist reads alike
    assert await chats.ask(BOB, "/kanban move #1 done") == "No card #1."
    assert await chats.ask(BOB, "/kanban block #1 mine now") == "No card #1."
    assert await chats.ask(BOB, "/kanban cancel #1") == "No card #1."
    card = await chats.engine.store.get_card(1)
    assert card.status == "todo" and [e.kind for e in await chats.engine.store.card_events(1)] == ["created"]
    assert "leave the company in May" in await chats.ask(ALICE, "/kanban show #1")
    assert await chats.ask(ALICE, "/kanban") == shown("**📋 todo**\n- #1 Alice's private plan")


async def test_in_a_group_both_see_and_change_the_groups_cards_and_neither_sees_a_dm_card_there(chats):
    await chats.ask(ALICE, "/kanban add Alice's private plan")
    assert await chats.ask(ALICE, "/kanban add the release notes: for 2.0", chat=GROUP) == \
        "Added card #2: the release notes"
    board = shown("**📋 todo**\n- #2 the release notes")
    assert await chats.ask(BOB, "/kanban", chat=GROUP) == board
    assert await chats.ask(ALICE, "/kanban", chat=GROUP) == board  # her DM card stays out of the group
    assert "for 2.0" in await chats.ask(BOB, "/kanban show #2", chat=GROUP)
    assert await chats.ask(BOB, "/kanban show #1", chat=GROUP) == "No card #1."
    assert await chats.ask(BOB, "/kanban block #2 waiting for QA", chat=GROUP) == "Card #2 is now blocked."
    assert await chats.ask(BOB, "/kanban") == shown(EMPTY)  # in his DM: his own cards, and he made none
    assert await chats.ask(ALICE, "/kanban") == shown("**📋 todo**\n- #1 Alice's private plan\n**⛔ blocked**\n"
                                                      "- #2 the release notes — waiting for QA")


async def test_an_admin_sees_and_changes_every_card(chats):
    await chats.ask(ALICE, "/kanban add Alice's private plan: leave the company in May")
    await chats.ask(BOB, "/kanban add the release notes", chat=GROUP)
    assert await chats.ask(CAROL, "/kanban") == shown("**📋 todo**\n- #1 Alice's private plan\n- #2 the release notes")
    assert "leave the company in May" in await chats.ask(CAROL, "/kanban show #1")
    assert await chats.ask(CAROL, "/kanban cancel #1") == "Card #1 is now archived."


async def test_cards_the_agent_made_are_their_askers_in_a_dm_and_the_groups_in_a_group(chats, fake_llm):
    fake_llm.responder = planning("Alice's private plan")
    await chats.plan(ALICE, "plan my exit", chat=ALICE.id)
    fake_llm.responder = planning("the release notes")
    await chats.plan(ALICE, "@hermes_test_bot plan the release", chat=GROUP)
    assert await chats.ask(BOB, "/kanban") == shown(EMPTY)
    assert await chats.ask(BOB, "/kanban show #1") == "No card #1."
    assert await chats.ask(BOB, "/kanban", chat=GROUP) == shown("**📋 todo**\n- #2 the release notes")
    assert await chats.ask(ALICE, "/kanban") == shown("**📋 todo**\n- #1 Alice's private plan\n- #2 the release notes")
