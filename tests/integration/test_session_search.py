"""session_search: what was said stays findable after compression, and only by the people allowed to see it.

The engine tests run on SQLite; the storage tests run on SQLite and, when HERMES_TEST_POSTGRES_URL is set
(`eval "$(bash .ci/postgres.sh)"`), on PostgreSQL too, each in a schema of its own.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import BACKENDS, empty_database
from sqlalchemy.pool import NullPool

from hermes_engine.compression.service import SUMMARY_SYSTEM
from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.inbound import ChatKind
from storage import migrate
from storage.engine import make_engine
from storage.repos.lineage import latest_compaction, list_compactions, record_compaction
from storage.repos.search import search
from storage.store import SqlStore

# ------------------------------------------------------------------------------------- through the engine

def is_summary_request(request) -> bool:
    return request.system.startswith(SUMMARY_SYSTEM[:60])


async def search_as(e, person_user: str, query: str, *, chat: str, kind: ChatKind = ChatKind.DM) -> str:
    """Call the session_search tool as `person_user` would in their session (no model involved)."""
    msg = e.message("x", user=person_user, chat=chat, kind=kind)
    session = await e.gateway.session_for(msg)
    person = await e.gateway.person_of(msg.platform, msg.account, person_user)
    ctx = e.gateway.tool_context(session, person)
    call = ToolCall(id="s1", name="session_search", arguments=json.dumps({"query": query}))
    return unmarked((await e.gateway.tools.call(call, ctx)).content)


def unmarked(text: str) -> str:
    """Without the «» that mark matched words in snippets."""
    return text.replace("«", "").replace("»", "")


async def test_session_search_finds_what_was_said_before_compression(engine, fake_llm):
    def respond(request):
        if is_summary_request(request):
            return Reply(text="## Goal\nChat.\n## Critical facts\nNone.")
        if request.messages[-1]["role"] == "tool":
            return Reply(text="Found it: " + request.messages[-1]["content"][:300])
        if "what was the launch code" in request.last_user_text:
            return Reply(tool_calls=[("session_search", {"query": "launch code"})])
        return Reply(text="Noted.")

    fake_llm.responder = respond
    e = await engine(profile=make_profile(context_window=100_000))
    await e.say("Hello there.")
    await e.say("Remember this: the launch code is PELICAN-42.")
    for i in range(3):
        await e.say(f"Some other topic number {i}.")
    assert (await e.say("/compress")).startswith("Compressed:")
    view = json.dumps(next(iter(e.gateway.sessions.values())).history[2].to_dict())
    assert "PELICAN" not in view  # compressed away from the context …
    answer = await e.say("what was the launch code again?")
    assert "PELICAN" in unmarked(answer) and "this conversation" in answer  # … but still found


async def test_session_search_never_returns_another_persons_messages(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="Noted.")
    e = await engine()
    await e.say("My locker combination is MANGO 7-7-7.", user="alice", chat="alice")
    await e.say("I like turtles.", user="bob", chat="bob")
    assert "MANGO" in await search_as(e, "alice", "locker combination", chat="alice")
    found_by_bob = await search_as(e, "bob", "locker combination mango", chat="bob")
    assert found_by_bob.startswith("No past messages match")
    assert "turtles" in await search_as(e, "bob", "turtles", chat="bob")


async def test_a_groups_conversation_is_hidden_from_people_who_were_not_in_it(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(
        text="Noted: the group plan is KIWI." if "KIWI" in request.last_user_text else "Hello.")
    e = await engine(profile=make_profile(shared_sessions=True))
    await e.say("Our group plan is KIWI, keep it quiet.", user="alice", chat="g", kind=ChatKind.GROUP)
    await e.say("Hi all.", user="bob", chat="g", kind=ChatKind.GROUP)
    await e.say("Hi bot.", user="carol", chat="carol")

    alice = await search_as(e, "alice", "kiwi plan", chat="g", kind=ChatKind.GROUP)
    assert "keep it quiet" in alice and "Noted: the group plan" in alice
    bob = await search_as(e, "bob", "kiwi plan", chat="g", kind=ChatKind.GROUP)
    assert "Noted: the group plan" in bob  # the assistant's answer in a group bob is in
    assert "keep it quiet" not in bob  # but never alice's own words
    carol = await search_as(e, "carol", "kiwi plan", chat="carol")
    assert carol.startswith("No past messages match")  # carol was never in the group


# ------------------------------------------------------------------------------------- storage, both backends

@pytest.fixture(params=BACKENDS)
async def database(request, tmp_path):
    """(url, engine options) of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    async with empty_database(request.param, str(tmp_path / "search.db")) as found:
        yield found


@pytest.fixture
async def store(database):
    url, options = database
    s = SqlStore(url, engine_options=options)
    await s.init()
    try:
        yield s
    finally:
        await s.close()


async def person(store: SqlStore, user: str) -> int:
    return (await store.resolve_account("test", "acct", user, user)).person_id


async def say(store: SqlStore, session_id: int, person_id: int | None, role: str, text: str) -> int:
    return await store.append_message(session_id, Message(role=role, content=text),  # type: ignore[arg-type]
                                      person_id=person_id if role == "user" else None)


