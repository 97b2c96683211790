"""The Telegram adapter end to end: the real python-telegram-bot against the fake Bot API, the real gateway
(SQLite) against the fake LLM. Assertions are about what a person in the chat would see."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from engine_harness import Engine, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeFile, FakeTelegram, FakeUser, utf16_len
from kanban_kit import QUIET_BOARD, board_markdown, planning, shipped_profile

from adapters.render import render_telegram
from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.errors import ConfigError
from hermes_engine.policy.pairing import ALPHABET, Pairing
from hermes_engine.ports.commands import Command
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.inbound import ReplyTarget

# Small intervals keep the suite fast where the behaviour does not depend on the real pacing
# (test_replies_respect_one_call_a_second_per_chat keeps the real 1 s).
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
ALICE = FakeUser(42, "Alice", "alice")
BOB = FakeUser(43, "Bob", "bob")
STRANGER = FakeUser(77, "Mallory", "mallory")
GROUP = -1001234567890
CODE = re.compile(rf"\b[{ALPHABET}]{{8}}\b")
# python-telegram-bot warns about its own RetryAfter.retry_after type change when it builds the error.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def tg(engine, telegram):
    """`await tg(...)` → (engine, adapter): a gateway with a started Telegram adapter. Stopped at teardown,
    adapters first (as the runner does)."""
    adapters: list[TelegramAdapter] = []

    async def make(*, allowed: tuple[str, ...] = ("42", "43"), admins: tuple[str, ...] = (),
                   options: dict[str, Any] | None = None, http_app: web.Application | None = None,
                   **profile: Any) -> tuple[Engine, TelegramAdapter]:
        options = {**FAST, **(options or {})}
        prof = make_profile(access={"allowed_users": list(allowed), "admins": list(admins)},
                            platforms={"telegram": options}, **profile)
        e = await engine(profile=prof)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), http_app, os.environ)
        e.gateway.attach(adapter)
        adapter.keep_rejects_in(e.store)  # as the runner wires it
        await adapter.start()
        await asyncio.wait_for(adapter.ready.wait(), 5)
        adapters.append(adapter)
        return e, adapter

    yield make
    for adapter in reversed(adapters):
        await adapter.stop()


async def final_answer(fake: FakeTelegram, e: Engine, chat_id: int, markdown: str, timeout: float = 10):
    """Wait until the chat shows the rendered final of `markdown` and the turn is over."""
    rendered = render_telegram(markdown)
    message = await fake.wait_for_text(chat_id, rendered.text, timeout)
    await e.idle(timeout)
    return message


# ----------------------------------------------------------------------------- replies


async def test_dm_reply_streams_into_one_message_then_shows_the_rendered_final(tg, telegram, fake_llm):
    answer = "**Paris** is the capital of France. It has been since the Middle Ages, more or less."
    fake_llm.script(Reply(text=answer, delay=0.08))
    e, adapter = await tg()
    telegram.user_says(42, ALICE, "What is the capital of France?")
    message = await final_answer(telegram, e, 42, answer)

    chat = telegram.chat(42)
    assert len(chat.bot_messages) == 1  # created once, then edited in place
    assert message.edits >= 2
    assert [text for _, text in message.history][:-1] == sorted(
        [text for _, text in message.history][:-1], key=len)  # interim frames only grow
    rendered = render_telegram(answer)
    assert message.text == rendered.text == "Paris is the capital of France. It has been since the Middle Ages, more or less."
    assert {"type": "bold", "offset": 0, "length": 5} in message.entities
    assert not any(m.formatted for m in chat.messages[:1])  # interim frames are plain
    assert chat.call_times(["sendChatAction"])  # typing was shown
    assert fake_llm.requests[0].last_user_text == "What is the capital of France?"


async def test_long_user_message_is_accepted_stored_and_answered(tg, telegram, fake_llm):
    fake_llm.script(Reply(text="That is a long one."))
    e, _ = await tg(context_window=400_000)  # the fake model's window would otherwise be the small default
    long_text = ("All work and no play makes Jack a dull boy. " * 2300)[:100_000]
    telegram.user_says(42, ALICE, long_text)
    await final_answer(telegram, e, 42, "That is a long one.")
    assert fake_llm.requests[0].last_user_text == long_text
    session = next(iter(e.gateway.sessions.values()))
    stored = await e.store.load_messages(session.record.id)
    assert stored[0].role == "user" and stored[0].content == long_text


def _long_reply_with_code() -> tuple[str, list[str]]:
    parts, markers = [], []
    for block in range(8):
        prose = " ".join(f"Sentence {block}.{i} explains the next step of the plan 🚀." for i in range(20))
        parts.append(prose)
        markers += [f"Sentence {block}.{i} " for i in range(20)]
        code = "\n".join(f"    print('block {block} line {i}')  # ✓ keep" for i in range(40))
        parts.append(f"```python\ndef step_{block}():\n{code}\n```")
        markers += [f"print('block {block} line {i}')" for i in range(40)]
    text = "\n\n".join(parts)
    assert len(text) > 20_000
    return text, markers


async def test_long_reply_with_code_is_split_within_the_limit_and_nothing_is_lost(tg, telegram, fake_llm):
    answer, markers = _long_reply_with_code()
    fake_llm.script(Reply(text=answer))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "write me a long program")
    await telegram.wait_for(lambda: fake_llm.requests, 5)
    await e.idle(20)
    await telegram.settle()

    messages = telegram.chat(42).bot_messages
    assert len(messages) >= 6
    assert all(utf16_len(m.text) <= 4096 for m in messages)
    assert all(m.entities for m in messages)  # every part rendered (code as `pre`, no stray fences)
    assert not any("```" in m.text for m in messages)
    shown = "\n".join(m.text for m in messages)
    positions = [shown.find(marker) for marker in markers]
    assert -1 not in positions and positions == sorted(positions)  # all there, in order
    for m in messages:  # every code line sits inside a code entity of its own message: fences balanced
        utf16 = m.text.encode("utf-16-le")
        pres = [(e["offset"], e["offset"] + e["length"]) for e in m.entities if e["type"] == "pre"]
        for match in re.finditer(r"print\('block \d+ line \d+'\)", m.text):
            at = len(m.text[: match.start()].encode("utf-16-le")) // 2
            assert any(a <= at < b for a, b in pres), (m.message_id, match.group())
        assert len(utf16) // 2 <= 4096


async def test_markup_the_platform_rejects_is_delivered_as_plain_text(tg, telegram, fake_llm):
    answer = "Use **bold** and `code` carefully."
    telegram.reject_markup = True
    fake_llm.script(Reply(text=answer))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "format something")
    message = await telegram.wait_for_text(42, answer)
    await e.idle()
    assert not message.formatted
    refused = [c for c in telegram.chat(42).calls if c.status == 400]
    assert refused and "can't parse entities" in refused[0].description
    assert telegram.chat(42).bot_texts == [answer]


async def test_replies_respect_one_call_a_second_per_chat(tg, telegram, fake_llm):
    words = [f"word{i} " for i in range(14)]
    fake_llm.script(Reply(chunks=words, delay=0.2))
    e, _ = await tg(options={"edit_interval_seconds": 1.0})
    telegram.user_says(42, ALICE, "stream slowly")
    await final_answer(telegram, e, 42, "".join(words).strip(), timeout=15)
    times = telegram.chat(42).call_times()
    assert len(times) >= 3
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.95, gaps


async def test_a_final_the_chat_already_shows_is_not_edited_into_itself(tg, telegram):
    _, adapter = await tg()
    target = ReplyTarget("telegram", adapter.account, "42")
    for n, markdown in enumerate(["Yes, I am here.", "**Paris** it is."]):
        stream = adapter.open_stream(target, idempotency_key=f"reply-{n}")
        await stream.push(markdown)
        await telegram.wait_for_text(42, markdown)  # the streamed frame shows the Markdown as written
        await stream.finish(markdown)
    await telegram.settle()
    calls = [(c.method, c.status) for c in telegram.chat(42).calls if c.method != "sendChatAction"]
    # The plain answer already shows as it should; the formatted one takes one edit, for its entities.
    assert calls == [("sendMessage", 200), ("sendMessage", 200), ("editMessageText", 200)]
    assert telegram.chat(42).bot_messages[1].entities == [{"type": "bold", "offset": 0, "length": 5}]


async def test_commands_are_registered_and_answered_without_the_model(tg, telegram, fake_llm):
    e, _ = await tg()
    names = [c["command"] for c in telegram.commands or []]
    assert names[0] == "start" and {"help", "new", "stop", "status"} <= set(names)
    telegram.user_says(42, ALICE, "/start")
    message = await telegram.wait_for(lambda: telegram.chat(42).bot_messages, 5)
    assert "/new" in message[0].text
    telegram.user_says(42, ALICE, "/new")
    await telegram.wait_for_text(42, "Started a new conversation.")
    assert fake_llm.requests == []


# ----------------------------------------------------------------------------- bad input


async def test_a_lone_surrogate_or_nul_is_made_valid_where_it_enters_and_the_chat_goes_on(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    e, _ = await tg()
    telegram.user_says(42, ALICE, "broken \ud800 x\x00y")  # JSON-escaped by the Bot API, as Telegram can
    await final_answer(telegram, e, 42, "Got: broken \ufffd xy")
    telegram.user_says(42, ALICE, "still there?")
    await final_answer(telegram, e, 42, "Got: still there?")
    session = next(iter(e.gateway.sessions.values()))
    stored = [m.content for m in await e.store.load_messages(session.record.id) if m.role == "user"]
    assert stored == ["broken \ufffd xy", "still there?"]


async def test_history_holding_a_lone_surrogate_from_before_loses_no_turn(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    e, _ = await tg()
    telegram.user_says(42, ALICE, "hello")
    await final_answer(telegram, e, 42, "Got: hello")
    session = next(iter(e.gateway.sessions.values()))
    # A live session's memory as a gateway without the inbound check could leave it.
    session.history.append(Message(role="user", content="said before the fix: \ud800"))
    telegram.user_says(42, ALICE, "are you there?")  # the request carries U+FFFD in its place
    await final_answer(telegram, e, 42, "Got: are you there?")
    telegram.user_says(42, ALICE, "and now?")
    await final_answer(telegram, e, 42, "Got: and now?")
    users = [m["content"] for m in fake_llm.requests[-1].messages if m["role"] == "user"]
    assert users == ["hello", "said before the fix: \ufffd", "are you there?", "and now?"]


async def test_a_malformed_update_is_rejected_alone_and_polling_goes_on(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    telegram.user_says(42, ALICE, "before")
    bad = telegram.push_update({"message": "just a string"})
    telegram.user_says(43, BOB, "after")
    last = telegram.push_update({"message": {"message_id": 9}})  # no date, no chat
    e, adapter = await tg()
    await final_answer(telegram, e, 42, "Got: before")
    await final_answer(telegram, e, 43, "Got: after")
    await telegram.wait_for(lambda: telegram.confirmed_offset > last["update_id"], 5)  # never fetched again
    assert [r.update_id for r in adapter.rejected] == [bad["update_id"], last["update_id"]]
    kept = await e.store.rejected_inbound("telegram")  # recorded before the offset moved past them
    assert [event.payload["update_id"] for event in kept] == [last["update_id"], bad["update_id"]]
    assert "just a string" in kept[1].payload["raw"] and kept[1].status == "rejected"
    assert await e.store.pending_inbound("telegram") == []  # never answered


async def test_a_malformed_update_is_rejected_alone_through_the_webhook(webhook_tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    e, adapter, _ = await webhook_tg()
    bad = telegram.push_update({"message": "just a string"})
    telegram.user_says(42, ALICE, "after")
    await final_answer(telegram, e, 42, "Got: after")
    assert bad["update_id"] in telegram.delivered_update_ids  # answered 200: Telegram does not send it again
    assert [r.update_id for r in adapter.rejected] == [bad["update_id"]]
    assert [event.payload["update_id"] for event in await e.store.rejected_inbound()] == [bad["update_id"]]
    signed = telegram.push_update({"message": {"message_id": 5, "from": {"id": 42, "is_bot": False}, "chat": 7}})
    await telegram.wait_for(lambda: signed["update_id"] in telegram.delivered_update_ids, 10)
    newest = (await e.store.rejected_inbound())[0]  # its sender kept as a message's, for /forget to find
    assert newest.payload["message"] == {"account": adapter.account, "user_id": "42"}


async def test_polling_moves_past_a_rejected_update_only_once_it_is_recorded(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    e, adapter = await tg()

    class FailsTwice:
        def __init__(self) -> None:
            self.failures = 0

        async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None:
            if self.failures < 2:
                self.failures += 1
                raise OSError("disk full")
            await e.store.record_rejected(platform, event_id, payload)

    log = FailsTwice()
    adapter.keep_rejects_in(log)
    bad = telegram.push_update({"message": "just a string"})
    telegram.user_says(42, ALICE, "after")
    await final_answer(telegram, e, 42, "Got: after")
    assert log.failures == 2 and telegram.confirmed_offset > bad["update_id"]
    assert [event.payload["update_id"] for event in await e.store.rejected_inbound()] == [bad["update_id"]]


async def test_a_rejected_update_that_cannot_be_recorded_is_left_for_telegram_to_send_again(webhook_tg, telegram,
                                                                                            fake_llm):
    class Broken:
        async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None:
            raise OSError("disk full")

    e, adapter, _ = await webhook_tg()
    adapter.keep_rejects_in(Broken())
    bad = telegram.push_update({"message": "just a string"})
    await telegram.wait_for(lambda: telegram.refused_update_ids.count(bad["update_id"]) >= 2, 10)
    assert bad["update_id"] not in telegram.delivered_update_ids  # still Telegram's to send: nothing is lost


# ----------------------------------------------------------------------------- rate limits and outages


async def test_rate_limited_chat_waits_out_retry_after_while_another_chat_flows(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Answer for {req.last_user_text}.")
    telegram.rate_limit(42, retry_after=2, times=2)  # a storm: the retry after the pause is refused too
    e, _ = await tg()
    telegram.user_says(42, ALICE, "alice")
    telegram.user_says(43, BOB, "bob")
    bob = await telegram.wait_for_text(43, "Answer for bob.")
    alice = await telegram.wait_for_text(42, "Answer for alice.", timeout=15)
    await e.idle()

    chat = telegram.chat(42)
    limited = [c for c in chat.calls if c.status == 429]
    assert len(limited) == 2 and chat.violations == []  # nothing sent to the chat inside a pause
    first_429 = limited[0].time
    assert limited[1].time - first_429 >= 1.95
    ok = [c.time for c in chat.calls if c.status == 200 and c.method != "sendChatAction"]
    assert ok and min(ok) - limited[1].time >= 1.95
    assert bob.history[-1][0] < first_429 + 2.0  # the other chat was answered during the pause
    assert alice.history[-1][0] > limited[1].time
    assert chat.bot_texts == ["Answer for alice."] and telegram.chat(43).bot_texts == ["Answer for bob."]


async def test_polling_recovers_from_a_bot_api_outage_and_nothing_is_lost(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Got: {req.last_user_text}")
    e, adapter = await tg()
    started = time.monotonic()
    telegram.outage(3.0)
    await asyncio.sleep(0.3)
    telegram.user_says(42, ALICE, "during the outage")
    await telegram.wait_for_text(42, "Got: during the outage", timeout=10)
    assert time.monotonic() - started >= 3.0
    hits = telegram.outage_hits
    assert 2 <= hits <= 20  # backed off instead of hammering
    telegram.user_says(42, ALICE, "after it")
    await telegram.wait_for_text(42, "Got: after it")
    await e.idle()
    assert telegram.chat(42).bot_texts == ["Got: during the outage", "Got: after it"]


async def test_a_reply_outlives_an_outage_that_starts_mid_stream(tg, telegram, fake_llm):
    answer = "one two three four five six seven eight"
    fake_llm.script(Reply(text=answer, delay=0.25))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "hi")
    await telegram.wait_for(lambda: telegram.chat(42).bot_messages, 5)
    telegram.outage(1.5)
    await final_answer(telegram, e, 42, answer, timeout=15)
    assert telegram.chat(42).bot_texts == [answer]


# ----------------------------------------------------------------------------- access


async def test_stranger_gets_only_a_pairing_code_and_no_model_call(tg, telegram, fake_llm):
    e, _ = await tg()
    telegram.user_says(77, STRANGER, "hi, who are you?")
    [reply] = await telegram.wait_for_messages(77, 1)
    code = CODE.search(reply.text).group()
    assert f"hermes-gateway pairing approve {code}" in reply.text and "77" in reply.text
    besides_the_code = reply.text.replace(code, "")  # a random code holds "42" about once in 150
    assert "42" not in besides_the_code and "Alice" not in besides_the_code
    for i in range(3):
        telegram.user_says(77, STRANGER, f"hello? {i}")
    await telegram.wait_for_messages(77, 3)
    await telegram.settle(0.5)
    texts = telegram.chat(77).bot_texts
    assert len(texts) == 3  # the same code again, then silence (rate limit)
    assert all(CODE.search(t).group() == code for t in texts)
    assert fake_llm.requests == []
    assert await e.store.pending_inbound() == []


async def test_approved_pairing_code_lets_the_person_in(telegram, fake_llm, tmp_path, monkeypatch):
    from engine_harness import fake_llm_environment
    from typer.testing import CliRunner

    from hermes_gateway.cli.pairing import app as pairing_app

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    fake_llm.script(Reply(text="Welcome aboard."))
    # Assembled as the runner does, so the gateway watches Telegram's approvals (and says "you now have access").
    e, adapter = await _life(tmp_path, make_profile(access={"allowed_users": ["42"]}), FAST, approvals_every=0.1)
    try:
        telegram.user_says(77, STRANGER, "let me in")
        [reply] = await telegram.wait_for_messages(77, 1)
        code = CODE.search(reply.text).group()

        result = await asyncio.to_thread(CliRunner().invoke, pairing_app, ["approve", code.lower()])
        assert result.exit_code == 0, result.output
        assert "77" in result.output
        await telegram.wait_for_text(77, "You now have access. Say hello!")
        telegram.user_says(77, STRANGER, "hello")
        await final_answer(telegram, e, 77, "Welcome aboard.")
        assert fake_llm.requests[0].last_user_text == "hello"
        assert Pairing.for_home(tmp_path).is_approved("telegram", "77")
    finally:
        await _end(e, adapter)


async def test_a_message_right_after_approval_gets_the_access_notice_first_then_its_answer(
        telegram, fake_llm, tmp_path, monkeypatch, caplog):
    from engine_harness import fake_llm_environment
    from typer.testing import CliRunner

    from hermes_gateway.cli.pairing import app as pairing_app

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    fake_llm.script(Reply(text="Welcome aboard."))
    e, adapter = await _life(tmp_path, make_profile(access={"allowed_users": ["42"]}), FAST)  # the usual poll
    try:
        telegram.user_says(77, STRANGER, "let me in")
        [reply] = await telegram.wait_for_messages(77, 1)
        result = await asyncio.to_thread(CliRunner().invoke, pairing_app, ["approve", CODE.search(reply.text).group()])
        assert result.exit_code == 0, result.output
        caplog.set_level("INFO", logger="adapters.telegram.adapter")

        telegram.user_says(77, STRANGER, "hello")
        await final_answer(telegram, e, 77, "Welcome aboard.")
        assert telegram.chat(77).bot_texts[1:] == ["You now have access. Say hello!", "Welcome aboard."]
        assert "not admitted" not in caplog.text
        [approval] = Pairing.for_home(tmp_path).approved()
        assert approval.notified  # told once: the poll has nothing left to say
    finally:
        await _end(e, adapter)


async def test_allowed_users_from_the_environment_are_served(tg, telegram, fake_llm, monkeypatch):
    monkeypatch.setenv("TELEGRAM_ALLOWED_USERS", "12, 77")
    fake_llm.script(Reply(text="Hi Mallory."))
    e, _ = await tg(allowed=())
    telegram.user_says(77, STRANGER, "hi")
    await final_answer(telegram, e, 77, "Hi Mallory.")
    assert telegram.chat(77).bot_texts == ["Hi Mallory."] and len(fake_llm.requests) == 1


async def test_group_answers_only_when_mentioned_replied_to_or_commanded(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text=f"Re: {req.last_user_text.split('] ', 1)[-1]}")
    e, _ = await tg()
    telegram.user_says(GROUP, ALICE, "hello everyone, lunch?", chat_type="supergroup")
    telegram.user_says(GROUP, STRANGER, "@hermes_test_bot tell me secrets", chat_type="supergroup")
    telegram.user_says(GROUP, ALICE, "/help@some_other_bot", chat_type="supergroup")
    telegram.user_says(GROUP, ALICE, "@hermes_test_bot what is 2+2?", chat_type="supergroup")
    first = await final_answer(telegram, e, GROUP, "Re: what is 2+2?")
    mention = telegram.chat(GROUP).user_messages[-1]
    assert first.reply_to == mention.message_id  # quoted in a group
    assert len(fake_llm.requests) == 1
    assert "@hermes_test_bot" not in fake_llm.requests[0].last_user_text

    telegram.user_says(GROUP, ALICE, "and times three?", chat_type="supergroup", reply_to=first.message_id)
    await final_answer(telegram, e, GROUP, "Re: and times three?")
    telegram.user_says(GROUP, ALICE, "/status", chat_type="supergroup")
    await telegram.wait_for(lambda: any(t.startswith("Bot: ") for t in telegram.chat(GROUP).bot_texts), 5)
    await e.idle()
    await telegram.settle()
    assert len(fake_llm.requests) == 2
    assert len(telegram.chat(GROUP).bot_messages) == 3  # nothing for the chatter, the stranger, the other bot


async def test_in_a_group_only_the_admin_the_operator_named_runs_admin_commands_and_passes_the_daily_limit(
        tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text="answer")
    e, _ = await tg(admins=("42",), limits={"turns_per_day": 1})

    async def secret(ctx) -> str:
        return "the admin secret"

    e.gateway.commands.add(Command("secret", "admins only", secret, admin_only=True))
    for user in (ALICE, BOB):
        for text in ("/secret", "@hermes_test_bot one", "@hermes_test_bot two"):
            telegram.user_says(GROUP, user, text, chat_type="supergroup")
    await telegram.wait_for(lambda: len(telegram.chat(GROUP).bot_texts) == 6, 10)
    await e.idle()
    texts = telegram.chat(GROUP).bot_texts
    assert texts.count("the admin secret") == 1 and texts.count("Only an admin of this bot can use that command.") == 1
    assert texts.count("answer") == 3 and len([t for t in texts if "daily limit of 1 turn" in t]) == 1
    assert len(fake_llm.requests) == 3  # Alice twice, Bob once


async def test_forum_topic_is_its_own_session_and_replies_land_in_the_topic(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text="In the topic.")
    e, _ = await tg()
    telegram.user_says(GROUP, ALICE, "@hermes_test_bot hi", chat_type="supergroup", thread_id=555)
    message = await final_answer(telegram, e, GROUP, "In the topic.")
    assert message.thread_id == 555
    assert [s.key for s in e.gateway.sessions.values()] == [f"telegram:{telegram.bot.id}:thread:{GROUP}:555"]


# ----------------------------------------------------------------------------- restarts


async def _life(home: Path, profile: Any, options: dict[str, Any],
                approvals_every: float | None = None) -> tuple[Engine, TelegramAdapter]:
    """A gateway process as the runner assembles it: adapter attached before the gateway starts.
    `approvals_every`: look for pairing approvals this often instead of the engine's few seconds."""
    from hermes_gateway.wiring import build_gateway
    from storage.store import SqlStore

    e = Engine(home, profile)
    e.store = SqlStore(e.settings.db_url)
    await e.store.init()
    e.gateway = build_gateway(e.settings, profile, e.store)
    if approvals_every is not None:  # no setting for it: the gateway's own watcher, polling faster
        gate = e.gateway.access
        gate.watch_approvals = functools.partial(gate.watch_approvals, every=approvals_every)
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    await e.gateway.start()
    await asyncio.wait_for(adapter.ready.wait(), 5)
    return e, adapter


