"""A reminder made in a Slack DM and delivered to a channel the person named by `#name`: the real slack-bolt
app and slack-sdk client against the fake Slack (`conversations.list` and `conversations.info` telling where
the bot is), the fake LLM calling `cronjob`, the real gateway and clock on SQLite."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from engine_harness import make_profile
from fakes.fake_slack import Channel, FakeSlack, SlackMessage
from kanban_kit import shipped_profile
from slack_kit import serve_slack, slack_environment
from test_clock_slack import schedules

DM = "DALICE"
TEAM = "CTEAM0001"
REMINDER = "⏰ Reminder: standup"


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def slack_clock(engine, fake_slack, monkeypatch):
    slack_environment(monkeypatch, fake_slack)
    e = await engine(profile=make_profile(toolsets=shipped_profile("slack-channel-bot").toolsets), platform="slack")
    served = await serve_slack(e, events_from=fake_slack)
    yield e, served
    await served.close()


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
    posted = await answered(fake_slack, TEAM, f"^{re.escape(REMINDER)}$")
    await asyncio.sleep(2)
    assert texts(fake_slack, TEAM).count(REMINDER) == 1
    assert REMINDER not in texts(fake_slack, DM)
    # Written into the channel's conversation, as Alice's own message there would find it.
    session = await e.store.active_session(f"slack:{fake_slack.team}:channel:{TEAM}:user:UALICE", e.gateway.bot)
    assert [m.content for m in await e.store.load_messages(session.id)] == [REMINDER]

    # A reply in the reminder's thread, which Slack keeps apart from the channel, has the reminder in context.
    await fake_slack.say("UALICE", TEAM, "what was that about?", thread_ts=posted.ts)
    await fake_slack.wait_for(lambda: any(r.last_user_text.endswith("what was that about?")
                                          for r in fake_llm.requests), 10)
    asked = next(r for r in fake_llm.requests if r.last_user_text.endswith("what was that about?"))
    assert REMINDER in str(asked.body["messages"])
    await answered(fake_slack, TEAM, "^(?!" + re.escape(REMINDER) + ")")  # answered in the thread, unmentioned
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
