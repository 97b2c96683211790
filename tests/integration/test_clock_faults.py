"""Reminders when things go wrong, through the real adapters and the platform fakes: Telegram answering 429 at
delivery time, a daylight-saving night in the person's zone, a chat the owner may no longer write to (a person
taken off the allowlist, a Slack channel the bot left), and a person who is forgotten.

Where hours must pass, time is the clock the `ClockFeature` is given (`Now`): the test moves it and the
ticker, which looks at least once a second, sees the new time; delivery still goes through the real adapter
and the fake."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from engine_harness import Engine, make_profile
from fakes.fake_slack import FakeSlack
from reminders_kit import ALICE, bot_texts, schedules, shown, start
from slack_kit import serve_slack, slack_environment

from hermes_engine.clock import ClockFeature
from hermes_engine.ports.jobs import JobRecord

TICK = 1.3  # a little more than the longest the clock's ticker sleeps between looks at the store
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
T = TypeVar("T")


class Now:
    """A clock the test moves (`ClockFeature(clock=...)`)."""

    def __init__(self, t: datetime | None = None) -> None:
        self.t = t or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.t


async def eventually(probe: Callable[[], Awaitable[T | None]], timeout: float = 10) -> T | None:
    """What `probe` gives once it gives something; None if it gave nothing within `timeout`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if (value := await probe()) is not None:
            return value
        await asyncio.sleep(0.05)
    return None


async def the_job(e: Engine) -> JobRecord:
    [job] = await e.store.list_jobs(e.gateway.bot)
    return job


# -- a 429 at delivery time ------------------------------------------------------------------------------


async def test_a_429_when_the_reminder_is_sent_is_waited_out_and_the_reminder_arrives_once(engine, telegram,
                                                                                           fake_llm):
    fake_llm.responder = schedules({"remind me in 2 seconds to stretch": {
        "action": "create", "message": "stretch", "schedule": "in 2 seconds"}})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind me in 2 seconds to stretch")
        await shown(telegram, r"^Reminder #\d+ set")
        job = await the_job(e)
        await telegram.settle(quiet=0.2)  # the confirmation's last edit is in
        calls_before = len(telegram.chat(42).calls)
        telegram.rate_limit(42, retry_after=2, methods=["sendMessage"])

        await telegram.wait_for_text(42, "⏰ Reminder: stretch", timeout=10)
        sends = [c for c in telegram.chat(42).calls[calls_before:] if c.method == "sendMessage"]
        assert [c.status for c in sends] == [429, 200]  # refused once, then sent once
        assert sends[1].time - sends[0].time >= 2  # not before retry_after
        assert telegram.chat(42).violations == []  # nothing else was tried while Telegram said wait
        await asyncio.sleep(1.5)
        assert bot_texts(telegram).count("⏰ Reminder: stretch") == 1
        done = await e.store.get_job(job.id)
        assert done is not None and done.state == "done" and done.last_outcome == "delivered"
        assert done.failures == 0  # the 429 was paced, not counted as a failed delivery
    finally:
        await adapter.stop()


# -- a daylight-saving night in the person's zone ------------------------------------------------------

SPRING_FORWARD = pytest.param(  # 29 Mar 2026 in Berlin: 02:00 CET jumps to 03:00 CEST, 02:30 does not exist
    datetime(2026, 3, 28, 12, 0, tzinfo=UTC), "Sun 29 Mar 2026, 03:00 CEST",
    datetime(2026, 3, 29, 1, 0, tzinfo=UTC), [], datetime(2026, 3, 30, 0, 30, tzinfo=UTC), id="spring-forward")
FALL_BACK = pytest.param(  # 25 Oct 2026 in Berlin: 03:00 CEST falls back to 02:00 CET, 02:30 happens twice
    datetime(2026, 10, 24, 12, 0, tzinfo=UTC), "Sun 25 Oct 2026, 02:30 CEST",
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC), [datetime(2026, 10, 25, 1, 30, tzinfo=UTC)],
    datetime(2026, 10, 26, 1, 30, tzinfo=UTC), id="fall-back")


@pytest.mark.parametrize(("made", "said", "fires", "later_that_night", "next_night"), [SPRING_FORWARD, FALL_BACK])
async def test_a_daily_0230_reminder_fires_once_on_the_night_the_clocks_change(
        engine, telegram, fake_llm, made, said, fires, later_that_night, next_night):
    """The rule `hermes_engine/clock/schedule.py` states: a time that does not exist that night fires once,
    at the first moment after the gap; a time that happens twice fires once, at its first occurrence."""
    now = Now(made)
    fake_llm.responder = schedules({"every night at 2:30": {
        "action": "create", "message": "water the plants", "schedule": "every day at 2:30"}})
    e, adapter = await start(engine, features=[ClockFeature(clock=now)])
    try:
        telegram.user_says(42, ALICE, "/timezone Europe/Berlin")
        await shown(telegram, r"^Your time zone is now Europe/Berlin")
        telegram.user_says(42, ALICE, "remind me every night at 2:30")
        confirmation = await shown(telegram, r"^Reminder #\d+ set")
        assert f"fires {said} (Europe/Berlin), then every day at 2:30." in confirmation.text
        assert (await the_job(e)).next_due == fires

        now.t = fires - timedelta(seconds=1)
        await asyncio.sleep(TICK)
        assert "⏰ Reminder: water the plants" not in bot_texts(telegram)  # not before its time
        now.t = fires
        await telegram.wait_for_text(42, "⏰ Reminder: water the plants", timeout=10)

        async def moved_on() -> JobRecord | None:
            job = await the_job(e)
            return job if job.next_due != fires else None

        job = await eventually(moved_on)
        assert job is not None and job.next_due == next_night and job.last_outcome == "delivered"
        for moment in [*later_that_night, fires + timedelta(hours=12)]:  # the doubled 02:30, and the day after
            now.t = moment
            await asyncio.sleep(TICK)
        assert bot_texts(telegram).count("⏰ Reminder: water the plants") == 1
        assert (await the_job(e)).runs == 1
    finally:
        await adapter.stop()


