"""A reminder made in a Telegram DM and delivered to a group or channel the person named: the real
python-telegram-bot against the fake Bot API (its `getChat` and `getChatMember` telling where the bot is), the
fake LLM calling `cronjob`, the real gateway and clock on SQLite."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from fakes.fake_telegram import FakeTelegram
from test_clock_telegram import ALICE, bot_texts, schedules, shown, start

TEAM = -1001234567
REMINDER = "⏰ Reminder: standup"
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def in_team(deliver: str, schedule: str = "in 2 seconds") -> dict[str, Any]:
    return {"action": "create", "name": "standup", "message": "standup", "schedule": schedule, "deliver": deliver}


def team_texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.chat(TEAM).bot_messages]


async def test_a_reminder_made_in_a_dm_for_a_group_arrives_there_once_and_a_reply_there_has_it(
        engine, telegram, fake_llm):
    telegram.chat(TEAM, "supergroup", title="Team").members[42] = "member"
    fake_llm.responder = schedules({"remind the team": in_team(str(TEAM))})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind the team")
        confirmation = await shown(telegram, r"^Reminder #\d+ set")
        assert f"in {TEAM}" in confirmation.text
        await telegram.wait_for_text(TEAM, REMINDER, timeout=10)
        await asyncio.sleep(2)
        assert team_texts(telegram).count(REMINDER) == 1
        assert REMINDER not in bot_texts(telegram)  # not in the DM it was made in
        assert any(c.method == "getChatMember" for c in telegram.requests)

        telegram.user_says(TEAM, ALICE, "@hermes_test_bot what was that about?", chat_type="supergroup")
        await telegram.wait_for_text(TEAM, "Noted.", timeout=10)
        assert REMINDER in fake_llm.requests[-1].texts  # the group's conversation has the reminder
    finally:
        await adapter.stop()


async def test_a_channel_the_bot_is_not_in_is_refused_in_one_sentence_and_nothing_is_saved(
        engine, telegram, fake_llm):
    channel = telegram.chat(-1009876, "channel", title="News")
    channel.username, channel.bot_status = "teamnews", "left"
    fake_llm.responder = schedules({"post to the channel": in_team("@teamnews")})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "post to the channel")
        refusal = await shown(telegram, r"^Error: I cannot post in @teamnews: ")
        assert refusal.text.count(".") == 1, refusal.text
        assert await e.store.list_jobs(e.profile.name) == []
    finally:
        await adapter.stop()


async def test_a_target_that_names_no_chat_is_answered_with_how_chats_are_named(engine, telegram, fake_llm):
    fake_llm.responder = schedules({"post it somewhere": in_team("the team room")})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "post it somewhere")
        await shown(telegram, re.escape("I cannot post in the team room: a Telegram chat is named by its id, such as "
                                        "-1001234567890, or a username"))
        assert await e.store.list_jobs(e.profile.name) == []
    finally:
        await adapter.stop()


async def test_a_group_the_bot_left_before_the_run_is_refused_and_the_job_paused_with_nothing_sent(
        engine, telegram, fake_llm):
    team = telegram.chat(TEAM, "supergroup", title="Team")
    team.members[42] = "member"
    fake_llm.responder = schedules({"remind the team": in_team(str(TEAM), "in 3 seconds")})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind the team")
        await shown(telegram, r"^Reminder #\d+ set")
        team.bot_status = "left"

        async def paused() -> Any:
            jobs = await e.store.list_jobs(e.profile.name)
            return jobs[0] if jobs and jobs[0].state == "paused" else None

        job = None
        for _ in range(100):
            if (job := await paused()) is not None:
                break
            await asyncio.sleep(0.1)
        assert job is not None, "the job was not paused"
        assert job.last_outcome is not None and job.last_outcome.startswith("refused: I cannot post in"), job
        await asyncio.sleep(1)
        assert team_texts(telegram) == []
    finally:
        await adapter.stop()


async def test_update_moves_a_job_to_a_named_group_only_where_the_bot_is(engine, telegram, fake_llm):
    telegram.chat(TEAM, "supergroup", title="Team").members[42] = "member"
    gone = telegram.chat(-1004444, "supergroup", title="Old team")
    gone.bot_status = "left"
    fake_llm.responder = schedules({
        "remind me later": {"action": "create", "name": "standup", "message": "standup", "schedule": "in 1 hour"},
        "send it to the old team": {"action": "update", "job_id": "1", "deliver": "-1004444"},
        "send it to the team": {"action": "update", "job_id": "1", "deliver": str(TEAM)},
        "rename it": {"action": "update", "job_id": "1", "name": "daily standup"},
    })
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind me later")
        await shown(telegram, r"^Reminder #1 set")
        telegram.user_says(42, ALICE, "send it to the old team")
        await shown(telegram, r"^Error: I cannot post in -1004444: I am not a member of that chat\.$")
        job = await e.store.get_job(1)
        assert job is not None and job.target["chat_id"] == "42"  # unchanged

        telegram.user_says(42, ALICE, "send it to the team")
        await shown(telegram, r"^Updated #1 'standup'")
        job = await e.store.get_job(1)
        assert job is not None and job.target["chat_id"] == str(TEAM) and f"group:{TEAM}:user:42" in job.session_key

        telegram.user_says(42, ALICE, "rename it")  # an update that does not name deliver leaves it where it is
        await shown(telegram, r"^Updated #1 'daily standup'")
        job = await e.store.get_job(1)
        assert job is not None and job.target["chat_id"] == str(TEAM)
        telegram.user_says(42, ALICE, "/jobs")
        await shown(telegram, rf"^#1 'daily standup' \(in 1 hour\) in {TEAM}: next ")
    finally:
        await adapter.stop()


async def test_a_group_the_owner_is_not_a_member_of_is_refused_though_the_bot_is_there(engine, telegram, fake_llm):
    telegram.chat(TEAM, "supergroup", title="Team")  # the bot is a member; Alice is not
    fake_llm.responder = schedules({"remind the team": in_team(str(TEAM))})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind the team")
        await shown(telegram, rf"^Error: I cannot post in {TEAM}: you are not a member of that chat\.$")
        assert await e.store.list_jobs(e.profile.name) == []
    finally:
        await adapter.stop()


async def test_a_bot_api_outage_at_run_time_is_a_failed_delivery_retried_later_not_a_refusal(
        engine, telegram, fake_llm):
    telegram.chat(TEAM, "supergroup", title="Team").members[42] = "member"
    fake_llm.responder = schedules({"remind the team": in_team(str(TEAM))})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind the team")
        await shown(telegram, r"^Reminder #\d+ set")
        telegram.outage(4)

        job = None
        for _ in range(100):
            jobs = await e.store.list_jobs(e.profile.name)
            if jobs and jobs[0].runs:
                job = jobs[0]
                break
            await asyncio.sleep(0.1)
        assert job is not None, "the run was not recorded"
        assert job.state == "active" and job.failures == 1, job
        assert (job.last_outcome or "").startswith("not delivered: could not ask the platform"), job
        assert team_texts(telegram) == []
    finally:
        await adapter.stop()