async def _end(e: Engine, adapter: TelegramAdapter) -> None:
    await adapter.stop()  # the runner's order: adapters, then gateways
    await e.stop()


async def test_message_unanswered_at_a_kill_is_answered_once_after_restart(telegram, fake_llm, tmp_path, monkeypatch):
    from engine_harness import fake_llm_environment

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    profile = make_profile(access={"allowed_users": ["42"]})
    fake_llm.responder = lambda req: Reply(text="never finished", delay=30)
    e, adapter = await _life(tmp_path, profile, FAST)
    update = telegram.user_says(42, ALICE, "are you there?")
    await telegram.wait_for(lambda: fake_llm.requests, 5)
    await _end(e, adapter)  # mid-turn
    assert telegram.chat(42).bot_texts == []

    fake_llm.responder = lambda req: Reply(text="Yes, I am here.")
    telegram.push_update(update)  # Telegram resends what a killed poller never confirmed
    e, adapter = await _life(tmp_path, profile, FAST)
    try:
        await final_answer(telegram, e, 42, "Yes, I am here.")
        await telegram.wait_for(lambda: update["update_id"] in telegram.delivered_update_ids[1:], 5)
        await asyncio.sleep(0.3)
        await e.idle()
        assert telegram.chat(42).bot_texts == ["Yes, I am here."]  # once, not twice
        users = [m for m in fake_llm.requests[-1].messages if m["role"] == "user"]
        assert len(users) == 1
    finally:
        await _end(e, adapter)


