"""Slack through the real slack-bolt app and slack-sdk client, against the fake Slack on 127.0.0.1.

Each bot is a real gateway (SQLite, the fake LLM) with the Slack adapter mounted in an aiohttp server on a
random loopback port, as the runner does. `HTTP_PROXY`/`HTTPS_PROXY` point at a dead port throughout:
slack-sdk would send every call there if the adapter did not honour `NO_PROXY` (which conftest sets).
Pacing is 0.02 s unless a test says otherwise; one test checks the real 1.2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from engine_harness import goal_script, is_judge, make_profile, verdict
from fakes.fake_llm import Reply
from fakes.fake_slack import APP_TOKEN, BOT_TOKEN, MAX_TEXT, SIGNING_SECRET, ApiCall, Delivery, FakeSlack
from kanban_kit import QUIET_BOARD, board_markdown, planning, shipped_profile
from slack_kit import serve_slack, slack_environment

from adapters.render import render_slack
from hermes_engine.config import GoalSettings
from hermes_engine.errors import ConfigError
from hermes_engine.loops.goals import GoalFeature
from hermes_engine.ports.commands import Command
from hermes_engine.ports.inbound import ReplyTarget

CHANNEL = "CGENERAL"
DM = "DALICE"


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


class SlackBot:
    def __init__(self, engine, adapter, fake, runner):
        self.engine, self.adapter, self.fake, self.runner = engine, adapter, fake, runner

    @property
    def gateway(self):
        return self.engine.gateway

    async def settle(self, timeout: float = 15.0) -> None:
        """Until no Slack event is being processed, no turn runs and no goal judge is pending."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while quiet < 3:
            busy = bool(self.adapter._tasks) or self.gateway.busy
            quiet = 0 if busy else quiet + 1
            if loop.time() > deadline:
                raise TimeoutError("the Slack bot did not settle")
            await asyncio.sleep(0.02)


@pytest.fixture
async def slack_bot(engine, fake_slack, monkeypatch):
    made: list[SlackBot] = []

    async def make(*, profile=None, features=None, options=None, socket_mode=False) -> SlackBot:
        slack_environment(monkeypatch, fake_slack, socket_mode=socket_mode)
        # slack-sdk would send everything through this dead proxy if the adapter did not honour NO_PROXY.
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        e = await engine(profile=profile, features=features, platform="slack")
        served = await serve_slack(e, events_from=None if socket_mode else fake_slack, options=options)
        bot = SlackBot(e, served.adapter, fake_slack, served.runner)
        made.append(bot)
        return bot

    yield make
    for bot in made:
        await bot.adapter.stop()
        await bot.runner.cleanup()



def mention(fake: FakeSlack, text: str) -> str:
    return f"<@{fake.bot_user}> {text}"


def worker_requests(fake_llm):
    return [r for r in fake_llm.requests if not is_judge(r)]


BUSY = 0.3  # seconds the fake Slack takes to answer the first Web API call of a request's work


def acked_before_its_work(delivery: Delivery, call: ApiCall) -> bool:
    """The app answered Slack's request before Slack answered `call`, a Web API call its work made (made slow
    with `FakeSlack.slow`): an app that waited for that work before acknowledging would answer after it."""
    return call.answered is not None and delivery.answered < call.answered


# -- conversations ---------------------------------------------------------------------------------------


async def test_mention_in_a_channel_streams_the_reply_natively_in_a_thread_under_it(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script(Reply(text="Here is **the plan**: first this, then that, and finally the rest.", delay=0.02))
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "what is the plan?"))
    await bot.settle()

    thread = fake_slack.thread(CHANNEL, asked.ts)
    assert [m.user for m in thread] == ["UALICE", fake_slack.bot_user]
    reply = thread[1]
    assert reply.thread_ts == asked.ts and reply.streamed and not reply.streaming
    assert reply.visible == "Here is **the plan**: first this, then that, and finally the rest."
    assert len(reply.edits) >= 2  # it grew in place: appended piece by piece
    assert not fake_slack.top_level(CHANNEL)[1:]  # nothing was posted in the channel itself
    # app_mention and message.channels both arrived for one message, and the bot's own post was echoed
    # back: exactly one model call, and the speaker is labelled with the Slack display name.
    assert len(fake_llm.requests) == 1
    assert fake_llm.requests[0].last_user_text.endswith("what is the plan?")
    assert "Alice" in fake_llm.requests[0].last_user_text
    start = fake_slack.calls_to("chat.startStream")[0].params
    assert start["recipient_user_id"] == "UALICE" and start["recipient_team_id"] == fake_slack.team


