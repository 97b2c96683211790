"""`kill -9` a real gateway after it took a due reminder and before the platform got it: after the restart
the reminder arrives once.

The gateway runs as an operator runs it (`hermes-gateway run` with the shipped Telegram profile, long polling
the fake Telegram, the model behind the fake LLM, which calls `cronjob`). The reminder's `sendMessage` is held
by the fake, so the process is killed while it holds the job's lease with the delivery in flight; the held
call is then dropped, as a platform that never answered.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from engine_harness import fake_llm_environment
from fakes.fake_llm import FakeLLM
from fakes.fake_telegram import FakeTelegram
from gateway_kit import gateway_process
from test_clock_telegram import REMINDER, schedules

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

ALICE = 4242
START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow


@asynccontextmanager
async def gateway(telegram: FakeTelegram, fake_llm: FakeLLM, home: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home),
           "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": "0",
           "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
           "TELEGRAM_ALLOWED_USERS": str(ALICE)}
    async with gateway_process("bots/telegram-dm-assistant", env, stderr=asyncio.subprocess.PIPE) as proc:
        yield proc


def texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.chat(ALICE).bot_messages]


async def test_killed_between_taking_a_reminder_and_delivering_it_the_restart_delivers_it_once(fake_llm, tmp_path):
    fake_llm.responder = schedules({"remind me in 3 seconds to stretch": {
        "action": "create", "message": "stretch", "schedule": "in 3s"}})
    confirmed = re.compile(r"^Reminder #\d+ set.*to change it\.$")
    async with FakeTelegram() as telegram:
        async with gateway(telegram, fake_llm, tmp_path) as first_life:
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

        async with gateway(telegram, fake_llm, tmp_path):
            await telegram.wait_for_text(ALICE, REMINDER, timeout=START_TIMEOUT)
            await telegram.settle(quiet=2.5, timeout=30)
        assert texts(telegram).count(REMINDER) == 1