async def test_messages_sent_while_the_gateway_was_down_are_answered_at_start(telegram, fake_llm, tmp_path, monkeypatch):
    from engine_harness import fake_llm_environment

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    fake_llm.responder = lambda req: Reply(text=f"Catching up: {req.last_user_text}")
    telegram.user_says(42, ALICE, "first while you slept")
    telegram.user_says(43, BOB, "second while you slept")
    e, adapter = await _life(tmp_path, make_profile(access={"allowed_users": ["42", "43"]}), FAST)
    try:
        await final_answer(telegram, e, 42, "Catching up: first while you slept")
        await final_answer(telegram, e, 43, "Catching up: second while you slept")
        webhook_calls = [c for c in telegram.requests if c.method == "deleteWebhook"]
        assert webhook_calls and all(c.params.get("drop_pending_updates") in (None, False) for c in webhook_calls)
    finally:
        await _end(e, adapter)


# ----------------------------------------------------------------------------- files


async def test_photo_and_document_are_downloaded_and_described_to_the_model(tg, telegram, fake_llm, tmp_path):
    fake_llm.responder = lambda req: Reply(text="Nice files.")
    e, _ = await tg()
    telegram.user_says(42, ALICE, "what is this?", photo=FakeFile("cat.jpg", b"\xff\xd8\xffjpegbytes" * 100, "image/jpeg"))
    await final_answer(telegram, e, 42, "Nice files.")
    telegram.user_says(42, ALICE, "", document=FakeFile("report.pdf", b"%PDF-1.4 hello", "application/pdf"))
    await telegram.wait_for(lambda: len(fake_llm.requests) >= 2, 5)
    await e.idle()

    first, second = fake_llm.requests[0].last_user_text, fake_llm.requests[1].last_user_text
    assert first.startswith("what is this?") and "[attachment: photo photo_" in first and "image/jpeg" in first
    user_content = [m for m in fake_llm.requests[0].messages if m["role"] == "user"][-1]["content"]
    images = [part for part in user_content if isinstance(part, dict) and part.get("type") == "image_url"]
    assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "[attachment: document report.pdf (application/pdf" in second
    folder = tmp_path / "attachments" / f"telegram_{telegram.bot.id}_dm_42"
    files = sorted(p.name for p in folder.iterdir())
    assert len(files) == 2 and any(f.endswith("report.pdf") for f in files)
    assert (folder / next(f for f in files if f.endswith("report.pdf"))).read_bytes() == b"%PDF-1.4 hello"
    assert any(f.endswith(".jpg") for f in files)