async def find(store: SqlStore, person_id: int, query: str, limit: int = 10) -> list[str]:
    hits = await search(store.engine, person_id=person_id, bot="bot", query=query, limit=limit)
    return [unmarked(h.snippet) for h in hits]


async def test_search_scope_rules_hold_on_every_backend(store):
    alice, bob, carol = [await person(store, n) for n in ("alice", "bob", "carol")]
    dm = (await store.active_session("test:acct:dm:alice", "bot")).id
    group = (await store.active_session("test:acct:group:g", "bot")).id
    other_bot = (await store.active_session("test:acct:dm:alice", "otherbot")).id
    await say(store, dm, alice, "user", "My passport number is ZEBRA123.")
    await say(store, dm, None, "assistant", "I will remember the passport number ZEBRA123.")
    await say(store, dm, None, "tool", "passport lookup returned ZEBRA123")
    await say(store, group, alice, "user", "The offsite venue is the lighthouse.")
    await say(store, group, None, "assistant", "Lighthouse venue noted for the offsite.")
    await say(store, group, bob, "user", "Bob agrees on the lighthouse offsite.")
    await say(store, other_bot, alice, "user", "Lighthouse passport for the other bot.")
    await record_compaction(store.engine, session_id=group, first_message_id=1, last_message_id=2,
                            summary="## Critical facts\n- offsite at the lighthouse, budget 900 dollars",
                            tokens_before=10, tokens_after=5)

    alice_hits = await find(store, alice, "passport")
    assert len(alice_hits) == 2 and all("ZEBRA123" in h for h in alice_hits)  # her message and the answer
    assert not await find(store, bob, "passport zebra123")  # another person's DM
    assert not await find(store, carol, "lighthouse offsite")  # never in the group
    bob_hits = await find(store, bob, "lighthouse offsite")
    assert any("Bob agrees" in h for h in bob_hits)
    assert any("noted" in h for h in bob_hits)  # the group's assistant messages …
    assert any("budget 900" in h for h in bob_hits)  # … and its summary
    assert not any("venue is" in h for h in bob_hits)  # … but not alice's words
    assert len(await find(store, alice, "lighthouse")) == 3  # not the other bot's session


async def test_search_ranks_the_best_match_first_and_falls_back_to_any_word(store):
    alice = await person(store, "alice")
    dm = (await store.active_session("test:acct:dm:alice", "bot")).id
    await say(store, dm, alice, "user", "The invoice was paid in March.")
    await say(store, dm, alice, "user", "Invoice number 4411 for the March consulting invoice, paid.")
    await say(store, dm, alice, "user", "Unrelated: the cat sleeps.")
    hits = await search(store.engine, person_id=alice, bot="bot", query="invoice 4411", limit=5)
    assert len(hits) == 1 and "4411" in hits[0].snippet and "«" in hits[0].snippet
    hits = await search(store.engine, person_id=alice, bot="bot", query="invoices March!", limit=5)
    assert len(hits) == 2  # stemming: invoices ~ invoice
    hits = await search(store.engine, person_id=alice, bot="bot", query="cat giraffe", limit=5)
    assert [h.snippet for h in hits] == ["Unrelated: the «cat» sleeps."]  # no message has both: any word
    assert await search(store.engine, person_id=alice, bot="bot", query='"" AND ( NEAR', limit=5) == []


async def test_lineage_round_trips_on_every_backend(store):
    session = (await store.active_session("k", "bot")).id
    assert await latest_compaction(store.engine, session) is None
    first = await record_compaction(store.engine, session_id=session, first_message_id=3, last_message_id=9,
                                    summary="first", tokens_before=900, tokens_after=300, reason="hygiene")
    second = await record_compaction(store.engine, session_id=session, first_message_id=3, last_message_id=20,
                                     summary="second", tokens_before=800, tokens_after=350, parent_id=first.id)
    assert (await latest_compaction(store.engine, session)) == second
    assert [c.summary for c in await list_compactions(store.engine, [session])] == ["first", "second"]
    assert second.parent_id == first.id and first.reason == "hygiene" and second.reason == "agent"
    assert second.created_at.tzinfo is not None


async def test_messages_stored_before_the_search_migration_are_backfilled(database):
    url, options = database
    engine = make_engine(url, poolclass=NullPool, **options)
    try:
        await migrate.upgrade(engine, "0001")
        now = datetime(2025, 1, 1, tzinfo=UTC)
        async with engine.begin() as conn:
            await conn.execute(sa.text("INSERT INTO people (id, display_name, created_at) VALUES (1, 'a', :t)"),
                               {"t": now})
            await conn.execute(sa.text("INSERT INTO sessions (id, key, bot, state, created_at) "
                                       "VALUES (1, 'k', 'bot', '{}', :t)"), {"t": now})
            await conn.execute(sa.text("INSERT INTO messages (session_id, person_id, role, content, is_error, "
                                       "created_at) VALUES (1, 1, 'user', 'an old note about pelicans', false, :t)"),
                               {"t": now})
        await migrate.upgrade(engine, "head")
        hits = await search(engine, person_id=1, bot="bot", query="pelican", limit=5)
        assert [h.snippet for h in hits] == ["an old note about «pelicans»"]
    finally:
        await engine.dispose()
