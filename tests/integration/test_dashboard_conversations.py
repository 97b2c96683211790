"""The dashboard's Conversations and Goals pages on the real aiohttp server and a real SqlStore (SQLite, and
PostgreSQL with `-m postgres`): sessions by last activity, the search over the full-text index (however
malformed the query), one conversation as stored, and goals paused or cleared by the `/goal` command's code."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import aiohttp
import pytest
import sqlalchemy as sa
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from engine_harness import goal_script, verdict
from fakes.fake_llm import Reply
from gateway_kit import database_url, free_port
from postgres import BACKENDS
from test_dashboard import SCRIPT_NAME, Site

from hermes_engine.agent.tool_record import record
from hermes_engine.config import GoalSettings
from hermes_engine.loops.goals import GoalFeature
from hermes_engine.memory.book import MemoryBook
from hermes_engine.memory.store import FileMemoryStore
from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.inbound import ChatKind, InboundMessage, message_to_payload
from hermes_gateway.dashboard.app import mount
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.views import GoalTeller, PlatformState, Sources
from storage.store import SqlStore

KEY = "telegram:bot:dm:666"
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
BIDI = "abc\u202egpj.exe"


@contextlib.asynccontextmanager
async def dashboard_on(store: SqlStore, tmp_path: Path, bot: str = "bot",
                       goals: Mapping[str, GoalTeller] | None = None) -> AsyncIterator[Site]:
    """The dashboard of a replica serving `bot`, on `store`; `goals`: who tells a goal's chat of a change."""
    person = await store.resolve_account("telegram", bot, "666", SCRIPT_NAME)
    memory = MemoryBook(FileMemoryStore.for_home(tmp_path / "home"))
    port = free_port()
    dashboard = Dashboard(f"http://127.0.0.1:{port}", 600, 3600)
    http = web.Application()
    sources = Sources(store, memory, [bot], lambda: [PlatformState(bot, "telegram", True)],
                      goal_turns={bot: 20}, goals=goals or {})
    mount(http, sources, dashboard)
    client = TestClient(TestServer(http, host="127.0.0.1", port=port), cookie_jar=aiohttp.CookieJar(unsafe=True))
    await client.start_server()
    try:
        yield Site(client, store, memory, dashboard, http, person.person_id)
    finally:
        await client.close()


@pytest.fixture(params=BACKENDS)
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    async with database_url(request.param, tmp_path) as url:
        store = SqlStore(url)
        await store.init()
        try:
            async with dashboard_on(store, tmp_path) as opened:
                yield opened
        finally:
            await store.close()


async def page(site: Site, path: str, status: int = 200) -> str:
    response = await site.client.get(path)
    body = await response.text()
    assert response.status == status, (path, response.status, body[:500])
    return body


async def a_conversation(site: Site) -> tuple[int, int]:
    """Alice's DM: a question, a tool call and its result (kept redacted, as the agent keeps it), the answer,
    a summary of the first two, and a session started from it. Returns (session id, child session id)."""
    store = site.store
    session = await store.active_session(KEY, "bot")
    first = await store.append_message(session.id, Message("user", f"What does the invoice say? {SECRET}"),
                                       person_id=site.person_id)
    call = ToolCall("call_1", "read_file", '{"path": "/attachments/invoice.txt", "token": "[REDACTED]"}')
    await store.append_message(session.id, Message("assistant", "", tool_calls=(call,)), model="openai:gpt-test")
    await store.append_message(session.id, Message("tool", "Invoice 42: 3 teapots, key [REDACTED]",
                                                   tool_call_id="call_1", tool_name="read_file",
                                                   meta=record(call, 38, 0.25)))
    last = await store.append_message(session.id, Message("assistant", "The invoice lists three teapots."),
                                      model="openai:gpt-test")
    await store.record_compaction(session_id=session.id, first_message_id=first, last_message_id=last - 1,
                                  summary="Goal: read the invoice. Progress: teapots counted.",
                                  tokens_before=900, tokens_after=120, reason="hygiene")
    child = await store.new_session(KEY, "bot", parent_id=session.id)
    await store.append_message(child.id, Message("user", "And the saucers?"), person_id=site.person_id)
    return session.id, child.id


