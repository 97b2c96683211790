"""`kill -9` a real gateway after it took a due reminder and before the platform got it: after the restart
the reminder arrives once.

The gateway runs as an operator runs it (`hermes-gateway run` with the shipped Telegram profile, long polling
the fake Telegram, the model behind the fake LLM, which calls `cronjob`). The reminder's `sendMessage` is held
by the fake, so the process is killed while it holds the job's lease with the delivery in flight; the held
call is then dropped, as a platform that never answered.
"""

from __future__ import annotations

import re
import signal

import pytest
from fakes.fake_telegram import FakeTelegram
from gateway_kit import telegram_dm_gateway
from test_clock_telegram import REMINDER, schedules

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

ALICE = 4242
START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow


def texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.chat(ALICE).bot_messages]


async def test_killed_between_taking_a_reminder_and_delivering_it_the_restart_delivers_it_once(fake_llm, tmp_path):
    fake_llm.responder = schedules({"remind me in 3 seconds to stretch": {
        "action": "create", "message": "stretch", "schedule": "in 3s"}})
    confirmed = re.compile(r"^Reminder #\d+ set.*to change it\.$")
    async with FakeTelegram() as telegram:
        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE) as first_life:
            telegram.user_says(ALICE, ALICE, "remind me in 3 seconds to stretch")
            await telegram.wait_for(lambda: any(confirmed.search(t) for t in texts(telegram)),
                                    timeout=START_TIMEOUT)
            await telegram.settle(quiet=0.3, timeout=10)
            telegram.hold("sendMessage")  # the reminder's send arrives and is never answered
            await telegram.wait_for(lambda: telegram.held, timeout=10)
            assert REMINDER not in texts(telegram)
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        telegram.release()

        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE):
            await telegram.wait_for_text(ALICE, REMINDER, timeout=START_TIMEOUT)
            await telegram.settle(quiet=2.5, timeout=30)
        assert texts(telegram).count(REMINDER) == 1
