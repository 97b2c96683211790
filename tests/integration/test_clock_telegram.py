"""Reminders in a Telegram DM, end to end: the real python-telegram-bot against the fake Bot API, the fake LLM
calling `cronjob`, the real gateway and its clock on SQLite. Assertions are about what the person sees."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from reminders_kit import ALICE, REMINDER, bot_texts, calling, schedules, shown, start

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def test_remind_me_in_two_seconds_names_the_local_time_and_arrives_once(engine, telegram, fake_llm):
    fake_llm.responder = schedules({"remind me in 2 seconds to stretch": {
        "action": "create", "name": "stretch", "message": "stretch", "schedule": "in 2 seconds"}})
    e, adapter = await start(engine)
    try:
        asked = datetime.now(UTC)
        loop = asyncio.get_running_loop()
        started = loop.time()
        telegram.user_says(42, ALICE, "remind me in 2 seconds to stretch")
        confirmation = await shown(telegram, r"^Reminder #\d+ set.*to change it\.$")
        fired_at = re.search(r"fires \w{3} \d+ \w{3} \d{4}, (\d\d:\d\d:\d\d) UTC \(UTC\)", confirmation.text)
        assert fired_at is not None, confirmation.text
        said = datetime.strptime(fired_at.group(1), "%H:%M:%S").time()
        expected = (asked + timedelta(seconds=2)).time()
        assert abs(datetime.combine(asked.date(), said) - datetime.combine(asked.date(), expected)) < timedelta(seconds=3)
        assert "/timezone" in confirmation.text  # no zone chosen: UTC, and how to change it

        await telegram.wait_for_text(42, REMINDER, timeout=10)
        assert loop.time() - started - 2 < 1.5  # on time: within a second and what polling the fake costs
        await asyncio.sleep(2.5)
        assert bot_texts(telegram).count(REMINDER) == 1

        telegram.user_says(42, ALICE, "done, what did you remind me of?")
        await telegram.wait_for_text(42, "Noted.", timeout=10)
        assert REMINDER in fake_llm.requests[-1].texts  # the reply has the reminder in context
    finally:
        await adapter.stop()


async def test_a_reminder_due_while_the_gateway_was_down_fires_once_after_it_starts(engine, telegram, fake_llm,
                                                                                    tmp_path):
    fake_llm.responder = schedules({"remind me in 3 seconds to stretch": {
        "action": "create", "message": "stretch", "schedule": "in 3s"}})
    e, adapter = await start(engine, home=tmp_path)
    telegram.user_says(42, ALICE, "remind me in 3 seconds to stretch")
    await shown(telegram, r"^Reminder #\d+ set")
    await adapter.stop()
    await e.stop()
    await asyncio.sleep(4)  # its time comes and goes while nothing runs
    assert REMINDER not in bot_texts(telegram)

    e, adapter = await start(engine, home=tmp_path)
    try:
        await telegram.wait_for_text(42, REMINDER, timeout=10)
        await asyncio.sleep(2.5)
        assert bot_texts(telegram).count(REMINDER) == 1
    finally:
        await adapter.stop()


@pytest.mark.parametrize(("schedule", "sentence"), [
    ("30m", "Once in 30 minutes, or every 30 minutes?"),
    ("0 0 9 * * 1", "Cron expressions here have five fields"),
    ("every 0 minutes", "An interval has to be longer than zero"),
    ("2020-01-01T09:00+00:00", "has already passed"),
])
async def test_a_schedule_that_cannot_be_used_is_answered_in_one_sentence_and_saves_nothing(
        engine, telegram, fake_llm, schedule, sentence):
    fake_llm.responder = schedules({"remind me": {"action": "create", "message": "stretch", "schedule": schedule}})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "remind me")
        await shown(telegram, re.escape(sentence))
        assert await e.store.list_jobs(e.profile.name) == []
    finally:
        await adapter.stop()


async def test_timezone_is_kept_with_the_person_and_names_the_zone(engine, telegram, fake_llm):
    fake_llm.responder = schedules({"every monday": {
        "action": "create", "message": "plan the week", "schedule": "every monday 9am"}})
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "/timezone")
        await shown(telegram, r"^Your time zone is UTC \(nothing chosen yet: UTC\)")
        telegram.user_says(42, ALICE, "/timezone Mars/Olympus")
        await shown(telegram, r"I do not know the time zone 'Mars/Olympus'")
        telegram.user_says(42, ALICE, "/timezone Europe/Berlin")
        await shown(telegram, r"^Your time zone is now Europe/Berlin")
        telegram.user_says(42, ALICE, "every monday")
        confirmation = await shown(telegram, r"^Reminder #\d+ set.*monday 9am\.$")
        assert re.search(r"fires Mon \d+ \w{3} \d{4}, 09:00 CES?T \(Europe/Berlin\), then every monday 9am\.$",
                         confirmation.text), confirmation.text
    finally:
        await adapter.stop()


async def test_a_zone_the_person_confirmed_in_chat_is_kept_with_them_and_used_by_their_next_reminder(
        engine, telegram, fake_llm):
    calls = {"yes, Tokyo time": ("set_timezone", {"zone": "Asia/Tokyo"}),
             "yes, Olympus time": ("set_timezone", {"zone": "Mars/Olympus"}),
             "every monday": ("cronjob", {"action": "create", "message": "plan the week", "schedule": "every monday 9am"})}

    fake_llm.responder = calling(calls)
    e, adapter = await start(engine)
    try:
        telegram.user_says(42, ALICE, "yes, Olympus time")
        await shown(telegram, r"I do not know the time zone 'Mars/Olympus'")
        telegram.user_says(42, ALICE, "yes, Tokyo time")
        await shown(telegram, r"^Your time zone is now Asia/Tokyo: it is \w{3} \d+ \w{3} \d{4}, \d\d:\d\d")
        person = (await e.store.resolve_account("telegram", adapter.account, "42", "Alice")).person_id
        assert await e.store.person_timezone(person) == "Asia/Tokyo"  # with the person, not in a prompt
        assert all("Asia/Tokyo" not in (s.system_prompt or "") for s in e.gateway.sessions.values())
        telegram.user_says(42, ALICE, "every monday")
        confirmation = await shown(telegram, r"^Reminder #\d+ set")
        assert "09:00 JST (Asia/Tokyo)" in confirmation.text, confirmation.text
    finally:
        await adapter.stop()