async def test_oversize_file_is_refused_politely_without_download(tg, telegram, fake_llm):
    fake_llm.responder = lambda req: Reply(text="Sorry, that file is too big for me.")
    e, _ = await tg(options={"max_file_mb": 1})
    telegram.user_says(42, ALICE, "read this", document=FakeFile("huge.zip", b"", "application/zip", size=5 * 1024 * 1024))
    await final_answer(telegram, e, 42, "Sorry, that file is too big for me.")
    text = fake_llm.requests[0].last_user_text
    assert "[attachment refused: huge.zip (application/zip, 5120 KB): larger than the 1 MB limit" in text
    assert telegram.downloads == [] and not any(c.method == "getFile" for c in telegram.requests)
    told, answer = telegram.chat(42).bot_texts
    assert told == "I did not read huge.zip: it is larger than the 1 MB limit for files."
    assert answer == "Sorry, that file is too big for me."


async def test_a_file_without_a_stated_size_is_refused_once_its_bytes_pass_the_limit(tg, telegram, fake_llm, tmp_path):
    fake_llm.responder = lambda req: Reply(text=f"Seen: {len(fake_llm.requests)}")
    e, _ = await tg(options={"max_file_mb": 1})
    telegram.user_says(42, ALICE, "read this", document=FakeFile("big.bin", b"x" * (3 * 1024 * 1024), stated=False))
    await telegram.wait_for(lambda: fake_llm.requests, 10)
    telegram.user_says(42, ALICE, "and this", document=FakeFile("small.txt", b"hello", "text/plain", stated=False))
    await telegram.wait_for(lambda: len(fake_llm.requests) >= 2, 10)
    await e.idle()
    big, small = fake_llm.requests[0].last_user_text, fake_llm.requests[1].last_user_text
    assert "[attachment refused: big.bin (application/octet-stream, " in big
    assert "larger than the 1 MB limit for files]" in big
    assert "[attachment: document small.txt (text/plain" in small
    assert "I did not read big.bin: it is larger than the 1 MB limit for files." in telegram.chat(42).bot_texts
    folder = tmp_path / "attachments" / f"telegram_{telegram.bot.id}_dm_42"
    assert [p.read_bytes() for p in folder.iterdir()] == [b"hello"]  # nothing of the big file was kept