async def test_conversations_are_listed_most_recently_active_first_with_who_and_how_many(site: Site) -> None:
    older, newer = await a_conversation(site)
    other_bot = await site.store.active_session("telegram:other:dm:1", "other-bot")
    await site.store.append_message(other_bot.id, Message("user", "not this gateway's"))
    await site.sign_in()
    body = await page(site, "/admin/conversations")
    rows = re.findall(r'<a href="/admin/conversations/(\d+)">', body)
    assert rows == [str(newer), str(older)]  # the other bot's session is not this dashboard's
    assert "2 in all" in body and KEY in body
    assert '<td data-label="Messages">4</td>' in body and '<td data-label="Messages">1</td>' in body
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;Mallory" in body and "<script>alert" not in body
    await page(site, f"/admin/conversations/{other_bot.id}", status=404)


async def test_sessions_are_listed_a_page_at_a_time(site: Site) -> None:
    for n in range(55):
        await site.store.active_session(f"slack:T1:dm:U{n:03}", "bot")
    await site.sign_in()
    first, second = await page(site, "/admin/conversations"), await page(site, "/admin/conversations?page=2")
    assert "Page 1 of 2" in first and "slack:T1:dm:U054" in first and "slack:T1:dm:U004" not in first
    assert "slack:T1:dm:U004" in second and "slack:T1:dm:U000" in second
    assert "Page 2 of 2" in await page(site, "/admin/conversations?page=40")


async def test_a_search_finds_the_conversation_and_marks_the_words_it_matched(site: Site) -> None:
    session_id, _ = await a_conversation(site)
    await site.sign_in()
    body = await page(site, "/admin/conversations?q=teapots")
    assert f'href="/admin/conversations/{session_id}#m' in body and f"href=\"/admin/conversations/{session_id}#compactions" in body
    assert "<mark>teapots</mark>" in body
    tool_only = await page(site, "/admin/conversations?q=read_file")  # tool calls and results are not searched
    assert 'id="nothing"' in tool_only


async def test_a_search_for_words_no_conversation_holds_all_of_shows_those_holding_some(site: Site) -> None:
    await a_conversation(site)
    await site.sign_in()
    body = await page(site, "/admin/conversations?q=saucers+zeppelin")
    assert "holds all of these words" in body and "<mark>saucers</mark>" in body


async def test_a_search_that_matches_nothing_says_so(site: Site) -> None:
    await a_conversation(site)
    await site.sign_in()
    body = await page(site, "/admin/conversations?q=zeppelin")
    assert 'id="nothing"' in body and "No conversation matches “zeppelin”" in body


@pytest.mark.parametrize("query", ['"teapots', "*", "NEAR(teapots", "tea* OR", 'col:"x', "-", "AND", "((", "'; DROP",
                                   "a" * 600, "\u202e<script>"])
async def test_a_malformed_query_gives_a_page_never_an_error(site: Site, query: str) -> None:
    await a_conversation(site)
    await site.sign_in()
    response = await site.client.get("/admin/conversations", params={"q": query})
    body = await response.text()
    assert response.status == 200 and 'id="results"' in body
    assert "<script>" not in body and "\u202e" not in body


async def test_a_conversation_shows_its_messages_tool_calls_and_results_as_stored(site: Site) -> None:
    session_id, child_id = await a_conversation(site)
    await site.sign_in()
    body = await page(site, f"/admin/conversations/{session_id}")
    order = [body.index(text) for text in ("What does the invoice say?", "Calls <strong>read_file</strong>",
                                           "Invoice 42: 3 teapots", "The invoice lists three teapots.")]
    assert order == sorted(order)
    assert "&#34;token&#34;: &#34;[REDACTED]&#34;" in body and "key [REDACTED]" in body  # as the store keeps them
    assert SECRET not in body and "What does the invoice say? [REDACTED]" in body  # as the export shows it
    assert "Result of call call_1, 38 characters, 250 ms" in body
    assert "Goal: read the invoice. Progress: teapots counted." in body and "900 → 120 tokens (hygiene" in body
    assert "summarised in <a href=\"#c" in body
    assert f'Went on in <a href="/admin/conversations/{child_id}"' in body
    child = await page(site, f"/admin/conversations/{child_id}")
    assert f'Started from <a href="/admin/conversations/{session_id}"' in child and "And the saucers?" in child
    await page(site, "/admin/conversations/999999", status=404)