async def test_dm_is_answered_with_post_then_update_and_a_mrkdwn_final(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script(Reply(text="Sure. A **bold** idea and a [link](https://example.com) for 1 < 2.", delay=0.03))
    await fake_slack.say("UALICE", DM, "hello in private")
    await bot.settle()

    replies = fake_slack.bot_messages(DM)
    assert len(replies) == 1
    reply = replies[0]
    assert reply.thread_ts is None and not reply.streamed
    # Interim frames: the Markdown as written, plain (mrkdwn off), Slack's control characters escaped.
    post = fake_slack.calls_to("chat.postMessage")[0].params
    assert post["mrkdwn"] in (False, "0", "false", "False")
    assert reply.edits and any("**bold**" in e for e in reply.edits)
    assert all("<" not in e for e in reply.edits)
    # The final: rendered to mrkdwn, edited into the same message.
    assert reply.mrkdwn and "*bold*" in reply.text and "**bold**" not in reply.text
    assert "<https://example.com|link>" in reply.text
    assert "1 &lt; 2" in reply.text  # escaped, so model output cannot form Slack markup
    assert len(fake_llm.requests) == 1


async def test_when_slack_refuses_native_streams_replies_stream_by_update_instead(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_slack.fail("chat.startStream", status=200, error="missing_scope")
    fake_llm.script(Reply(text="Still answered, by post and update.", delay=0.02), "Second answer.")
    first = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "stream please"))
    await bot.settle()
    second = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "again"))
    await bot.settle()
    assert [m.visible for m in fake_slack.bot_messages(CHANNEL, first.ts)] == ["Still answered, by post and update."]
    assert [m.visible for m in fake_slack.bot_messages(CHANNEL, second.ts)] == ["Second answer."]
    assert len(fake_slack.calls_to("chat.startStream")) == 1  # not tried again after the refusal


async def test_a_streamed_reply_cannot_ping_the_channel(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script(Reply(chunks=["Attention <!channel> and ", "<!here>: done."], delay=0.02))
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "say something loud"))
    await bot.settle()
    reply = fake_slack.bot_messages(CHANNEL, asked.ts)[0]
    assert reply.streamed and "<!channel>" not in reply.text and "<!here>" not in reply.text


NAMED = "Ask <@U0BOB>, <@W0CAROL|carol>, <!subteam^S0DEVS|devs> or <!everyone>: all of them."


@pytest.mark.parametrize("where", ["thread", "dm"])
async def test_no_frame_of_a_reply_pings_anyone_the_model_named(slack_bot, fake_slack, fake_llm, where):
    """Streamed natively in a thread or by post and update in a DM; some mentions come whole in one piece,
    others split after their `<`, so they would form only where Slack joins the pieces."""
    bot = await slack_bot()
    fake_llm.script(Reply(chunks=["Ask <@U0BOB>, <", "@W0CAROL|carol>, <!subteam^S0DEVS|devs> or <",
                                  "!everyone>: all of them."], delay=0.05))
    if where == "thread":
        asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "name everyone"))
        await bot.settle()
        [reply] = fake_slack.bot_messages(CHANNEL, asked.ts)
        assert reply.streamed and len(reply.edits) >= 2
    else:
        await fake_slack.say("UALICE", DM, "name everyone")
        await bot.settle()
        [reply] = fake_slack.bot_messages(DM)
        assert not reply.streamed and len(reply.edits) >= 2
    assert reply.pings == []
    shown = reply.visible.replace("\u200b", "")
    assert NAMED in shown  # as the model wrote it, the zero-width space aside


async def test_a_reply_in_the_bots_thread_is_answered_without_a_mention(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script("First answer.", "Second answer, same thread.")
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "start something"))
    await bot.settle()
    await fake_slack.say("UBOB", CHANNEL, "and what about this?", thread_ts=asked.ts)
    await bot.settle()

    texts = [m.visible for m in fake_slack.bot_messages(CHANNEL, asked.ts)]
    assert texts == ["First answer.", "Second answer, same thread."]
    second = fake_llm.requests[1]
    assert "start something" in json.dumps(second.messages)  # one session per thread: history kept
    assert "Bob" in second.last_user_text
    assert sorted(c.params["user"] for c in fake_slack.calls_to("users.info")) == ["UALICE", "UBOB"]  # cached


async def test_thread_membership_survives_a_restart_through_conversations_replies(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script("Answer one.", "Answer two.")
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "remember this thread"))
    await bot.settle()
    bot.adapter.threads.forget()  # what a restart forgets
    await fake_slack.say("UALICE", CHANNEL, "still there?", thread_ts=asked.ts)
    await bot.settle()
    assert [m.visible for m in fake_slack.bot_messages(CHANNEL, asked.ts)] == ["Answer one.", "Answer two."]
    assert len(fake_slack.calls_to("conversations.replies")) == 1


async def test_messages_the_bot_is_not_part_of_are_ignored(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    plain = await fake_slack.say("UALICE", CHANNEL, "just people talking")
    await fake_slack.say("UBOB", CHANNEL, "a reply in their own thread", thread_ts=plain.ts)
    await fake_slack.say("UBOB", CHANNEL, "and another one", thread_ts=plain.ts)
    await bot.settle()
    assert fake_llm.requests == []
    assert fake_slack.bot_messages(CHANNEL) == []
    assert len(fake_slack.calls_to("conversations.replies")) == 1  # the negative answer is cached


async def test_the_bots_own_messages_and_other_bots_are_ignored(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script("Only answer.")
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "hi"))
    await bot.settle()
    # Streams are not echoed by the fake; play Slack delivering the bot's own posts (they carry bot_id):
    await fake_slack.say(fake_slack.bot_user, CHANNEL, "I am the bot talking", thread_ts=asked.ts,
                         bot_id=fake_slack.bot_id)
    await fake_slack.say(fake_slack.bot_user, DM, "bot in a DM", bot_id=fake_slack.bot_id)
    await fake_slack.say("UOTHERBOT", CHANNEL, mention(fake_slack, "hey bot, answer me"), bot_id="BOTHER")
    await fake_slack.say("UOTHERBOT", CHANNEL, "another bot in the thread", thread_ts=asked.ts, bot_id="BOTHER")
    await bot.settle()
    assert len(fake_llm.requests) == 1
    posted = [c for c in fake_slack.calls if c.method in ("chat.postMessage", "chat.startStream")]
    assert len(posted) == 1  # the one answer; nothing in reply to itself or the other bot