# ----------------------------------------------------------------------------- webhook and configuration


@pytest.fixture
async def webhook_tg(tg, monkeypatch):
    """`await webhook_tg()` → (engine, adapter, url): a gateway with a Telegram adapter in webhook mode,
    served on a loopback port whose URL (secret "s3cret-token") it registers with the fake."""
    import socket

    runners: list[web.AppRunner] = []

    async def make() -> tuple[Engine, TelegramAdapter, str]:
        http = web.Application()
        runner = web.AppRunner(http)
        runners.append(runner)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        url = f"http://127.0.0.1:{port}/telegram/testbot"
        monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "s3cret-token")
        monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", url)
        # The route must exist before the server starts: build() adds it, then we serve.
        e, adapter = await tg(options={"mode": "webhook"}, http_app=http)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return e, adapter, url

    yield make
    for runner in runners:
        await runner.cleanup()


async def test_webhook_mode_takes_updates_with_the_right_secret_only(webhook_tg, telegram, fake_llm):
    from aiohttp import ClientSession

    fake_llm.script(Reply(text="Hooked."))
    e, adapter, url = await webhook_tg()
    assert telegram.webhook_url == url and telegram.webhook_secret == "s3cret-token"
    telegram.user_says(42, ALICE, "via webhook")
    await final_answer(telegram, e, 42, "Hooked.")
    async with ClientSession() as client:
        async with client.post(url, json={"update_id": 1}, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) \
                as response:
            assert response.status == 401
        await adapter.stop_receiving()  # shutting down: Telegram is told to keep the update for later
        async with client.post(url, json={"update_id": 1},
                               headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}) as response:
            assert response.status == 503


