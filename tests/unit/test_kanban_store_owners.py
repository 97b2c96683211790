"""Whose kanban cards a viewer sees and may change, in the database on SQLite and PostgreSQL: a person their own
and their shared conversation's, an admin all, the dispatcher and the operator (no viewer) all; and the
cards made before owners were kept, given theirs from what their origin says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from kanban_kit import database
from postgres import BACKENDS, empty_database
from sqlalchemy.pool import NullPool

from hermes_engine.ports.inbound import ChatKind, ReplyTarget
from hermes_engine.ports.storage import CardSpec, CardViewer, shared_conversation
from storage import migrate
from storage.engine import make_engine
from storage.store import SqlStore

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

ALICE, BOB = 1, 2
CHANNEL = shared_conversation(ReplyTarget("slack", "T1", "C1"), ChatKind.CHANNEL)
ELSEWHERE = shared_conversation(ReplyTarget("slack", "T1", "C2"), ChatKind.CHANNEL)


@pytest.fixture
async def board(backend, tmp_path):
    async with database(backend, tmp_path) as make:
        store = make()
        await store.init()
        try:
            yield store
        finally:
            await store.close()


async def _cards(board: SqlStore):
    return await board.create_cards([
        CardSpec("Alice's private plan", body="move to Lisbon", owner_id=ALICE),
        CardSpec("the channel's release", owner_id=ALICE, shared_in=CHANNEL),
        CardSpec("Bob's errand", owner_id=BOB),
        CardSpec("from before owners"),
    ], actor="test")


async def _titles(board: SqlStore, viewer: CardViewer | None) -> list[str]:
    return [c.title for c in await board.list_cards(viewer=viewer)]


async def test_a_person_in_a_dm_lists_only_the_cards_they_made(board):
    await _cards(board)
    assert await _titles(board, CardViewer(BOB)) == ["Bob's errand"]
    assert await _titles(board, CardViewer(ALICE)) == ["Alice's private plan", "the channel's release"]
    assert await _titles(board, CardViewer(None)) == []  # no person, no shared conversation: nothing


async def test_in_a_shared_conversation_everyone_sees_its_cards_and_no_ones_dm_cards(board):
    await _cards(board)
    assert await _titles(board, CardViewer(BOB, CHANNEL)) == ["the channel's release"]
    assert await _titles(board, CardViewer(ALICE, CHANNEL)) == ["the channel's release"]
    assert await _titles(board, CardViewer(ALICE, ELSEWHERE)) == []


async def test_an_admin_and_the_operator_see_every_card_including_those_without_an_owner(board):
    made = await _cards(board)
    every = [c.title for c in made]
    assert await _titles(board, CardViewer(BOB, admin=True)) == every
    assert await _titles(board, None) == every


async def test_a_card_the_viewer_may_not_see_reads_and_moves_as_no_card_and_is_left_unchanged(board):
    private, shared, _, legacy = await _cards(board)
    assert await board.get_card(private.id, viewer=CardViewer(BOB)) is None
    assert await board.get_card(private.id, viewer=CardViewer(ALICE, CHANNEL)) is None  # the channel reads it
    assert await board.get_card(legacy.id, viewer=CardViewer(BOB, CHANNEL)) is None
    assert await board.move_card(private.id, "archived", actor="slack:bob", viewer=CardViewer(BOB, CHANNEL)) is None
    untouched = await board.get_card(private.id)
    assert untouched.status == "todo" and [e.kind for e in await board.card_events(private.id)] == ["created"]
    assert (await board.get_card(shared.id, viewer=CardViewer(BOB, CHANNEL))).body == ""
    moved = await board.move_card(shared.id, "blocked", actor="slack:bob", viewer=CardViewer(BOB, CHANNEL))
    assert moved.status == "blocked"
    assert (await board.move_card(legacy.id, "done", actor="admin", viewer=CardViewer(BOB, admin=True))).status == "done"


async def test_a_cards_owner_and_conversation_are_kept_with_it(board):
    [card] = await board.create_cards([CardSpec("c", owner_id=ALICE, shared_in=CHANNEL)], actor="test")
    again = await board.get_card(card.id)
    assert (card.owner_id, card.shared_in, again.owner_id, again.shared_in) == (ALICE, CHANNEL, ALICE, CHANNEL)


async def test_cards_made_before_owners_belong_to_the_person_and_group_chat_their_origin_names(backend, tmp_path):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    origins = {
        "dm card": {"person": ALICE, "reply": {"platform": "telegram", "account": "bot", "chat_id": "42"},
                    "for": {"chat_kind": "dm", "person_id": ALICE}},
        "group card": {"person": BOB, "reply": {"platform": "telegram", "account": "bot", "chat_id": "-100"},
                       "for": {"chat_kind": "group", "person_id": BOB}},
        "cli card": {},
    }
    cards = sa.table("kanban_cards", *(sa.column(c) for c in ("title", "body", "status", "profile", "goal_mode",
                                                              "attempts", "failures", "created_at", "updated_at")),
                     sa.column("origin", sa.JSON()))
    async with empty_database(backend, str(tmp_path / "old.db")) as (url, options):
        engine = make_engine(url, poolclass=NullPool, **options)
        try:
            await migrate.upgrade(engine, "0014")
            async with engine.begin() as conn:
                for title, origin in origins.items():
                    await conn.execute(cards.insert().values(title=title, body="", status="todo", profile="bot",
                                                             goal_mode=False, attempts=0, failures=0, origin=origin,
                                                             created_at=now, updated_at=now))
            await migrate.upgrade(engine, "head")
        finally:
            await engine.dispose()
        store = SqlStore(url, engine_options=options)
        await store.init()
        try:
            by_title = {c.title: c for c in await store.list_cards()}
            group = shared_conversation(ReplyTarget("telegram", "bot", "-100"), ChatKind.GROUP)
            assert [(by_title[t].owner_id, by_title[t].shared_in) for t in origins] == [
                (ALICE, None), (BOB, group), (None, None)]
            assert await _titles(store, CardViewer(None, group)) == ["group card"]
        finally:
            await store.close()
