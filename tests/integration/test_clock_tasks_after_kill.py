"""`kill -9` a real gateway while a scheduled task's model call is in flight: after the restart the run is
recorded as interrupted and the chat told once; the task is not run again (its tools may have acted).

The gateway runs as an operator runs it (`hermes-gateway run` with the shipped Telegram profile, long polling
the fake Telegram, the model behind the fake LLM, which calls `cronjob` to make the task and then holds the
task's own request unanswered until the process is killed).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from typing import Any

import pytest
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import telegram_dm_gateway

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

ALICE = 4242
START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow
ASK = "in 3 seconds, look up what is new"
TASK = "[Scheduled task #"


def texts(telegram: FakeTelegram) -> list[str]:
    return [m.text for m in telegram.chat(ALICE).bot_messages]


async def test_killed_while_a_task_runs_the_restart_records_it_interrupted_and_does_not_run_it_again(
        fake_llm, tmp_path):
    asked, release = asyncio.Event(), asyncio.Event()
    task_requests: list[Any] = []

    async def respond(request: Any) -> Reply:
        if TASK in request.last_user_text:
            task_requests.append(request)
            asked.set()
            await release.wait()
            return Reply(text="What is new: nothing.")
        if request.turn_tool_results:
            return Reply(text=request.turn_tool_results[-1])
        if request.last_user_text == ASK:
            return Reply(tool_calls=[("cronjob", json.dumps({"action": "create", "name": "news", "prompt": "look up "
                                                             "what is new", "schedule": "in 3s"}))])
        return Reply(text="Noted.")

    fake_llm.responder = respond
    confirmed = re.compile(r"^Task #\d+ set")
    async with FakeTelegram() as telegram:
        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE) as first_life:
            telegram.user_says(ALICE, ALICE, ASK)
            await telegram.wait_for(lambda: any(confirmed.search(t) for t in texts(telegram)),
                                    timeout=START_TIMEOUT)
            await asyncio.wait_for(asked.wait(), 30)
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        assert len(task_requests) == 1

        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE):
            await telegram.wait_for(lambda: any("was interrupted" in t for t in texts(telegram)),
                                    timeout=START_TIMEOUT)
            await telegram.settle(quiet=2.5, timeout=30)
        release.set()
    told = [t for t in texts(telegram) if "was interrupted" in t]
    assert len(told) == 1 and "'news'" in told[0] and told[0].endswith("is not run again.")
    assert len(task_requests) == 1  # never asked again
    assert not any("nothing." in t for t in texts(telegram))
