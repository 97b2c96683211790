"""Reminders in a Slack thread, end to end: the real slack-bolt app and slack-sdk client against the fake Slack
(signed events on loopback), the fake LLM calling `cronjob`, the real gateway and its clock on SQLite. A
reminder made in a thread, by a person or by a goal's turn, arrives once in that thread, never in the channel;
one made in a DM for a channel the person named by `#name` arrives there (`conversations.list` and
`conversations.info` telling where the bot is), and a channel the bot is not in is refused."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from engine_harness import is_judge, make_profile, verdict
from fakes.fake_llm import Reply
from fakes.fake_slack import Channel, FakeSlack, SlackMessage
from kanban_kit import shipped_profile
from reminders_kit import schedules
from slack_kit import serve_slack, slack_environment

CHANNEL = "CGENERAL"
REMINDER = "⏰ Reminder: stretch"
DM = "DALICE"
TEAM = "CTEAM0001"
STANDUP = "⏰ Reminder: standup"
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def slack_clock(engine, fake_slack, monkeypatch):
    """The Slack bot with the tools of the shipped Slack profile (the clock among them), started once."""
    slack_environment(monkeypatch, fake_slack)
    e = await engine(profile=make_profile(toolsets=shipped_profile("slack-channel-bot").toolsets), platform="slack")
    served = await serve_slack(e, events_from=fake_slack)
    yield e, served
    await served.close()


def mention(fake: FakeSlack, text: str) -> str:
    return f"<@{fake.bot_user}> {text}"


def thread_texts(fake: FakeSlack, thread_ts: str) -> list[str]:
    return [m.visible for m in fake.bot_messages(CHANNEL, thread_ts)]


async def shown(fake: FakeSlack, thread_ts: str, pattern: str, timeout: float = 10) -> SlackMessage:
    """The first bot message in the thread whose text matches `pattern`."""
    found = re.compile(pattern)

    def match() -> SlackMessage | None:
        return next((m for m in fake.bot_messages(CHANNEL, thread_ts) if found.search(m.visible)
                     and not m.streaming), None)

    try:
        await fake.wait_for(lambda: match() is not None, timeout)
    except TimeoutError:
        raise AssertionError(f"no bot message matching {pattern!r}; the thread shows "
                             f"{thread_texts(fake, thread_ts)!r}") from None
    message = match()
    assert message is not None
    return message


async def test_a_reminder_made_in_a_channel_thread_names_local_time_and_arrives_once_in_that_thread(
        slack_clock, fake_slack, fake_llm):
    e, _ = slack_clock
    fake_llm.responder = schedules({"remind me in 2 seconds to stretch": {
        "action": "create", "name": "stretch", "message": "stretch", "schedule": "in 2 seconds"}})
    asked = await fake_slack.say("UALICE", CHANNEL, mention(fake_slack, "/timezone Europe/Berlin"))
    await shown(fake_slack, asked.ts, r"^Your time zone is now Europe/Berlin")

    before = datetime.now(UTC)
    started = asyncio.get_running_loop().time()
    await fake_slack.say("UALICE", CHANNEL, "remind me in 2 seconds to stretch", thread_ts=asked.ts)
    confirmation = await shown(fake_slack, asked.ts, r"^Reminder #\d+ set")
    said = re.search(r"fires \w{3} \d+ \w{3} \d{4}, (\d\d:\d\d:\d\d) CES?T \(Europe/Berlin\)\.$",
                     confirmation.visible)
    assert said is not None, confirmation.visible
    expected = (before + timedelta(seconds=2)).astimezone(BERLIN)
    fires = datetime.combine(expected.date(), datetime.strptime(said.group(1), "%H:%M:%S").time(), BERLIN)
    assert abs(fires - expected) < timedelta(seconds=3)  # the person's wall clock, not UTC

    await shown(fake_slack, asked.ts, f"^{re.escape(REMINDER)}$")
    assert asyncio.get_running_loop().time() - started - 2 < 2  # on time, give or take a tick and the fake
    await asyncio.sleep(2.5)
    assert thread_texts(fake_slack, asked.ts).count(REMINDER) == 1
    reminder = next(m for m in fake_slack.bot_messages(CHANNEL, asked.ts) if m.visible == REMINDER)
    assert reminder.thread_ts == asked.ts  # in the thread it was made in
    assert [m.ts for m in fake_slack.top_level(CHANNEL)] == [asked.ts]  # nothing in the channel itself

    await fake_slack.say("UALICE", CHANNEL, "done, what did you remind me of?", thread_ts=asked.ts)
    await shown(fake_slack, asked.ts, r"^Noted\.$")
    answered = [r for r in fake_llm.requests if r.last_user_text.endswith("what did you remind me of?")]
    assert REMINDER in answered[-1].texts  # the reply in the thread has the reminder in context
    assert [j.state for j in await e.store.list_jobs(e.gateway.bot)] == []  # a once job is done


async def test_a_goal_in_a_slack_thread_gets_its_scheduled_check_in_in_that_thread(slack_clock, fake_slack, fake_llm):
    check_in = "⏰ Reminder: check the migration's progress"

    def respond(request: Any) -> Reply:
        if is_judge(request):
            return Reply(text=verdict("done", "the check-in is scheduled"))
        if request.turn_tool_results:
            return Reply(text="I will check in on it shortly.")
        return Reply(tool_calls=[("cronjob", json.dumps({
            "action": "create", "name": "check-in", "message": "check the migration's progress",
            "schedule": "in 2 seconds"}))])

    fake_llm.responder = respond
    ack = await fake_slack.post_command("/goal", "schedule a check-in on the migration", channel=CHANNEL)
    assert ack.status == 200
    await fake_slack.wait_for(lambda: bool(fake_slack.top_level(CHANNEL)))
    [anchor] = fake_slack.top_level(CHANNEL)
    assert anchor.from_bot and anchor.visible.startswith("🎯 Goal: schedule a check-in")

    await shown(fake_slack, anchor.ts, r"^✅ Goal done")
    message = await shown(fake_slack, anchor.ts, f"^{re.escape(check_in)}$")
    assert message.thread_ts == anchor.ts  # the goal's thread, where its turn made it
    await asyncio.sleep(2.5)
    assert thread_texts(fake_slack, anchor.ts).count(check_in) == 1
    assert [m.ts for m in fake_slack.top_level(CHANNEL)] == [anchor.ts]


# -- delivered to a channel named from a DM -------------------------------------------------------------


def in_team(deliver: str, schedule: str = "in 2 seconds") -> dict[str, Any]:
    return {"action": "create", "name": "standup", "message": "standup", "schedule": schedule, "deliver": deliver}


async def answered(fake: FakeSlack, channel: str, pattern: str, timeout: float = 10) -> SlackMessage:
    found = re.compile(pattern)

    def match() -> SlackMessage | None:
        return next((m for m in fake.bot_messages(channel) if found.search(m.visible) and not m.streaming), None)

    await fake.wait_for(lambda: match() is not None, timeout)
    message = match()
    assert message is not None
    return message


def texts(fake: FakeSlack, channel: str) -> list[str]:
    return [m.visible for m in fake.bot_messages(channel)]


async def test_a_reminder_made_in_a_dm_for_a_channel_named_by_name_arrives_there_once(
        slack_clock, fake_slack, fake_llm):
    e, _ = slack_clock
    fake_slack.channels[TEAM] = Channel(TEAM, "team")
    fake_llm.responder = schedules({"remind the team": in_team("#team")})
    await fake_slack.say("UALICE", DM, "remind the team")
    confirmation = await answered(fake_slack, DM, r"^Reminder #\d+ set")
    assert "in #team" in confirmation.visible
    posted = await answered(fake_slack, TEAM, f"^{re.escape(STANDUP)}$")
    await asyncio.sleep(2)
    assert texts(fake_slack, TEAM).count(STANDUP) == 1
    assert STANDUP not in texts(fake_slack, DM)
    # Written into the channel's conversation, as Alice's own message there would find it.
    session = await e.store.active_session(f"slack:{fake_slack.team}:channel:{TEAM}:user:UALICE", e.gateway.bot)
    assert [m.content for m in await e.store.load_messages(session.id)] == [STANDUP]

    # A reply in the reminder's thread, which Slack keeps apart from the channel, has the reminder in context.
    await fake_slack.say("UALICE", TEAM, "what was that about?", thread_ts=posted.ts)
    await fake_slack.wait_for(lambda: any(r.last_user_text.endswith("what was that about?")
                                          for r in fake_llm.requests), 10)
    asked = next(r for r in fake_llm.requests if r.last_user_text.endswith("what was that about?"))
    assert STANDUP in str(asked.body["messages"])
    await answered(fake_slack, TEAM, "^(?!" + re.escape(STANDUP) + ")")  # answered in the thread, unmentioned
    assert any(m.thread_ts == posted.ts for m in fake_slack.bot_messages(TEAM) if m.ts != posted.ts)


async def test_a_channel_the_bot_is_not_in_is_refused_in_one_sentence_and_nothing_is_saved(
        slack_clock, fake_slack, fake_llm):
    e, _ = slack_clock
    fake_slack.channels[TEAM] = Channel(TEAM, "team", is_member=False)
    fake_llm.responder = schedules({"remind the team": in_team(TEAM)})
    await fake_slack.say("UALICE", DM, "remind the team")
    refusal = await answered(fake_slack, DM, r"^Error: I cannot post in CTEAM0001: I am not a member")
    assert refusal.visible.endswith(".")
    assert await e.store.list_jobs(e.gateway.bot) == []


async def test_a_channel_the_bot_left_before_the_run_is_refused_and_paused_with_nothing_sent(
        slack_clock, fake_slack, fake_llm):
    e, _ = slack_clock
    team = fake_slack.channels[TEAM] = Channel(TEAM, "team")
    fake_llm.responder = schedules({"remind the team": in_team("<#CTEAM0001|team>", "in 3 seconds")})
    await fake_slack.say("UALICE", DM, "remind the team")
    await answered(fake_slack, DM, r"^Reminder #\d+ set")
    team.is_member = False

    job = None
    for _ in range(100):
        jobs = await e.store.list_jobs(e.gateway.bot)
        if jobs and jobs[0].state == "paused":
            job = jobs[0]
            break
        await asyncio.sleep(0.1)
    assert job is not None, "the job was not paused"
    assert (job.last_outcome or "").startswith("refused: I cannot post in <#CTEAM0001|team> any more"), job
    await asyncio.sleep(1)
    assert texts(fake_slack, TEAM) == []
