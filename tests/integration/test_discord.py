"""The Discord adapter: the real discord.py client against the fake Discord, the real engine behind it."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_discord import FakeDiscord, FakeMessage
from fakes.fake_llm import FakeLLM, Reply
from gateway_kit import wait_until
from kanban_kit import QUIET_BOARD, board_markdown, planning, shipped_profile

from adapters.discord import CONTENT_INTENT_HINT, PLATFORM, DiscordAdapter, api_base_url
from adapters.render import render_discord
from hermes_engine.config import AccessRules, GoalSettings, load_profile
from hermes_engine.errors import ConfigError
from hermes_engine.loops.goals import GoalFeature
from hermes_engine.policy.pairing import Pairing
from hermes_engine.ports.commands import Command
from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ReplyTarget
from hermes_gateway.wiring import build_gateway
from storage.store import SqlStore

EDIT_ROUTE = "/channels/{channel_id}/messages/{message_id}"


@dataclass
class Bot:
    engine: Engine
    adapter: DiscordAdapter
    fake: FakeDiscord
    stopped: bool = False

    async def idle(self, timeout: float = 15.0) -> None:
        await self.engine.idle(timeout)

    async def stop(self) -> None:
        """As `hermes-gateway run` stops: receiving first, then the engine, then the adapter."""
        self.stopped = True
        await self.adapter.stop_receiving()
        await self.engine.stop()
        await self.adapter.stop()

    async def final_in(self, channel_id: str, text: str, timeout: float = 15.0) -> FakeMessage:
        """The bot message in `channel_id` whose current content is exactly `text` (waits for it)."""
        def found() -> FakeMessage | None:
            return next((m for m in self.fake.bot_messages(channel_id) if m.content == text), None)
        return await self.fake.wait_for(found, timeout, f"the final {text[:40]!r} in {channel_id}")


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_bot(fake_llm: FakeLLM, fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """`await discord_bot(options=..., profile=..., features=..., env=...)` → a started `Bot`.

    Started in the order `hermes-gateway run` uses: the platform builds its adapter from the profile block
    and the environment, the adapter starts, then the gateway (which then watches pairing approvals for
    every attached platform). Stopped in that order reversed. Each bot of a test keeps its data in the same
    place, so a second one is the first restarted."""
    discord_environment(monkeypatch, fake_discord)
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    bots: list[Bot] = []

    async def make(options: dict[str, Any] | None = None, profile=None, features=None,
                   env: dict[str, str] | None = None) -> Bot:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        e = Engine(tmp_path, profile or make_profile(), features)
        e.store = SqlStore(e.settings.db_url)
        await e.store.init()
        e.gateway = build_gateway(e.settings, e.profile, e.store, features=features)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({**FAST, **(options or {})}), None,
                                 os.environ)
        e.gateway.attach(adapter)
        adapter.keep_rejects_in(e.store)  # as the runner wires it
        bot = Bot(e, adapter, fake_discord)
        bots.append(bot)
        await adapter.start()
        await e.gateway.start()
        return bot

    yield make
    for bot in bots:
        if not bot.stopped:
            await bot.stop()


def worker_requests(fake_llm: FakeLLM) -> list[Any]:
    return [r for r in fake_llm.requests if "You judge progress toward a goal" not in r.system]


def fences_balanced(text: str) -> bool:
    return len(re.findall(r"^\s*```", text, re.M)) % 2 == 0


# -- guild channels and threads ------------------------------------------------------------------------

async def test_mention_in_a_channel_opens_a_thread_and_streams_the_reply_there(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    answer = "To reset your password open Settings, then Security, then choose Reset and follow the link we mail you."
    fake_llm.script(Reply(text=answer, delay=0.02))
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "how do I reset my password?",
                                         mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked), what="a thread on the message")
    final = await bot.final_in(thread["id"], answer)
    assert thread["name"] == "how do I reset my password?"
    assert thread["parent_id"] == fake_discord.channel_id
    assert fake_discord.bot_messages(fake_discord.channel_id) == []  # nothing posted in the channel itself
    assert len(fake_discord.bot_messages(thread["id"])) == 1  # one message, edited in place
    assert final.edits >= 2 and final.history[0] != answer  # interim frames first, then the final
    assert fake_llm.requests[0].last_user_text.startswith("[alice] how do I reset my password?")
    assert "<@" not in fake_llm.requests[0].last_user_text  # the bot's mention is not sent to the model


async def test_a_follow_up_in_the_thread_is_answered_without_a_mention_from_any_speaker(discord_bot, fake_discord,
                                                                                          fake_llm):
    bot = await discord_bot()
    fake_llm.script("first answer", "second answer", "third answer")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "hello bot", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await bot.final_in(thread["id"], "first answer")
    await fake_discord.user_says(thread["id"], "alice", "and what about tomorrow?")
    await bot.final_in(thread["id"], "second answer")
    await fake_discord.user_says(thread["id"], "bob", "me too, please")
    await bot.final_in(thread["id"], "third answer")
    await bot.idle()
    third = fake_llm.requests[2]
    assert third.last_user_text.startswith("[bob] me too, please")
    history = " ".join(str(m.get("content")) for m in third.messages)
    assert "[alice] and what about tomorrow?" in history  # one session for the whole thread
    assert len(fake_discord.threads()) == 1


async def test_channel_chatter_without_a_mention_is_ignored(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    await fake_discord.user_says(fake_discord.channel_id, "alice", "just talking to my friends here")
    await fake_discord.user_says(fake_discord.channel_id, "bob", "@everyone lunch?")
    await asyncio.sleep(0.3)
    await bot.idle()
    assert fake_llm.requests == []
    assert fake_discord.threads() == [] and fake_discord.bot_messages(fake_discord.channel_id) == []


async def test_without_threads_a_reply_to_the_bot_is_answered_in_the_channel(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot(options={"threads": False})
    fake_llm.script("hi alice", "sure thing")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "hi", mentions_bot=True)
    first = await bot.final_in(fake_discord.channel_id, "hi alice")
    assert first.reference and first.reference["message_id"] == asked.id  # a reply to the question
    await fake_discord.user_says(fake_discord.channel_id, "alice", "can you help?", reply_to=first)
    await bot.final_in(fake_discord.channel_id, "sure thing")
    assert fake_discord.threads() == []


# -- DMs -----------------------------------------------------------------------------------------------

async def test_a_dm_from_an_allowed_user_is_answered_and_a_stranger_hears_nothing_without_pairing(
        discord_bot, fake_discord, fake_llm):
    alice, mallory = fake_discord.user("alice"), fake_discord.user("mallory")
    profile = make_profile(access=AccessRules(allowed_users=[alice["id"]], pairing=False))
    bot = await discord_bot(profile=profile)
    fake_llm.script("hello in private")
    dm = fake_discord.dm_channel(alice)
    await fake_discord.user_says(dm["id"], alice, "hello, private question")
    await bot.final_in(dm["id"], "hello in private")
    assert fake_llm.requests[0].last_user_text == "hello, private question"  # a DM has one speaker: no label

    other = fake_discord.dm_channel(mallory)
    await fake_discord.user_says(other["id"], mallory, "let me in")
    await asyncio.sleep(0.3)
    await bot.idle()
    assert fake_discord.bot_messages(other["id"]) == []
    assert len(fake_llm.requests) == 1


async def test_a_dm_that_comes_while_the_gateway_winds_down_is_still_taken(discord_bot, fake_discord, fake_llm):
    alice = fake_discord.user("alice")
    bot = await discord_bot(profile=make_profile(access=AccessRules(allowed_users=[alice["id"]], pairing=False)))
    fake_llm.script("taken all the same")
    await bot.adapter.stop_receiving()  # the shutdown's first step: Discord would not send this message again
    dm = fake_discord.dm_channel(alice)
    await fake_discord.user_says(dm["id"], alice, "are you leaving?")
    await bot.final_in(dm["id"], "taken all the same")
    assert fake_llm.requests[-1].last_user_text == "are you leaving?"


async def test_a_stranger_gets_a_pairing_code_and_is_served_once_the_admin_approves_it(discord_bot, fake_discord,
                                                                                       fake_llm):
    bot = await discord_bot()
    carol = fake_discord.user("carol")
    dm = fake_discord.dm_channel(carol)
    await fake_discord.user_says(dm["id"], carol, "hi, can I use you?")
    reply = await fake_discord.wait_for(lambda: fake_discord.bot_messages(dm["id"]))
    code = re.search(r"pairing approve ([A-Z0-9]{8})", reply[0].content).group(1)
    assert carol["id"] in reply[0].content
    assert fake_llm.requests == []  # a stranger costs no model call

    Pairing.for_home(bot.engine.settings.home).approve(code)  # what `hermes-gateway pairing approve` does
    await fake_discord.wait_for(lambda: any("You now have access" in m.content  # the engine looks every 5 s
                                            for m in fake_discord.bot_messages(dm["id"])), timeout=15)
    fake_llm.script("welcome, carol")
    await fake_discord.user_says(dm["id"], carol, "thanks!")
    await bot.final_in(dm["id"], "welcome, carol")


async def test_dm_allowlist_from_the_environment(discord_bot, fake_discord, fake_llm):
    bob = fake_discord.user("bob")
    bot = await discord_bot(env={"DISCORD_ALLOWED_USERS": f"123, {bob['id']}"})
    fake_llm.script("hi bob")
    dm = fake_discord.dm_channel(bob)
    await fake_discord.user_says(dm["id"], bob, "hi")
    await bot.final_in(dm["id"], "hi bob")
    assert len(fake_llm.requests) == 1


# -- long replies and rate limits ------------------------------------------------------------------------

async def test_a_ten_thousand_character_reply_is_split_under_2000_with_balanced_fences_and_nothing_lost(
        discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    words = [f"w{i:04d}" for i in range(1100)]
    prose = " ".join(words[:400])
    code = "\n".join(" ".join(words[i:i + 10]) for i in range(400, 700, 10))
    tail = " ".join(words[700:])
    reply = f"{prose}\n\n```python\n{code}\n```\n\n{tail}"
    assert len(reply) > 6000
    reply = reply + "\n\n" + " ".join(f"x{i:04d}" for i in range(700))  # over 10,000 characters
    assert len(reply) >= 10_000
    fake_llm.script(Reply(text=reply, chunks=[reply[i:i + 500] for i in range(0, len(reply), 500)], delay=0.01))
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "write a lot", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await fake_discord.wait_for(lambda: fake_llm.requests)
    await bot.idle(30)
    parts = [m.content for m in fake_discord.bot_messages(thread["id"])]
    assert len(parts) >= 6
    assert all(len(p) <= 2000 for p in parts)
    assert all(fences_balanced(p) for p in parts)
    assert not any(p.endswith("▌") for p in parts)  # no interim frame left behind
    shown = re.findall(r"[wx]\d{4}", "\n".join(parts))
    expected = re.findall(r"[wx]\d{4}", reply)
    assert shown == expected  # every word, once, in order
    assert not [c for c in fake_discord.requests if c.status == 400]  # never asked Discord for too much


async def test_edits_above_the_route_limit_are_paced_by_discord_py_without_a_429_storm(discord_bot, fake_discord,
                                                                                         fake_llm):
    bot = await discord_bot(options={"edit_interval_seconds": 0.02})
    fake_discord.set_rate_limit("PATCH", EDIT_ROUTE, limit=2, window=0.4)
    fake_discord.rate_limit_next("PATCH", EDIT_ROUTE, retry_after=0.3)
    answer = " ".join(f"word{i}" for i in range(60))
    fake_llm.script(Reply(text=answer, delay=0.015))
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "stream fast", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    final = await bot.final_in(thread["id"], answer)
    hits = fake_discord.rate_limited
    assert [h.cued for h in hits] == [True]  # only the cued 429; discord.py waited out every exhausted bucket
    edits = [c for c in fake_discord.calls("PATCH", EDIT_ROUTE)]
    assert len([c for c in edits if c.status == 200]) > 4  # more edits than one window allows: limits were hit
    after = [c for c in edits if c.at > hits[0].at]
    assert after and after[0].at - hits[0].at >= 0.29  # retried only after retry_after
    assert final.edits >= 2
    assert len(fake_discord.bot_messages(thread["id"])) == 1


# -- gateway trouble -----------------------------------------------------------------------------------

async def test_a_gateway_drop_mid_stream_resumes_without_losing_or_doubling_a_reply(discord_bot, fake_discord,
                                                                                      fake_llm):
    bot = await discord_bot()
    long_answer = " ".join(f"step{i}" for i in range(40))

    def respond(request):
        if "are you there" in request.last_user_text:
            return Reply(text="still here")
        return Reply(text=long_answer, delay=0.03)

    fake_llm.responder = respond
    alice = fake_discord.user("alice")
    asked = await fake_discord.user_says(fake_discord.channel_id, alice, "explain slowly", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await fake_discord.wait_for(lambda: fake_discord.bot_messages(thread["id"]), what="streaming to start")
    assert fake_discord.bot_messages(thread["id"])[0].content != long_answer  # still streaming

    fake_discord.pause_gateway()
    await fake_discord.drop_connection(code=4000)  # resumable
    dm = fake_discord.dm_channel(alice)
    bot.engine.profile.access.allowed_users.append(alice["id"])
    await fake_discord.user_says(dm["id"], alice, "are you there?")  # sent while the bot is away
    fake_discord.replay_on_resume(asked)  # Discord may deliver the question again
    fake_discord.resume_gateway()

    await fake_discord.wait_for(lambda: fake_discord.resumes and fake_discord.connected, what="the resume")
    await bot.final_in(thread["id"], long_answer)
    await bot.final_in(dm["id"], "still here")
    await bot.idle()
    assert len(fake_discord.identifies) == 1 and len(fake_discord.resumes) == 1
    assert fake_discord.gateway_paths == ["/gateway/ws", "/resume/ws"]  # reconnected to resume_gateway_url
    assert len(fake_discord.bot_messages(thread["id"])) == 1  # one reply, not two
    assert len(fake_discord.bot_messages(dm["id"])) == 1
    replayed = [(event, data.get("id")) for _, event, data in fake_discord.replayed]
    assert ("MESSAGE_CREATE", asked.id) in replayed  # the question did arrive twice...
    assert len(fake_discord.threads()) == 1  # ...but opened one thread (the second try got 160004)
    assert [r.last_user_text for r in fake_llm.requests].count("[alice] explain slowly") == 1
    messages_while_away = [d.get("content") for e, d in [(e, d) for _, e, d in fake_discord.replayed]
                           if e == "MESSAGE_CREATE"]
    assert "are you there?" in messages_while_away  # sent while disconnected, delivered on RESUME


async def test_a_message_without_content_logs_the_message_content_intent_hint_once(discord_bot, fake_discord,
                                                                                     fake_llm, caplog):
    bot = await discord_bot()
    fake_discord.grant_message_content = False
    caplog.set_level(logging.WARNING, logger="adapters.discord")
    await fake_discord.user_says(fake_discord.channel_id, "alice", "does anyone know the wifi password?")
    await fake_discord.user_says(fake_discord.channel_id, "bob", "no idea")
    await asyncio.sleep(0.3)
    await bot.idle()
    hints = [r for r in caplog.records
             if r.name.startswith("adapters.discord") and r.getMessage() == CONTENT_INTENT_HINT]
    assert len(hints) == 1
    assert "Message Content Intent" in hints[0].getMessage() and "developer portal" in hints[0].getMessage()
    assert fake_llm.requests == []


async def test_refused_privileged_intents_are_reported_clearly(discord_bot, fake_discord, caplog):
    fake_discord.reject_privileged_intents = True
    caplog.set_level(logging.ERROR, logger="adapters.discord")
    bot = await discord_bot()
    await asyncio.wait_for(bot.adapter._task, 10)
    assert any("4014" in r.getMessage() and "Message Content Intent" in r.getMessage() for r in caplog.records)


# -- a new session reads back what it missed; an event that cannot be read is rejected alone -----------------

def echo(request) -> Reply:
    return Reply(text="re: " + request.last_user_text)


async def away_after_one_answer(discord_bot, fake: FakeDiscord, fake_llm: FakeLLM, **options: Any) -> str:
    """A bot answers alice's question (in a thread on it, with threads on), then stops: returns where it
    answered. What is posted from now on reaches no session (Discord keeps it for a RESUME, never sends it
    to a new session)."""
    fake_llm.responder = echo
    first = await discord_bot(options=options)
    asked = await fake.user_says(fake.channel_id, "alice", "first question", mentions_bot=True)
    where = fake.channel_id
    if options.get("threads", True):
        where = (await fake.wait_for(lambda: fake.thread_of(asked), what="a thread on the question"))["id"]
    await first.final_in(where, "re: [alice] first question")
    await first.idle()
    await first.stop()
    return where


async def test_messages_posted_while_the_bot_was_away_are_answered_once_it_connects_again(discord_bot, fake_discord,
                                                                                          fake_llm):
    thread = await away_after_one_answer(discord_bot, fake_discord, fake_llm)
    await fake_discord.user_says(thread, "alice", "and a follow-up")
    await fake_discord.user_says(fake_discord.channel_id, "carol", "just chatting, not for the bot")
    later = await fake_discord.user_says(fake_discord.channel_id, "dave", "a new question", mentions_bot=True)
    await fake_discord.user_says(thread, "bob", "me too")

    second = await discord_bot()
    assert len(fake_discord.identifies) == 2 and fake_discord.resumes == []  # a new session: nothing replayed
    await second.final_in(thread, "re: [alice] and a follow-up")
    await second.final_in(thread, "re: [bob] me too")
    new_thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(later), what="a thread on the new question")
    await second.final_in(new_thread["id"], "re: [dave] a new question")
    await second.idle()
    asked = [r.last_user_text for r in fake_llm.requests]
    assert sorted(asked) == ["[alice] and a follow-up", "[alice] first question", "[bob] me too",
                             "[dave] a new question"]  # each once; carol's chatter not at all
    assert asked.index("[alice] and a follow-up") < asked.index("[bob] me too")  # oldest first
    assert len(fake_discord.bot_messages(thread)) == 3 and len(fake_discord.threads()) == 2
    assert fake_discord.unknown_routes == []


async def test_a_dm_sent_while_the_bot_was_away_is_answered_once_it_connects_again(discord_bot, fake_discord,
                                                                                    fake_llm):
    alice = fake_discord.user("alice")
    profile = make_profile(access=AccessRules(allowed_users=[alice["id"]], pairing=False))
    fake_llm.responder = echo
    first = await discord_bot(profile=profile)
    dm = fake_discord.dm_channel(alice)
    await fake_discord.user_says(dm["id"], alice, "hello")
    await first.final_in(dm["id"], "re: hello")
    await first.idle()
    await first.stop()
    await fake_discord.user_says(dm["id"], alice, "are you back?")

    second = await discord_bot(profile=profile)
    await second.final_in(dm["id"], "re: are you back?")
    await second.idle()
    assert [r.last_user_text for r in fake_llm.requests] == ["hello", "are you back?"]
    assert [c.path for c in fake_discord.calls("GET", "/channels/{channel_id}")] == [f"/channels/{dm['id']}"]


async def test_with_two_shards_a_channel_is_read_back_once_by_its_guilds_shard(discord_bot, fake_discord, fake_llm):
    thread = await away_after_one_answer(discord_bot, fake_discord, fake_llm, shard_count=2)
    later = await fake_discord.user_says(fake_discord.channel_id, "dave", "a question meanwhile", mentions_bot=True)

    second = await discord_bot(options={"shard_count": 2})
    new_thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(later), what="a thread on the question")
    await second.final_in(new_thread["id"], "re: [dave] a question meanwhile")
    await second.idle()
    assert sorted(tuple(identify["shard"]) for identify in fake_discord.identifies) == [(0, 2), (0, 2), (1, 2), (1, 2)]
    reads = sorted(c.path for c in fake_discord.calls("GET", "/channels/{channel_id}/messages"))
    assert reads == sorted([f"/channels/{thread}/messages", f"/channels/{fake_discord.channel_id}/messages"])


async def test_a_message_delivered_live_and_read_back_is_answered_once(discord_bot, fake_discord, fake_llm):
    await away_after_one_answer(discord_bot, fake_discord, fake_llm)
    away = await fake_discord.user_says(fake_discord.channel_id, "bob", "did you see this?", mentions_bot=True)
    fake_discord.hold_history()
    second = await discord_bot()
    history = "/channels/{channel_id}/messages"
    await fake_discord.wait_for(lambda: fake_discord.calls("GET", history), what="the read back to begin")
    await fake_discord.deliver_again(away)  # the new session is sent it after all, while the read back waits
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(away), what="a thread on bob's question")
    await second.final_in(thread["id"], "re: [bob] did you see this?")
    fake_discord.release_history()

    starts = f"/channels/{fake_discord.channel_id}/messages/{away.id}/threads"
    await fake_discord.wait_for(lambda: len([c for c in fake_discord.calls("POST") if c.path == starts]) == 2,
                                what="the read back to reach bob's question")  # its thread was there (160004)
    await second.idle()
    assert [c.path for c in fake_discord.calls("GET", history)][-1] == f"/channels/{fake_discord.channel_id}/messages"
    assert [r.last_user_text for r in fake_llm.requests].count("[bob] did you see this?") == 1
    assert len(fake_discord.bot_messages(thread["id"])) == 1 and len(fake_discord.threads()) == 2


async def test_a_message_read_back_keeps_its_authors_admin_role(discord_bot, fake_discord, fake_llm):
    await away_after_one_answer(discord_bot, fake_discord, fake_llm, admin_role="Hermes Admin", threads=False)
    fake_discord.give_role("ada", "Hermes Admin")
    await fake_discord.user_says(fake_discord.channel_id, "ada", "/secret", mentions_bot=True)

    async def secret(ctx) -> str:
        return "the admin secret"

    fake_discord.hold_history()  # until the command is there
    second = await discord_bot(options={"admin_role": "Hermes Admin", "threads": False})
    second.engine.gateway.commands.add(Command("secret", "admins only", secret, admin_only=True))
    fake_discord.release_history()
    answer = await second.final_in(fake_discord.channel_id, "the admin secret")  # her role read from the guild
    assert answer.content == "the admin secret"


async def test_a_start_reads_back_at_most_the_newest_catch_up_messages_of_a_channel(discord_bot, fake_discord,
                                                                                    fake_llm):
    await away_after_one_answer(discord_bot, fake_discord, fake_llm, threads=False)
    await fake_discord.user_says(fake_discord.channel_id, "bob", "an early question", mentions_bot=True)
    for n in range(3):
        await fake_discord.user_says(fake_discord.channel_id, "carol", f"chatter {n}")
    await fake_discord.user_says(fake_discord.channel_id, "dave", "a late question", mentions_bot=True)

    second = await discord_bot(options={"threads": False, "catch_up_messages": 4})
    await second.final_in(fake_discord.channel_id, "re: [dave] a late question")
    await second.idle()
    [read] = fake_discord.calls("GET", "/channels/{channel_id}/messages")
    assert read.status == 200
    assert "[bob] an early question" not in [r.last_user_text for r in fake_llm.requests]  # the fifth newest


MALFORMED = {  # what each does to discord.py's receive loop without the adapter's state
    "no author": (lambda event: event.pop("author"), False),  # AttributeError: the connection dropped
    "no channel_id": (lambda event: event.pop("channel_id"), True),  # KeyError: dropped
    "an id that is no number": (lambda event: event.update(id="not-a-number"), True),  # ValueError: dropped
    "an author that is text": (lambda event: event.update(author="alice"), False),  # TypeError: dropped
    "mentions that are no list": (lambda event: event.update(mentions=5), True),  # TypeError: dropped
    "content that is no text": (lambda event: event.update(content=42), True),  # passed on, to fail later
}


@pytest.mark.parametrize("change, shows_sender", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_message_event_is_rejected_alone_and_the_connection_stays_up(
        discord_bot, fake_discord, fake_llm, change, shows_sender):
    bot = await discord_bot()
    fake_llm.script("still listening")
    event = fake_discord.message_event(fake_discord.channel_id, "alice", "this one is broken", mentions_bot=True)
    change(event)
    await fake_discord.dispatch("MESSAGE_CREATE", event)
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "are you still there?", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked), what="a thread on the next message")
    await bot.final_in(thread["id"], "still listening")
    await bot.idle()
    assert len(fake_discord.identifies) == 1 and fake_discord.resumes == []  # the same connection throughout
    assert fake_discord.gateway_paths == ["/gateway/ws"]
    assert [r.last_user_text for r in fake_llm.requests] == ["[alice] are you still there?"]

    async def recorded() -> bool:
        return bool(await bot.engine.store.rejected_inbound("discord"))
    await wait_until(recorded, 10)
    [kept] = await bot.engine.store.rejected_inbound("discord")
    assert kept.payload["event"] == "MESSAGE_CREATE" and event["timestamp"] in kept.payload["raw"]
    assert kept.payload["reason"]
    alice = fake_discord.user("alice")["id"]
    assert kept.payload.get("message") == ({"account": bot.adapter.account, "user_id": alice} if shows_sender else None)


# -- access ----------------------------------------------------------------------------------------------

async def test_a_guild_not_on_the_allowlist_is_ignored(discord_bot, fake_discord, fake_llm):
    other = fake_discord.add_guild("Elsewhere", channels=("lobby",))
    other_channel = other["channels"][0]["id"]
    bot = await discord_bot(env={"DISCORD_ALLOWED_GUILDS": fake_discord.guild_id})
    fake_llm.script("allowed answer")
    await fake_discord.user_says(other_channel, "eve", "hello?", mentions_bot=True)
    refused = await fake_discord.slash(other_channel, "eve", "status")
    await fake_discord.wait_for(lambda: refused.callback_type is not None)
    assert refused.callback_type == 4  # an ephemeral "not enabled here", no deferral
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "hello!", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await bot.final_in(thread["id"], "allowed answer")
    await bot.idle()
    assert len(fake_llm.requests) == 1
    assert fake_discord.bot_messages(other_channel) == [] or all(
        m.interaction_id == refused.id for m in fake_discord.bot_messages(other_channel))
    assert len(fake_discord.threads()) == 1


async def test_members_with_the_admin_role_may_use_admin_commands(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot(options={"admin_role": "Hermes Admin", "threads": False})

    async def secret(ctx) -> str:
        return "the admin secret"

    bot.engine.gateway.commands.add(Command("secret", "admins only", secret, admin_only=True))
    fake_discord.give_role("ada", "Hermes Admin")
    await fake_discord.user_says(fake_discord.channel_id, "bob", "/secret", mentions_bot=True)
    await bot.final_in(fake_discord.channel_id, "Only an admin of this bot can use that command.")
    await fake_discord.user_says(fake_discord.channel_id, "ada", "/secret", mentions_bot=True)
    await bot.final_in(fake_discord.channel_id, "the admin secret")

    # The role is read from every message: taken away, it no longer counts.
    fake_discord.member_roles[(fake_discord.guild_id, fake_discord.user("ada")["id"])].clear()
    await fake_discord.user_says(fake_discord.channel_id, "ada", "/secret", mentions_bot=True)
    await fake_discord.wait_for(lambda: [m.content for m in fake_discord.bot_messages(fake_discord.channel_id)].count(
        "Only an admin of this bot can use that command.") == 2, what="the refusal for ada without the role")
    await bot.idle()
    assert fake_llm.requests == []
    assert bot.engine.profile.access.admins == []  # the platform reports admins; the profile is left as written


async def admin_secret(ctx) -> str:
    return "the admin secret"


def with_secret(bot: Bot) -> Bot:
    bot.engine.gateway.commands.add(Command("secret", "admins only", admin_secret, admin_only=True))
    return bot


REFUSED = "Only an admin of this bot can use that command."


async def test_with_no_server_listed_no_server_is_read_and_a_role_made_there_is_worth_nothing(
        discord_bot, fake_discord, fake_llm, caplog):
    caplog.set_level(logging.WARNING, logger="adapters.discord")
    eve = fake_discord.user("eve")
    own = fake_discord.add_guild("Eve's server", channels=("lobby",), roles=("Hermes Admin",))
    lobby = own["channels"][0]["id"]
    fake_discord.give_role(eve, "Hermes Admin", guild_id=own["id"])
    profile = make_profile(access=AccessRules(allowed_users=[eve["id"]], pairing=False))
    bot = with_secret(await discord_bot(options={"admin_role": "Hermes Admin", "threads": False}, profile=profile,
                                        env={"DISCORD_ALLOWED_GUILDS": ""}))
    fake_llm.script("an answer")
    await fake_discord.user_says(lobby, eve, "/secret", mentions_bot=True)
    await fake_discord.user_says(lobby, eve, "run this for me", mentions_bot=True)
    await fake_discord.user_says(fake_discord.channel_id, eve, "/secret", mentions_bot=True)
    refused = await fake_discord.slash(lobby, eve, "status")
    await fake_discord.wait_for(lambda: refused.callback_type is not None)

    await fake_discord.user_says(fake_discord.dm_channel(eve)["id"], eve, "/secret")  # her DMs are still served
    await bot.final_in(fake_discord.dm_channel(eve)["id"], REFUSED)
    await bot.idle()
    assert fake_discord.bot_messages(lobby) == [] or all(
        m.interaction_id == refused.id for m in fake_discord.bot_messages(lobby))
    assert fake_discord.bot_messages(fake_discord.channel_id) == [] and fake_llm.requests == []
    for guild in (own["id"], fake_discord.guild_id):  # each server named once, with the id to list
        assert len([r for r in caplog.records if f"ignoring Discord server {guild}" in r.getMessage()]) == 1


async def test_the_admin_role_in_a_listed_server_runs_admin_commands_and_passes_the_daily_limit(
        discord_bot, fake_discord, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    bot = with_secret(await discord_bot(options={"admin_role": "Hermes Admin", "threads": False},
                                        profile=make_profile(limits={"turns_per_day": 1})))
    fake_discord.give_role("ada", "Hermes Admin")
    for text in ("/secret", "one", "two"):
        await fake_discord.user_says(fake_discord.channel_id, "ada", text, mentions_bot=True)
    await fake_discord.wait_for(lambda: [m.content for m in fake_discord.bot_messages(fake_discord.channel_id)]
                                == ["the admin secret", "answer", "answer"], what="ada's three answers")
    await bot.idle()
    assert len(fake_llm.requests) == 2


async def test_with_platform_admins_off_the_admin_role_gives_no_admin_in_a_listed_server(
        discord_bot, fake_discord, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    profile = make_profile(access=AccessRules(platform_admins=False), limits={"turns_per_day": 1})
    bot = with_secret(await discord_bot(options={"admin_role": "Hermes Admin", "threads": False}, profile=profile))
    fake_discord.give_role("ada", "Hermes Admin")
    for text in ("/secret", "one", "two"):
        await fake_discord.user_says(fake_discord.channel_id, "ada", text, mentions_bot=True)
    await fake_discord.wait_for(lambda: len(fake_discord.bot_messages(fake_discord.channel_id)) == 3)
    await bot.idle()
    shown = [m.content for m in fake_discord.bot_messages(fake_discord.channel_id)]
    assert shown[:2] == [REFUSED, "answer"] and "daily limit of 1 turn" in shown[2]
    assert len(fake_llm.requests) == 1


async def test_an_admin_the_operator_named_is_one_in_direct_messages_and_in_servers_without_any_role(
        discord_bot, fake_discord, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    ada = fake_discord.user("ada")
    profile = make_profile(access=AccessRules(admins=[ada["id"]], pairing=False), limits={"turns_per_day": 1})
    bot = with_secret(await discord_bot(options={"admin_role": "Hermes Admin", "threads": False}, profile=profile))
    dm = fake_discord.dm_channel(ada)["id"]
    await fake_discord.user_says(dm, ada, "/secret")
    assert (await bot.final_in(dm, "the admin secret")).content == "the admin secret"
    for text in ("/secret", "one", "two"):
        await fake_discord.user_says(fake_discord.channel_id, ada, text, mentions_bot=True)
    in_server = lambda: [m.content for m in fake_discord.bot_messages(fake_discord.channel_id)]  # noqa: E731
    await fake_discord.wait_for(lambda: len(in_server()) >= 3, what="ada's three answers")
    assert in_server() == ["the admin secret", "answer", "answer"]  # past the daily limit of one turn


# -- slash commands ------------------------------------------------------------------------------------

async def test_slash_goal_is_deferred_at_once_and_answered_with_the_engines_reply(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot(features=[GoalFeature(GoalSettings(max_turns=5))])
    assert {c["name"] for c in fake_discord.commands} == {"goal", "new", "stop", "status", "help"}
    goal_command = next(c for c in fake_discord.commands if c["name"] == "goal")
    assert goal_command["options"][0]["name"] == "text"

    def respond(request):
        if "You judge progress toward a goal" in request.system:
            return Reply(text='{"verdict": "done", "reason": "the haiku is written"}')
        return Reply(text="An old silent pond / a frog jumps in / splash!")

    fake_llm.responder = respond
    interaction = await fake_discord.slash(fake_discord.channel_id, "alice", "goal", {"text": "write a haiku"})
    await fake_discord.wait_for(lambda: interaction.original_id and fake_discord.messages[
        interaction.original_id].content.startswith("🎯 Goal set: write a haiku"), what="the goal answer")
    assert interaction.callback_type == 5  # deferred ("thinking…")
    assert interaction.ack_delay is not None and interaction.ack_delay < 3.0
    await bot.final_in(fake_discord.channel_id, "An old silent pond / a frog jumps in / splash!")
    await fake_discord.wait_for(lambda: any(m.content.startswith("✅ Goal done: write a haiku")
                                            for m in fake_discord.bot_messages(fake_discord.channel_id)))
    await bot.idle()
    assert worker_requests(fake_llm)[0].last_user_text.endswith("write a haiku")


async def test_slash_status_answers_by_editing_the_deferred_response(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    interaction = await fake_discord.slash(fake_discord.channel_id, "alice", "status")
    await fake_discord.wait_for(lambda: interaction.original_id and "Model: openai:gpt-test" in
                                fake_discord.messages[interaction.original_id].content)
    original = fake_discord.messages[interaction.original_id]
    assert interaction.callback_type == 5 and interaction.ack_delay < 3.0
    assert original.flags & 128 == 0  # no longer "thinking"
    assert interaction.followup_ids == []
    await bot.idle()
    assert fake_llm.requests == []


async def test_a_refused_interaction_token_falls_back_to_a_channel_message(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    fake_discord.interaction_token_ttl = 0.0  # the follow-up window is over by the time the answer is ready
    interaction = await fake_discord.slash(fake_discord.channel_id, "alice", "help")
    message = await fake_discord.wait_for(lambda: next(
        (m for m in fake_discord.bot_messages(fake_discord.channel_id)
         if m.interaction_id is None and "Commands:" in m.content), None))
    assert "/status" in message.content
    assert interaction.callback_type == 5
    await bot.idle()


# -- configuration ---------------------------------------------------------------------------------------

def configure(options: dict[str, Any], env: dict[str, str]) -> DiscordAdapter:
    """What `hermes-gateway run` builds from a profile block and an environment (nothing connects yet)."""
    return PLATFORM.build(cast(EnginePort, None), None, PLATFORM.parse_options(options), None, env)


def test_options_come_from_the_profile_and_the_environment():
    env = {"DISCORD_BOT_TOKEN": "t", "DISCORD_API_BASE_URL": "http://127.0.0.1:9/", "DISCORD_ALLOWED_GUILDS": "1, 2",
           "DISCORD_ALLOWED_USERS": "7", "DISCORD_GATEWAY_URL": "ws://127.0.0.1:9/gw"}
    adapter = configure({"threads": False, "admin_role": "Mods", "allowed_guilds": [3]}, env)
    options, connection = adapter.options, adapter.connection
    assert connection.api_base_url == "http://127.0.0.1:9/api/v10"
    assert connection.gateway_url == "ws://127.0.0.1:9/gw"
    assert options.allowed_guilds == {"1", "2", "3"} and options.allowed_users == {"7"}
    assert options.threads is False and options.admin_role == "Mods"
    assert configure({}, {"DISCORD_BOT_TOKEN": "t"}).connection.api_base_url is None  # unset: discord.py's default
    assert api_base_url("https://proxy.example/api/v9") == "https://proxy.example/api/v9"
    names = {v.name: v.required for v in PLATFORM.environment(options, env)}
    assert names["DISCORD_BOT_TOKEN"] and not names["DISCORD_API_BASE_URL"] and not names["DISCORD_GATEWAY_URL"]


@pytest.mark.parametrize("options, env, needle", [
    ({}, {}, "DISCORD_BOT_TOKEN"),
    ({"thread": True}, {"DISCORD_BOT_TOKEN": "t"}, "platforms.discord.thread"),
    ({}, {"DISCORD_BOT_TOKEN": "t", "DISCORD_ALLOWED_GUILDS": "my-server"}, "DISCORD_ALLOWED_GUILDS"),
    ({"thread_auto_archive_minutes": 5}, {"DISCORD_BOT_TOKEN": "t"}, "thread_auto_archive_minutes"),
])
def test_a_configuration_mistake_is_one_clear_config_error(options, env, needle):
    with pytest.raises(ConfigError, match=needle):
        configure(options, env)


def test_doctor_names_a_missing_token_and_a_malformed_allowlist():
    options = PLATFORM.parse_options({})
    assert [p for p in PLATFORM.problems(options, {}) if "DISCORD_BOT_TOKEN" in p]
    assert PLATFORM.problems(options, {"DISCORD_BOT_TOKEN": "t"}) == []
    bad = PLATFORM.problems(options, {"DISCORD_BOT_TOKEN": "t", "DISCORD_ALLOWED_USERS": "alice"})
    assert len(bad) == 1 and "DISCORD_ALLOWED_USERS" in bad[0] and "alice" in bad[0]


def test_the_ready_made_profile_loads():
    profile = load_profile(str(Path(__file__).parents[2] / "bots" / "discord-server-helper"))
    options = configure(profile.platforms["discord"], {"DISCORD_BOT_TOKEN": "t"}).options
    assert options.threads and options.admin_role == "Hermes Admin"
    assert profile.access.pairing and "Discord server" in profile.soul


async def test_a_rejected_token_is_reported_and_the_adapter_stays_off(discord_bot, fake_discord, caplog):
    caplog.set_level(logging.ERROR, logger="adapters.discord")
    bot = await discord_bot(env={"DISCORD_BOT_TOKEN": "not-the-token"})
    assert any("DISCORD_BOT_TOKEN" in r.getMessage() and "401" in r.getMessage() for r in caplog.records)
    assert bot.adapter._task is None and fake_discord.identifies == []


async def test_the_fake_saw_only_routes_it_knows(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot()
    fake_llm.script("fine")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "ping", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await bot.final_in(thread["id"], "fine")
    await bot.idle()
    assert fake_discord.unknown_routes == []
    assert fake_discord.calls("POST", "/channels/{channel_id}/typing")  # typing while the model worked


async def test_after_the_15_minute_window_an_answer_to_a_slash_command_goes_to_the_channel(discord_bot, fake_discord,
                                                                                           fake_llm):
    bot = await discord_bot()
    interaction = await fake_discord.slash(fake_discord.channel_id, "alice", "status")
    await fake_discord.wait_for(lambda: interaction.original_id and "Model:" in
                                fake_discord.messages[interaction.original_id].content)
    bot.adapter.outbound.interactions[interaction.id].created -= 15 * 60  # as if a quarter of an hour went by
    target = ReplyTarget("discord", bot.adapter.account, fake_discord.channel_id, None, interaction.id)
    webhook_calls = len(fake_discord.calls("POST", "/webhooks/{application_id}/{token}"))
    await bot.adapter.send(target, "a late answer")
    late = await bot.final_in(fake_discord.channel_id, "a late answer")
    assert late.interaction_id is None and late.reference is None  # a plain channel message
    assert len(fake_discord.calls("POST", "/webhooks/{application_id}/{token}")) == webhook_calls


# -- the task board ------------------------------------------------------------------------------------

async def test_slash_kanban_and_the_shipped_profiles_tool_fill_the_board(discord_bot, fake_discord, fake_llm):
    bot = await discord_bot(profile=make_profile(toolsets=shipped_profile("discord-server-helper").toolsets,
                                                 kanban=QUIET_BOARD))
    assert "kanban" in {c["name"] for c in fake_discord.commands}
    fake_llm.responder = planning("pack the boxes")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "plan my move", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked))
    await bot.final_in(thread["id"], "On the board.")

    async def slash_kanban(text: str | None) -> str:
        interaction = await fake_discord.slash(fake_discord.channel_id, "alice", "kanban",
                                               {"text": text} if text else None)
        message = await fake_discord.wait_for(lambda: interaction.original_id and fake_discord.messages[
            interaction.original_id].content and fake_discord.messages[interaction.original_id])
        return message.content

    assert await slash_kanban("add buy milk") == "Added card #2: buy milk"
    assert await slash_kanban(None) == render_discord(board_markdown("pack the boxes", "buy milk"))
    await bot.idle()