async def test_a_long_conversation_is_shown_a_page_of_messages_at_a_time(site: Site) -> None:
    session = await site.store.active_session(KEY, "bot")
    for n in range(130):
        await site.store.append_message(session.id, Message("user", f"message number {n:03}"), person_id=site.person_id)
    await site.sign_in()
    first = await page(site, f"/admin/conversations/{session.id}")
    last = await page(site, f"/admin/conversations/{session.id}?page=2")
    assert "message number 000" in first and "message number 099" in first and "message number 100" not in first
    assert "message number 100" in last and "message number 129" in last and "Page 2 of 2" in last


async def test_markup_and_bidirectional_overrides_in_a_conversation_are_shown_as_text(site: Site) -> None:
    session = await site.store.active_session(f"telegram:bot:group:{BIDI}", "bot")
    await site.store.append_message(session.id, Message("user", "<script>alert('m')</script> kettle " + BIDI),
                                    person_id=site.person_id)
    await site.store.append_message(session.id, Message("assistant", "<img src=x onerror=alert(1)>"))
    await site.sign_in()
    for path in ("/admin/conversations", f"/admin/conversations/{session.id}", "/admin/conversations?q=kettle"):
        body = await page(site, path)
        assert "<script>alert" not in body and "<img src=x" not in body and "\u202e" not in body, path
        assert "abc&lt;U+202E&gt;gpj.exe" in body, path