# -- a chat the owner may no longer write to -----------------------------------------------------------


async def test_a_reminder_of_a_person_taken_off_the_allowlist_is_not_delivered(engine, telegram, fake_llm,
                                                                              tmp_path):
    now = Now()
    fake_llm.responder = schedules({"remind me in a minute to stretch": {
        "action": "create", "message": "stretch", "schedule": "in 1 minute"}})
    e, adapter = await start(engine, features=[ClockFeature(clock=now)], home=tmp_path)
    telegram.user_says(42, ALICE, "remind me in a minute to stretch")
    await shown(telegram, r"^Reminder #\d+ set")
    job = await the_job(e)
    await adapter.stop()
    await e.stop()

    # The operator takes Alice off the allowlist and restarts the bot; her reminder comes due.
    now.t += timedelta(minutes=1)
    e, adapter = await start(engine, features=[ClockFeature(clock=now)], home=tmp_path, allowed=())
    try:
        telegram.user_says(42, ALICE, "hello?")
        await shown(telegram, r"pairing approve")  # she is not let in any more: a stranger, asked to pair
        assert not any(r.last_user_text.endswith("hello?") for r in fake_llm.requests)

        async def ran() -> JobRecord | bool | None:
            record = await e.store.get_job(job.id)
            return True if record is None else (record if record.state != "active" else None)  # recorded, then paused

        refused = await eventually(ran, timeout=5)
        assert isinstance(refused, JobRecord)
        assert refused.state == "paused" and (refused.last_outcome or "").startswith("refused: ")
        await asyncio.sleep(1.5)  # a tick or two more: still nothing
        assert "⏰ Reminder: stretch" not in bot_texts(telegram)
    finally:
        await adapter.stop()


async def test_a_reminder_in_a_slack_channel_the_bot_left_is_not_counted_delivered_and_is_retried_later(
        engine, fake_llm, monkeypatch):
    """What happens today: Slack refuses the post (`not_in_channel`), the run is recorded as not delivered and
    retried after the back-off (`runs.py`), nothing shows in the channel."""
    now = Now()
    async with FakeSlack() as fake_slack:
        slack_environment(monkeypatch, fake_slack)
        fake_llm.responder = schedules({"remind me in 2 seconds to stretch": {
            "action": "create", "message": "stretch", "schedule": "in 2 seconds"}})
        e = await engine(profile=make_profile(toolsets=["core", "clock"]), features=[ClockFeature(clock=now)],
                         platform="slack")
        served = await serve_slack(e, events_from=fake_slack)
        try:
            asked = await fake_slack.say("UALICE", "CGENERAL",
                                         f"<@{fake_slack.bot_user}> remind me in 2 seconds to stretch")
            await fake_slack.wait_for(lambda: any(m.visible.startswith("Reminder #")
                                                  for m in fake_slack.bot_messages("CGENERAL", asked.ts)))
            fake_slack.fail("chat.postMessage", status=200, error="not_in_channel", times=5)  # the bot left
            now.t += timedelta(seconds=2)

            async def failed() -> JobRecord | None:
                job = await the_job(e)
                return job if job.failures else None

            job = await eventually(failed)
            assert job is not None, "the run was never tried"
            assert job.state == "active" and "not_in_channel" in (job.last_outcome or "")
            assert job.next_due == now.t + timedelta(seconds=30)  # retried after the back-off, not at once
            assert not any("⏰ Reminder" in m.visible for m in fake_slack.bot_messages("CGENERAL"))
        finally:
            await served.close()


# -- a person who is forgotten -------------------------------------------------------------------------


async def test_a_person_who_is_forgotten_loses_their_reminders_and_none_arrives(engine, telegram, fake_llm):
    from hermes_engine.people.forget import ForgetFeature

    now = Now()
    fake_llm.responder = schedules({"remind me in a minute to call the bank": {
        "action": "create", "message": "call the bank", "schedule": "in 1 minute"}})
    e, adapter = await start(engine, features=[ClockFeature(clock=now), ForgetFeature()])
    try:
        telegram.user_says(42, ALICE, "remind me in a minute to call the bank")
        await shown(telegram, r"^Reminder #\d+ set")
        job = await the_job(e)
        telegram.user_says(42, ALICE, "/forget")
        code = re.search(r"/forget (\w+)", (await shown(telegram, r"send `?/forget \w+")).text)
        assert code is not None
        telegram.user_says(42, ALICE, f"/forget {code.group(1)}")
        await shown(telegram, r"^Done: I have deleted everything")
        assert await e.store.get_job(job.id) is None

        now.t += timedelta(minutes=2)
        await asyncio.sleep(TICK)
        assert "⏰ Reminder: call the bank" not in bot_texts(telegram)
    finally:
        await adapter.stop()