async def test_other_bots_are_answered_when_the_profile_allows_bots(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot(profile=make_profile(access={"allow_bots": True}))
    fake_llm.script("Hello fellow bot.")
    await fake_slack.say("UOTHERBOT", CHANNEL, mention(fake_slack, "hey bot"), bot_id="BOTHER")
    await bot.settle()
    assert [m.visible for m in fake_slack.bot_messages(CHANNEL)] == ["Hello fellow bot."]
    # ...but never itself, even then
    await fake_slack.say(fake_slack.bot_user, DM, "bot in a DM", bot_id=fake_slack.bot_id)
    await bot.settle()
    assert len(fake_llm.requests) == 1


async def test_people_outside_allowed_users_are_ignored(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot(profile=make_profile(access={"allowed_users": ["UBOB"]}))
    fake_llm.script("Hi Bob.")
    await fake_slack.say("UALICE", DM, "let me in")
    await fake_slack.say("UBOB", "DBOB", "hello")
    await bot.settle()
    assert len(fake_llm.requests) == 1
    assert fake_slack.bot_messages(DM) == [] and len(fake_slack.bot_messages("DBOB")) == 1


async def test_in_a_channel_only_the_admin_the_operator_named_runs_admin_commands_and_passes_the_daily_limit(
        slack_bot, fake_slack, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    bot = await slack_bot(profile=make_profile(access={"admins": ["UBOSS"]}, limits={"turns_per_day": 1}))

    async def secret(ctx) -> str:
        return "the admin secret"

    bot.gateway.commands.add(Command("secret", "admins only", secret, admin_only=True))
    for user in ("UBOSS", "UBOB"):  # Bob is a member of the workspace, which names no admin of the bot
        for text in ("/secret", "one", "two"):
            await fake_slack.say(user, CHANNEL, mention(fake_slack, text))
    await fake_slack.wait_for(lambda: len(fake_slack.bot_messages(CHANNEL)) == 6, 15)
    await bot.settle()
    texts = [m.visible for m in fake_slack.bot_messages(CHANNEL)]
    assert texts.count("the admin secret") == 1 and texts.count("Only an admin of this bot can use that command.") == 1
    assert texts.count("answer") == 3 and len([t for t in texts if "daily limit of 1 turn" in t]) == 1
    assert len(fake_llm.requests) == 3  # the admin twice, Bob once


async def test_a_person_of_another_organisation_in_a_shared_channel_is_answered_only_when_listed(
        slack_bot, fake_slack, fake_llm, caplog):
    caplog.set_level(logging.INFO, logger="adapters.slack")
    fake_llm.responder = lambda request: Reply(text="answer")
    bot = await slack_bot(profile=make_profile(access={"admins": ["UPARTNER"]}))
    await fake_slack.say("UOUTSIDER", CHANNEL, mention(fake_slack, "run up your bill"), team="TOTHER")
    await fake_slack.say("UOUTSIDER", CHANNEL, mention(fake_slack, "and again"), team="TOTHER")
    await fake_slack.say("UPARTNER", CHANNEL, mention(fake_slack, "a question"), team="TOTHER")
    await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "mine"))  # a member: the workspace lets her in
    await fake_slack.wait_for(lambda: len(fake_slack.bot_messages(CHANNEL)) == 2, 15)
    await bot.settle()
    assert [r.last_user_text.split("] ", 1)[-1] for r in fake_llm.requests] in (
        ["a question", "mine"], ["mine", "a question"])
    assert len([r for r in caplog.records if "workspace TOTHER" in r.getMessage()]) == 1


# -- the Events API contract -----------------------------------------------------------------------------


async def test_forged_signature_or_stale_timestamp_gets_401_and_no_work(slack_bot, fake_slack, fake_llm):
    import time

    bot = await slack_bot()
    event = {"type": "message", "channel": DM, "user": "UALICE", "text": "hi", "ts": "1.000001",
             "channel_type": "im"}
    forged = await fake_slack.post_event(event, secret="not-the-secret")
    stale = await fake_slack.post_event(event, timestamp=time.time() - 301)
    garbage = await fake_slack.post_event(event, signature="v0=deadbeef")
    command = await fake_slack.post_command("/goal", "do evil", channel=CHANNEL, secret="not-the-secret")
    retry = await fake_slack.post_event(event, event_id="EvFORGED", retry_num=1, secret="not-the-secret")
    await bot.settle()
    assert [d.status for d in (forged, stale, garbage, command, retry)] == [401] * 5
    assert fake_llm.requests == []
    assert fake_slack.bot_messages(DM) == [] and fake_slack.bot_messages(CHANNEL) == []
    assert await bot.engine.store.pending_inbound() == []
    assert [c.method for c in fake_slack.calls if c.method != "auth.test"] == []


async def test_a_signed_body_that_is_not_a_json_object_gets_400_and_the_bot_goes_on(slack_bot, fake_slack, fake_llm,
                                                                                   caplog):
    bot = await slack_bot()
    bodies = ['{"type": "event_callback", "event": {"type": "mess', "[1, 2]", "null",
              '{"type": "event_callback", "event": "just a string"}']
    refused = [await fake_slack.post_signed(body, "application/json") for body in bodies]
    forged = await fake_slack.post_signed("[1, 2]", "application/json", secret="not-the-secret")
    assert [d.status for d in refused] == [400] * 4 and forged.status == 401
    assert caplog.text.count("refused a signed Slack request whose body cannot be read") == 4
    assert '"event": {"type": "mess' in caplog.text  # what arrived is in the log
    fake_llm.script("Still here.")
    delivery = await fake_slack.post_event({"type": "message", "channel": DM, "user": "UALICE", "text": "hi",
                                            "ts": "3.000001", "channel_type": "im"})
    await bot.settle()
    assert delivery.status == 200 and [m.visible for m in fake_slack.bot_messages(DM)] == ["Still here."]


async def test_a_slightly_old_but_valid_timestamp_is_accepted(slack_bot, fake_slack, fake_llm):
    import time

    bot = await slack_bot()
    fake_llm.script("ok")
    event = {"type": "message", "channel": DM, "user": "UALICE", "text": "hi", "ts": "2.000001",
             "channel_type": "im"}
    delivery = await fake_slack.post_event(event, timestamp=time.time() - 240)
    await bot.settle()
    assert delivery.status == 200 and len(fake_slack.bot_messages(DM)) == 1


async def test_an_event_retried_three_times_is_answered_once(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script(Reply(text="Answered once.", delay=0.05))
    fake_slack.slow("users.info", BUSY)  # reading the event asks who wrote it first
    message = fake_slack.store_user_message("UALICE", DM, "are you there?")
    event = fake_slack.message_event(message, channel_type="im")
    first = await fake_slack.post_event(event, event_id="EvRETRIED")
    retries = [await fake_slack.post_event(event, event_id="EvRETRIED", retry_num=n) for n in (1, 2, 3)]
    await bot.settle()
    assert [d.status for d in (first, *retries)] == [200] * 4
    assert all(acked_before_its_work(d, fake_slack.calls_to("users.info")[0]) for d in (first, *retries))
    assert [d.headers.get("X-Slack-No-Retry") for d in retries] == ["1"] * 3  # short-circuited
    assert len(fake_llm.requests) == 1
    assert [m.visible for m in fake_slack.bot_messages(DM)] == ["Answered once."]


async def test_retries_of_an_event_whose_first_delivery_was_lost_are_answered_once(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    fake_llm.script("Got it on the retry.")
    message = fake_slack.store_user_message("UALICE", DM, "lost in transit")
    event = fake_slack.message_event(message, channel_type="im")
    await asyncio.gather(*(fake_slack.post_event(event, event_id="EvLOST", retry_num=n) for n in (1, 2, 3)))
    await bot.settle()
    assert len(fake_llm.requests) == 1
    assert [m.visible for m in fake_slack.bot_messages(DM)] == ["Got it on the retry."]


async def test_url_verification_is_answered_with_the_challenge(slack_bot, fake_slack):
    await slack_bot()
    delivery = await fake_slack.post_signed(json.dumps({"type": "url_verification", "challenge": "c-123",
                                                        "token": "x"}), "application/json")
    assert delivery.status == 200 and "c-123" in delivery.body


# -- pacing, rate limits and long replies --------------------------------------------------------------


def _gaps(calls) -> list[float]:
    return [b.at - a.at for a, b in zip(calls, calls[1:], strict=False)]


async def test_a_429_on_chat_update_pauses_the_channel_and_the_reply_completes(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    words = [f"word{i} " for i in range(40)]
    fake_llm.script(Reply(chunks=words, delay=0.02))
    fake_slack.fail("chat.update", status=429, retry_after=1)
    await fake_slack.say("UALICE", DM, "talk to me")
    await bot.settle()

    replies = fake_slack.bot_messages(DM)
    assert [m.visible for m in replies] == ["".join(words).strip()]
    updates = fake_slack.calls_to("chat.update")
    limited = next(i for i, c in enumerate(updates) if c.status == 429)
    after = updates[limited + 1:]
    assert after, "the reply was completed after the rate limit"
    assert after[0].at - updates[limited].at >= 0.95  # Retry-After: 1 honoured for this channel


async def test_real_pacing_keeps_calls_to_a_channel_1_2_seconds_apart(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot(options={"edit_interval_seconds": 1.2})
    fake_llm.script(Reply(chunks=[f"part{i} " for i in range(24)], delay=0.1))  # ~2.4 s of streaming
    await fake_slack.say("UALICE", DM, "stream slowly")
    await bot.settle()
    calls = [c for c in fake_slack.calls if c.method in ("chat.postMessage", "chat.update")
             and c.params.get("channel") == DM]
    assert len(calls) >= 3
    assert min(_gaps(calls)) >= 1.15
    assert fake_slack.bot_messages(DM)[0].visible == "".join(f"part{i} " for i in range(24)).strip()


def _long_text(words: int = 7500) -> str:
    paragraphs, line = [], []
    for i in range(words):
        line.append(f"w{i:05d}")
        if len(line) == 60:
            paragraphs.append(" ".join(line) + ".")
            line = []
    paragraphs.append(" ".join(line) + ".")
    return "\n\n".join(paragraphs)


def _assert_all_words_in_order(text: str, words: int) -> None:
    found = [t.strip(".") for t in text.split() if t.startswith("w")]
    assert found == [f"w{i:05d}" for i in range(words)]


async def test_a_50k_reply_in_a_dm_is_split_into_valid_messages_with_nothing_lost(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    text = _long_text()
    assert len(text) > 50_000
    fake_llm.script(Reply(text=text))
    await fake_slack.say("UALICE", DM, "write a lot")
    await bot.settle(timeout=30)
    replies = fake_slack.bot_messages(DM)
    assert len(replies) == 2
    assert all(len(m.text) <= MAX_TEXT for m in replies)
    assert not [c for c in fake_slack.calls if c.error == "msg_too_long"]
    _assert_all_words_in_order("\n".join(m.visible for m in replies), 7500)


async def test_an_answer_the_output_limit_cut_twice_reaches_the_person_whole(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot(profile=make_profile(model="anthropic:claude-sonnet-4-5"))
    text = _long_text()
    third = len(text) // 3  # the cuts fall inside words
    fake_llm.script(Reply(text=text[:third], at_limit=True), Reply(text=text[third:2 * third], at_limit=True),
                    Reply(text=text[2 * third:]))
    await fake_slack.say("UALICE", DM, "write a lot")
    await bot.settle(timeout=30)
    shown = "\n".join(m.visible for m in fake_slack.bot_messages(DM))
    _assert_all_words_in_order(shown, 7500)
    assert len(fake_llm.requests) == 3 and "output limit" not in shown


async def test_a_50k_reply_in_a_thread_falls_back_from_native_streaming_and_splits(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    text = _long_text()
    fake_llm.script(Reply(chunks=[text[i:i + 5000] for i in range(0, len(text), 5000)], delay=0.03))
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "write a lot here"))
    await bot.settle(timeout=30)
    replies = fake_slack.bot_messages(CHANNEL, asked.ts)
    assert len(replies) == 2 and all(not m.streaming for m in replies)
    assert all(len(m.text) <= MAX_TEXT for m in replies)
    assert replies[0].streamed  # it started as a native stream
    _assert_all_words_in_order("\n".join(m.visible for m in replies), 7500)


async def test_a_long_reply_in_a_thread_continues_in_more_streamed_messages_with_fences_balanced(
        slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    code = "\n".join(f"    value_{i:04d} = compute({i})  # w{i:05d}" for i in range(350))
    text = _long_text(2400) + "\n\n```python\n" + code + "\n```\n\n" + _long_text(1600)
    assert 41_000 < len(text) < 43_000
    fake_llm.script(Reply(chunks=[text[i:i + 3000] for i in range(0, len(text), 3000)], delay=0.02))
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "write a lot here"))
    await bot.settle(timeout=30)
    replies = fake_slack.bot_messages(CHANNEL, asked.ts)
    assert len(replies) >= 2 and all(m.streamed and not m.streaming for m in replies)
    assert all(len(m.text) <= MAX_TEXT for m in replies)
    for message in replies:  # every message renders on its own: its code fences are balanced
        assert sum(1 for line in message.text.splitlines() if line.strip().startswith("```")) % 2 == 0
    assert not [c for c in fake_slack.calls if c.error]
    shown = "\n".join(m.visible for m in replies)
    assert [t for t in shown.split() if "w" in t] == [t for t in text.split() if "w" in t]  # nothing lost or cut


async def test_a_reply_left_streaming_by_a_crash_is_closed_and_completed_in_place_after_the_restart(
        slack_bot, fake_slack):
    from adapters.slack import PLATFORM

    bot = await slack_bot()
    asked = fake_slack.store_user_message("UALICE", DM, "tell me something long")
    target = ReplyTarget("slack", fake_slack.team, DM, thread_id=asked.ts)
    await bot.adapter.open_stream(target, idempotency_key="e1:reply").push("A first try that was ")
    await fake_slack.wait_for(lambda: any(m.streaming for m in fake_slack.bot_messages(DM, asked.ts)))
    [left] = fake_slack.bot_messages(DM, asked.ts)  # the process dies here: the stream stays open

    second_life = PLATFORM.build(bot.gateway, bot.engine.settings,
                                 PLATFORM.parse_options({"edit_interval_seconds": 0.02}), web.Application(),
                                 os.environ)
    second_life.keep_deliveries_in(bot.adapter.ledger)  # the durable ledger outlives the process
    await second_life.start()
    try:
        await second_life.open_stream(target, idempotency_key="e1:reply").finish("The **whole** answer.")
    finally:
        await second_life.stop()
    [shown] = fake_slack.bot_messages(DM, asked.ts)
    assert shown.ts == left.ts and not shown.streaming  # completed in place, not posted again below
    assert shown.visible == "The *whole* answer."
    assert not [c for c in fake_slack.calls if c.error]


# -- slash commands and goals ----------------------------------------------------------------------------


async def goal_bot(slack_bot):
    return await slack_bot(features=[GoalFeature(GoalSettings(max_turns=20))])


async def test_goal_command_acks_at_once_and_works_in_the_anchor_thread(slack_bot, fake_slack, fake_llm):
    bot = await goal_bot(slack_bot)
    fake_llm.responder, state = goal_script([verdict("continue", "half the notes are in"),
                                             verdict("done", "the checklist is complete")])
    fake_slack.slow("chat.postMessage", BUSY)  # the goal's anchor
    ack = await fake_slack.post_command("/goal", "migrate these notes into a checklist", channel=CHANNEL)
    assert ack.status == 200
    await bot.settle()
    assert acked_before_its_work(ack, fake_slack.calls_to("chat.postMessage")[0])

    anchors = fake_slack.top_level(CHANNEL)
    assert len(anchors) == 1 and anchors[0].from_bot
    assert anchors[0].visible.startswith("🎯 Goal: migrate these notes into a checklist")
    thread = [m.visible for m in fake_slack.bot_messages(CHANNEL, anchors[0].ts)][1:]
    assert any(t.startswith("🎯 Goal set: migrate these notes into a checklist") for t in thread)
    assert "worked step 1" in thread and "worked step 2" in thread
    assert thread[-1].startswith("✅ Goal done: migrate these notes into a checklist")
    assert state["worker"] == 2
    assert worker_requests(fake_llm)[0].last_user_text.endswith("migrate these notes into a checklist")

    fake_slack.slow("users.info", BUSY)  # the command's work first asks who Bob is
    status_ack = await fake_slack.post_command("/goal", "status", channel=CHANNEL, user="UBOB")
    assert status_ack.status == 200 and "thread" in status_ack.body
    await bot.settle()
    assert acked_before_its_work(status_ack, fake_slack.calls_to("users.info")[-1])
    status = fake_slack.bot_messages(CHANNEL, anchors[0].ts)[-1].visible
    assert "Status: done" in status and "Turns used: 2" in status
    assert "1. continue: half the notes are in" in status and "2. done: the checklist is complete" in status


async def test_a_goal_whose_turns_outlast_a_lease_renewal_logs_no_duplicate_event(
        slack_bot, fake_slack, fake_llm, monkeypatch, caplog):
    # Renewals (and the goals' look for orphans) every 0.2 s, each worker turn near a second: several looks land on a
    # turn still queued or running: none hands it in again (it would be dropped as a duplicate event).
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "0.6")
    caplog.set_level(logging.DEBUG)
    bot = await goal_bot(slack_bot)
    fake_llm.responder, state = goal_script([verdict("continue"), verdict("done")],
                                            worker=lambda r, n: Reply(text=f"step {n}", delay=0.15))
    ack = await fake_slack.post_command("/goal", "tidy the notes", channel=CHANNEL)
    assert ack.status == 200
    await bot.settle()
    anchor = fake_slack.top_level(CHANNEL)[0]
    assert fake_slack.bot_messages(CHANNEL, anchor.ts)[-1].visible.startswith("✅ Goal done: tidy the notes")
    assert state["worker"] == 2
    # A look that lands between a turn's end and its judge's start hands the answered turn in again, and the
    # inbox drops it (goals.py `_judged`): a debug line at most, never one an operator sees.
    assert [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage() and r.levelno >= logging.INFO] == []


async def test_a_second_goal_in_the_same_thread_is_refused_not_started(slack_bot, fake_slack, fake_llm):
    bot = await goal_bot(slack_bot)
    fake_llm.responder, state = goal_script([verdict("continue")],
                                            worker=lambda r, n: Reply(text=f"step {n}", delay=0.05))
    await fake_slack.post_command("/goal", "first goal", channel=CHANNEL)
    await fake_slack.wait_for(lambda: len(fake_slack.bot_messages(CHANNEL)) >= 2)
    anchor = fake_slack.top_level(CHANNEL)[0]
    await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "/goal a second goal"), thread_ts=anchor.ts)
    await fake_slack.wait_for(lambda: any("already running" in m.visible
                                          for m in fake_slack.bot_messages(CHANNEL, anchor.ts)))
    refusal = next(m.visible for m in fake_slack.bot_messages(CHANNEL, anchor.ts) if "already running" in m.visible)
    assert "first goal" in refusal and "/goal clear" in refusal
    clear_ack = await fake_slack.post_command("/goal", "clear", channel=CHANNEL)
    assert clear_ack.status == 200
    await bot.settle()
    assert any(m.visible == "Goal cleared." for m in fake_slack.bot_messages(CHANNEL, anchor.ts))
    goals = await bot.engine.store.list_goals(bot=bot.gateway.bot)
    assert [(g.text, g.status) for g in goals] == [("first goal", "cleared")]
    assert not any("a second goal" in r.last_user_text for r in worker_requests(fake_llm))
    assert len(fake_slack.top_level(CHANNEL)) == 1  # no second anchor


async def test_goal_subcommand_without_a_goal_thread_answers_ephemerally(slack_bot, fake_slack, fake_llm):
    await goal_bot(slack_bot)
    ack = await fake_slack.post_command("/goal", "status", channel=CHANNEL)
    assert ack.status == 200 and "no goal in this channel" in ack.body
    usage = await fake_slack.post_command("/goal", "", channel=CHANNEL)
    assert "Usage" in usage.body
    assert fake_slack.bot_messages(CHANNEL) == [] and fake_llm.requests == []


async def test_goal_where_the_bot_cannot_post_is_answered_through_response_url(slack_bot, fake_slack, fake_llm):
    bot = await goal_bot(slack_bot)
    fake_slack.fail("chat.postMessage", status=200, error="not_in_channel")
    ack = await fake_slack.post_command("/goal", "something", channel="CPRIVATE")
    assert ack.status == 200
    await fake_slack.wait_for(lambda: bool(fake_slack.responses))
    await bot.settle()
    assert "Invite me" in fake_slack.responses[0]["text"]
    assert fake_slack.responses[0]["response_type"] == "ephemeral"
    assert fake_llm.requests == []


async def test_hermes_command_runs_engine_commands_where_the_person_talks_to_the_bot(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot()
    help_ack = await fake_slack.post_command("/hermes", "help", channel=DM)
    await bot.settle()
    assert help_ack.status == 200
    assert "/new" in fake_slack.bot_messages(DM)[-1].visible

    fake_llm.script("Thread answer.")
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "open a thread"))
    await bot.settle()
    status_ack = await fake_slack.post_command("/hermes", "status", channel=CHANNEL)
    await bot.settle()
    assert "thread" in status_ack.body
    status = fake_slack.bot_messages(CHANNEL, asked.ts)[-1].visible
    assert "Session:" in status and "2 messages" in status

    new_ack = await fake_slack.post_command("/hermes", "new", channel=CHANNEL)
    await bot.settle()
    assert new_ack.status == 200
    assert fake_slack.bot_messages(CHANNEL, asked.ts)[-1].visible == "Started a new conversation."
    bogus = await fake_slack.post_command("/hermes", "frobnicate", channel=CHANNEL)
    assert "Usage" in bogus.body


# -- Socket Mode -------------------------------------------------------------------------------------------


async def wait_until(predicate, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.02)


async def test_socket_mode_answers_and_reconnects_after_a_disconnect(slack_bot, fake_slack, fake_llm):
    # A short ping interval makes slack-sdk call a busy connection stale (4 intervals without a pong) and
    # reconnect on its own; 2 s keeps that out of this test while a CLOSE still reconnects at once.
    bot = await slack_bot(socket_mode=True, options={"socket_ping_interval": 2.0})
    fake_llm.script("First over the socket.", "Second after a reconnect.", "Third after a refresh.")
    await fake_slack.wait_for_socket()
    await fake_slack.say("UALICE", DM, "hello over a websocket")
    await bot.settle()
    assert [m.visible for m in fake_slack.bot_messages(DM)] == ["First over the socket."]

    before = fake_slack.sockets_accepted
    await fake_slack.drop_sockets()
    await wait_until(lambda: fake_slack.sockets_accepted > before and fake_slack.sockets == 1)
    await fake_slack.say("UALICE", DM, "still there?")
    await bot.settle()

    before = fake_slack.sockets_accepted
    await fake_slack.request_refresh()
    await wait_until(lambda: fake_slack.sockets_accepted > before and fake_slack.sockets == 1)
    await fake_slack.say("UALICE", DM, "and now?")
    await bot.settle()
    assert [m.visible for m in fake_slack.bot_messages(DM)] == [
        "First over the socket.", "Second after a reconnect.", "Third after a refresh."]
    assert fake_slack.connections_opened >= 3  # a fresh URL from apps.connections.open each time
    # Slash commands come over the socket too, acknowledged with their ephemeral answer as the payload.
    ack = await fake_slack.post_command("/goal", "status", channel=CHANNEL)
    assert "no goal in this channel" in ack.body
    assert len(fake_slack.socket_acks) >= 3
    # A command's work (here a goal's anchor post) runs after its acknowledgement, over the socket as well.
    posted = len(fake_slack.calls_to("chat.postMessage"))
    fake_slack.slow("chat.postMessage", BUSY)
    ack = await fake_slack.post_command("/goal", "tidy the notes", channel=CHANNEL)
    await bot.settle()
    anchor = fake_slack.calls_to("chat.postMessage")[posted]
    assert "🎯 Goal: tidy the notes" in anchor.params["text"] and acked_before_its_work(ack, anchor)


# -- configuration -----------------------------------------------------------------------------------------


async def test_missing_credentials_are_a_config_error_naming_the_setting(engine):
    from adapters.slack import PLATFORM

    e = await engine(platform="slack")

    def build(options, env):
        return PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), web.Application(), env)

    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        build({}, {})
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN}
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        build({}, env)
    with pytest.raises(ConfigError, match="platforms.slack.edit_interval"):
        build({"edit_interval": 1}, env)
    with pytest.raises(ConfigError, match="platforms.slack.max_message_length"):
        build({"max_message_length": 50_000}, env)
    env["SLACK_APP_TOKEN"] = APP_TOKEN  # Socket Mode needs no signing secret
    http = web.Application()
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({}), http, env)
    assert adapter.app_token == APP_TOKEN
    assert not [r for r in http.router.routes() if r.resource.canonical == "/slack/events"]