async def test_the_list_search_and_conversation_take_no_more_queries_for_more_rows(site: Site) -> None:
    counted: list[str] = []

    def count(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        counted.append(statement)

    await a_conversation(site)
    await site.sign_in()
    sa.event.listen(site.store.engine.sync_engine, "before_cursor_execute", count)
    try:
        sizes = []
        for more in (0, 40):
            for n in range(more):
                extra = await site.store.active_session(f"slack:T1:dm:U{n:03}:{len(sizes)}", "bot")
                await site.store.append_message(extra.id, Message("user", f"teapots {n}"), person_id=site.person_id)
                await site.store.append_message(extra.id, Message("assistant", "teapots indeed"))
            counts = []
            for path in ("/admin/conversations", "/admin/conversations?q=teapots", "/admin/conversations/1"):
                counted.clear()
                await page(site, path)
                counts.append(len(counted))
            sizes.append(counts)
        assert all(more <= fewer <= 10 for fewer, more in zip(*sizes, strict=True)), sizes
    finally:
        sa.event.remove(site.store.engine.sync_engine, "before_cursor_execute", count)


def goal_target(user_id: str = "666", name: str = "Alice") -> dict[str, object]:
    message = InboundMessage("telegram", "bot", ChatKind.DM, user_id, user_id, "/goal tidy", "m1", user_name=name)
    return {"message": message_to_payload(message), "reply": message.reply_target().to_dict()}


async def test_goals_show_state_conversation_owner_turns_against_the_budget_and_the_last_verdict(site: Site) -> None:
    session = await site.store.active_session(KEY, "bot")
    goal = await site.store.create_goal(KEY, "bot", "Tidy the <b>inbox</b>", session_id=session.id,
                                        target=goal_target())
    await site.store.update_goal(goal.id, add_turns=3, add_tokens=1200,
                                 verdict={"verdict": "continue", "reason": "two folders left"})
    done = await site.store.create_goal("telegram:bot:dm:7", "bot", "Old goal", target=goal_target("7", "Bob"))
    await site.store.update_goal(done.id, status="done")
    await site.store.create_goal("telegram:x:dm:1", "other-bot", "Not this gateway's", target=goal_target("1"))
    await site.sign_in()
    body = await page(site, "/admin/goals")
    assert body.index("Tidy the &lt;b&gt;inbox&lt;/b&gt;") < body.index("Old goal")  # open goals first
    assert "Not this gateway" not in body and "2 in all" in body
    assert f'<a href="/admin/conversations/{session.id}">#{session.id}</a> {KEY}' in body
    assert "Alice (telegram:666)" in body and "<dd>3 of 20 <span" in body and "continue: two folders left" in body
    assert f'action="/admin/goals/{goal.id}/pause"' in body and f'action="/admin/goals/{goal.id}/clear"' in body
    assert f'action="/admin/goals/{done.id}/' not in body  # a finished goal has nothing to pause or clear


async def test_an_admin_pauses_then_clears_a_goal_as_the_goal_command_would_and_each_change_is_recorded(
        site: Site) -> None:
    goal = await site.store.create_goal(KEY, "bot", "Tidy the inbox", target=goal_target())
    csrf = await site.sign_in()
    paused = await site.client.post(f"/admin/goals/{goal.id}/pause", data={"csrf": csrf},
                                    headers={"Origin": site.origin})
    assert paused.status == 200 and "Goal paused." in await paused.text()
    assert (await site.store.get_goal(goal.id)).status == "paused"  # type: ignore[union-attr]
    again = await site.client.post(f"/admin/goals/{goal.id}/pause", data={"csrf": csrf}, headers={"Origin": site.origin})
    assert again.status == 409 and "cannot be paused; nothing was changed" in await again.text()
    cleared = await site.client.post(f"/admin/goals/{goal.id}/clear", data={"csrf": csrf},
                                     headers={"Origin": site.origin})
    assert cleared.status == 200 and "Goal cleared." in await cleared.text()
    assert (await site.store.get_goal(goal.id)).status == "cleared"  # type: ignore[union-attr]
    refused = await site.client.post(f"/admin/goals/{goal.id}/clear", data={"csrf": csrf},
                                     headers={"Origin": site.origin})
    assert refused.status == 409
    changes = [(c.admin, c.action, c.subject, c.detail) for c in await site.store.dashboard_changes()]
    assert changes[:2] == [("telegram:1", "goal.clear", f"goal {goal.id}", "Tidy the inbox"),
                           ("telegram:1", "goal.pause", f"goal {goal.id}", "Tidy the inbox")]
    other = await site.store.create_goal("telegram:x:dm:1", "other-bot", "Not ours", target=goal_target("1"))
    response = await site.client.post(f"/admin/goals/{other.id}/pause", data={"csrf": csrf},
                                      headers={"Origin": site.origin})
    assert response.status == 404 and (await site.store.get_goal(other.id)).status == "active"  # type: ignore[union-attr]


async def test_a_goal_an_admin_pauses_then_clears_here_is_told_in_the_conversation_that_set_it(
        engine, fake_llm, tmp_path: Path) -> None:
    feature = GoalFeature(GoalSettings(max_turns=20))
    e = await engine(features=[feature])
    fake_llm.responder, _ = goal_script([verdict("continue")], worker=lambda r, n: Reply(text=f"step {n}", delay=0.05))
    await e.say("/goal tidy the inbox")
    assert e.store is not None
    async with dashboard_on(e.store, tmp_path, bot=e.profile.name, goals={e.profile.name: feature}) as site:
        [goal] = await e.store.list_goals("active", bot=e.profile.name)
        csrf = await site.sign_in()
        told = len(e.outlet.delivered)
        paused = await site.client.post(f"/admin/goals/{goal.id}/pause", data={"csrf": csrf},
                                        headers={"Origin": site.origin})
        assert paused.status == 200
        await e.idle()
        notices = [d for d in e.outlet.delivered[told:] if "by an admin" in d.text]
        assert [n.text.splitlines()[:2] for n in notices] == [["⏸ Goal paused by an admin.", "Goal: tidy the inbox"]]
        assert notices[0].target.chat_id == goal.target["reply"]["chat_id"] and notices[0].kind == "send"
        cleared = await site.client.post(f"/admin/goals/{goal.id}/clear", data={"csrf": csrf},
                                         headers={"Origin": site.origin})
        assert cleared.status == 200
        assert e.outlet.texts[-1].startswith("Goal cleared by an admin.\nGoal: tidy the inbox")


async def test_the_pages_and_their_changes_refuse_a_visitor_without_a_session(site: Site) -> None:
    session_id, _ = await a_conversation(site)
    goal = await site.store.create_goal(KEY, "bot", "Tidy the inbox", target=goal_target())
    for verb, path in (("GET", "/admin/conversations"), ("GET", "/admin/conversations?q=teapots"),
                       ("GET", f"/admin/conversations/{session_id}"), ("GET", "/admin/goals"),
                       ("POST", f"/admin/goals/{goal.id}/pause"), ("POST", f"/admin/goals/{goal.id}/clear")):
        response = await site.client.request(verb, path, allow_redirects=False, headers={"Origin": site.origin})
        body = await response.text()
        assert response.status in (303, 401), (verb, path, response.status)
        assert "teapots" not in body and "Tidy" not in body
    assert (await site.store.get_goal(goal.id)).status == "active"  # type: ignore[union-attr]
