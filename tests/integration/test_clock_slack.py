"""Reminders in a Slack thread, end to end: the real slack-bolt app and slack-sdk client against the fake Slack
(signed events on loopback), the fake LLM calling `cronjob`, the real gateway and its clock on SQLite. A
reminder made in a thread, by a person or by a goal's turn, arrives once in that thread, never in the channel."""

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
from fakes.fake_slack import FakeSlack, SlackMessage
from kanban_kit import shipped_profile
from reminders_kit import schedules
from slack_kit import serve_slack, slack_environment

CHANNEL = "CGENERAL"
REMINDER = "⏰ Reminder: stretch"
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