def test_the_platform_names_what_it_needs_from_the_environment():
    from adapters.platform import load
    from adapters.slack import PLATFORM

    assert load("slack") is PLATFORM
    options = PLATFORM.parse_options({})
    assert [(v.name, v.required) for v in PLATFORM.environment(options, {})] == [
        ("SLACK_BOT_TOKEN", True), ("SLACK_SIGNING_SECRET", True), ("SLACK_APP_TOKEN", False),
        ("SLACK_API_URL", False)]
    problems = PLATFORM.problems(options, {})
    assert len(problems) == 2 and "SLACK_BOT_TOKEN" in problems[0] and "SLACK_SIGNING_SECRET" in problems[1]
    socket_mode = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    assert "SLACK_SIGNING_SECRET" not in [v.name for v in PLATFORM.environment(options, socket_mode)]
    assert PLATFORM.problems(options, socket_mode) == []


def test_proxy_is_honoured_except_for_hosts_in_no_proxy(monkeypatch):
    from adapters.slack import proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert proxy_for("https://slack.com/api/") == "http://proxy.internal:3128"
    assert proxy_for("http://127.0.0.1:8099/api/") is None
    monkeypatch.delenv("HTTPS_PROXY")
    assert proxy_for("https://slack.com/api/") is None


def test_the_slack_channel_bot_profile_and_manifest_are_complete():
    from pathlib import Path

    import yaml

    from hermes_engine.config import load_profile

    folder = Path(__file__).resolve().parents[2] / "bots" / "slack-channel-bot"
    profile = load_profile(str(folder))
    assert "slack" in profile.platforms and profile.soul.strip()
    from adapters.slack import SlackOptions

    SlackOptions.model_validate(profile.platforms["slack"])
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "channels:history", "groups:history", "im:history", "im:read", "im:write",
            "chat:write", "commands", "users:read"} <= scopes
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert events == {"app_mention", "message.im", "message.channels", "message.groups"}
    commands = {c["command"]: c for c in manifest["features"]["slash_commands"]}
    assert set(commands) == {"/goal", "/hermes", "/kanban"}
    assert all(c["url"].endswith("/slack/events") for c in commands.values())
    assert manifest["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")


