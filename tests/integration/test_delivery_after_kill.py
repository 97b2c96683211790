"""`kill -9` a real gateway in the middle of a reply: after the restart the chat shows the answer once.

The gateway runs as an operator runs it (`hermes-gateway run`, Telegram by long polling against the fake
Telegram, the model behind the fake LLM). The kill comes at the two moments where a reply used to be
repeated: after the first message went out but before its final formatted edit landed, and while the
answer was still streaming.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import telegram_dm_gateway

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

ROOT = Path(__file__).resolve().parents[2]
ALICE = 4242
START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow


async def kill(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


async def test_killed_after_the_first_send_the_restart_edits_that_message_into_the_answer(fake_llm, tmp_path):
    answer = "The answer is **forty-two**, as computed."
    fake_llm.responder = lambda request: Reply(text=answer)
    async with FakeTelegram() as telegram:
        telegram.hold("editMessageText")  # the first message goes out; its edits never land
        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE) as first_life:
            telegram.user_says(ALICE, ALICE, "what is six times seven?")
            await telegram.wait_for(lambda: telegram.held, timeout=START_TIMEOUT)
            assert len(telegram.chat(ALICE).bot_messages) == 1
            await kill(first_life)
        telegram.release()
        calls_before = len(fake_llm.requests)

        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE):
            shown = await telegram.wait_for_text(ALICE, "The answer is forty-two, as computed.",
                                                 timeout=START_TIMEOUT)
            await telegram.settle(quiet=1.5, timeout=30)
        chat = telegram.chat(ALICE)
        assert [m.message_id for m in chat.bot_messages] == [shown.message_id]  # edited in place, not resent
        assert shown.formatted
        assert len(fake_llm.requests) == calls_before  # the stored answer was delivered without a model call


async def test_killed_mid_stream_the_restart_completes_the_partial_message_in_place(fake_llm, tmp_path):
    words = ["A partial answer that "] + ["goes on "] * 40
    fake_llm.responder = lambda request: Reply(chunks=words, delay=1.0)  # one chunk a second
    async with FakeTelegram() as telegram:
        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE) as first_life:
            telegram.user_says(ALICE, ALICE, "tell me something long")
            # Killed once the partial message has been edited at least once: the gateway has seen its
            # send return (the only unguarded moment is between the platform accepting a send and the
            # ledger write after it, which the README states).
            partial = await telegram.wait_for(
                lambda: [m for m in telegram.chat(ALICE).bot_messages if m.edits], timeout=START_TIMEOUT)
            assert partial[0].text.startswith("A partial answer that goes on")
            await kill(first_life)

        fake_llm.responder = lambda request: Reply(text="Here is the **whole** answer, at last.")
        async with telegram_dm_gateway(telegram, fake_llm, tmp_path, ALICE):
            shown = await telegram.wait_for_text(ALICE, "Here is the whole answer, at last.", timeout=START_TIMEOUT)
            await telegram.settle(quiet=1.5, timeout=30)
        chat = telegram.chat(ALICE)
        assert [m.message_id for m in chat.bot_messages] == [partial[0].message_id] == [shown.message_id]
        assert not any(m.deleted for m in chat.messages if m.from_bot)  # completed, not replaced