def test_build_needs_a_token_and_a_webhook_secret():
    class Engine:
        bot = "b"

    class Settings:
        home = Path("/tmp")

    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        PLATFORM.build(Engine(), Settings(), PLATFORM.parse_options({}), None, {})
    env = {"TELEGRAM_BOT_TOKEN": "123:abc"}
    webhook = PLATFORM.parse_options({"mode": "webhook"})
    with pytest.raises(ConfigError, match="TELEGRAM_WEBHOOK_SECRET"):
        PLATFORM.build(Engine(), Settings(), webhook, web.Application(), env)
    with pytest.raises(ConfigError, match="platforms.telegram.max_file_mb"):
        PLATFORM.parse_options({"max_file_mb": "lots"})
    with pytest.raises(ConfigError, match="platforms.telegram.approval_check_seconds"):
        PLATFORM.parse_options({"approval_check_seconds": 1})  # the engine watches approvals now
    assert PLATFORM.problems(PLATFORM.parse_options({}), {}) == [
        "telegram: set TELEGRAM_BOT_TOKEN (the bot's token from @BotFather)."]
    assert any("TELEGRAM_WEBHOOK_SECRET" in p for p in PLATFORM.problems(webhook, env))


async def test_bot_token_never_reaches_the_logs(tg, telegram, fake_llm, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    fake_llm.script(Reply(text="Quiet logs."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "hi")
    await final_answer(telegram, e, 42, "Quiet logs.")
    assert "getUpdates" in caplog.text and "<TELEGRAM_BOT_TOKEN>" in caplog.text
    assert telegram.token not in caplog.text
    assert telegram.token.split(":")[1] not in caplog.text


async def test_bot_token_stays_out_of_the_logs_when_a_document_is_downloaded(tg, telegram, fake_llm, caplog):
    """The file URL carries the token with its colon percent-encoded; httpx logs that URL at INFO."""
    import logging

    from hermes_gateway.cli.main import _setup_logging

    caplog.set_level(logging.DEBUG)
    saved = logging.getLogRecordFactory()
    _setup_logging("DEBUG")  # as `hermes-gateway run` sets up logging
    try:
        fake_llm.responder = lambda req: Reply(text="Got the report.")
        e, _ = await tg()
        telegram.user_says(42, ALICE, "", document=FakeFile("report.pdf", b"%PDF-1.4 hello", "application/pdf"))
        await final_answer(telegram, e, 42, "Got the report.")
    finally:
        logging.setLogRecordFactory(saved)
    assert telegram.downloads and "/file/bot[REDACTED]/documents/" in caplog.text
    assert telegram.token.split(":")[1] not in caplog.text


# ----------------------------------------------------------------------------- the task board


async def test_the_shipped_profile_lets_the_agent_and_kanban_commands_fill_the_board(tg, telegram, fake_llm):
    e, _ = await tg(toolsets=shipped_profile("telegram-dm-assistant").toolsets, kanban=QUIET_BOARD)
    assert "kanban" in [c["command"] for c in telegram.commands or []]
    fake_llm.responder = planning("pack the boxes")
    telegram.user_says(42, ALICE, "plan my move")
    await final_answer(telegram, e, 42, "On the board.")
    telegram.user_says(42, ALICE, "/kanban add buy milk")
    await telegram.wait_for_text(42, "Added card #2: buy milk")
    telegram.user_says(42, ALICE, "/kanban")
    await telegram.wait_for_text(42, render_telegram(board_markdown("pack the boxes", "buy milk")).text)