@contextlib.asynccontextmanager
async def served_by_the_runner(fake_slack, fake_llm, tmp_path, monkeypatch) -> AsyncIterator[None]:
    """`hermes_gateway.serve.serve` as `hermes-gateway run` calls it, with Slack's events posted to its server."""
    import socket

    from engine_harness import fake_llm_environment

    from hermes_engine.config import Settings
    from hermes_gateway.serve import serve

    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_API_URL", fake_slack.api_url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(home=tmp_path, http_host="127.0.0.1", http_port=port)
    profile = make_profile(platforms={"slack": {"edit_interval_seconds": 0.02}})
    ready, stop = asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(serve(settings, [profile], ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        fake_slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        yield
    finally:
        stop.set()
        await asyncio.wait_for(server, 15)


async def test_the_runner_mounts_slack_on_the_gateways_http_server(fake_slack, fake_llm, tmp_path, monkeypatch):
    async with served_by_the_runner(fake_slack, fake_llm, tmp_path, monkeypatch):
        fake_llm.script("Served by the runner.")
        await fake_slack.say("UALICE", DM, "hello runner")
        await fake_slack.wait_for(lambda: any(m.visible == "Served by the runner." and not m.streaming
                                              for m in fake_slack.bot_messages(DM)))
    assert [m.visible for m in fake_slack.bot_messages(DM)] == ["Served by the runner."]


async def test_the_runner_keeps_what_start_up_built_out_of_full_collections(fake_slack, fake_llm, tmp_path,
                                                                            monkeypatch):
    """A full collection walks every tracked object; the modules, SDKs and app start-up made live as long as
    the process, so once started they are frozen and a collection walks only what came after."""
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    async with served_by_the_runner(fake_slack, fake_llm, tmp_path, monkeypatch):
        frozen = gc.get_freeze_count()
        walked = len(gc.get_objects())
    assert frozen > walked


# -- the task board ---------------------------------------------------------------------------------------


async def test_kanban_command_and_the_shipped_profiles_tool_fill_the_board(slack_bot, fake_slack, fake_llm):
    bot = await slack_bot(profile=make_profile(toolsets=shipped_profile("slack-channel-bot").toolsets,
                                               kanban=QUIET_BOARD))
    fake_llm.responder = planning("pack the boxes")
    await fake_slack.say("UALICE", DM, "plan my move")
    await bot.settle()
    added = await fake_slack.post_command("/kanban", "add buy milk", channel=DM)
    await bot.settle()
    assert added.status == 200 and fake_slack.bot_messages(DM)[-1].visible == "Added card #2: buy milk"
    await fake_slack.post_command("/kanban", "", channel=DM)
    await bot.settle()
    assert fake_slack.bot_messages(DM)[-1].visible == render_slack(board_markdown("pack the boxes", "buy milk"))
