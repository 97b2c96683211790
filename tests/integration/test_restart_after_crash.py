"""A gateway restarted on the same host after `kill -9` (or a SIGTERM that cut a reply) answers at once: it
finds its predecessor's process gone and takes the Telegram poller's and the session's leases without waiting
them out, then finishes the reply that was cut, once — on SQLite and on PostgreSQL.

The leases here last ten minutes, so a restart that waited for them would never answer within the test.
"""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
import pytest
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import database_url, free_port, gateway_process, ready_roles, wait_until
from postgres import BACKENDS

ALICE = 4242
START_TIMEOUT = 60  # a hang guard: the child imports everything first
LEASE_SECONDS = 600
PROFILE = f"""\
name: restart-bot
model: openai:gpt-test
access:
  allowed_users: ["{ALICE}"]
platforms:
  telegram:
    mode: polling
    poller_lease_seconds: {LEASE_SECONDS}
"""

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", BACKENDS)]


def answer(request) -> Reply:
    if request.last_user_text == "tell me something long":
        return Reply(chunks=["A partial answer that "] + ["goes on "] * 60, delay=0.5)
    return Reply(text=f"You said: {request.last_user_text}")


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
async def test_a_restart_after_the_gateway_died_mid_reply_answers_at_once_and_finishes_the_cut_reply_once(
        backend, stop, fake_llm, tmp_path: Path):
    bot = tmp_path / "restart-bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE)
    fake_llm.responder = answer
    async with database_url(backend, tmp_path) as db_url, FakeTelegram() as telegram, aiohttp.ClientSession() as http:
        port = free_port()
        env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path / "home"),
               "HERMES_DATABASE_URL": db_url, "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port),
               "HERMES_SESSION_LEASE_SECONDS": str(LEASE_SECONDS), "HERMES_SHUTDOWN_GRACE_SECONDS": "0.5",
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url}

        async def leading() -> bool:
            roles = await ready_roles(http, port)
            return roles is not None and "leader" in roles.values()

        async with gateway_process(bot, env) as first_life:
            telegram.user_says(ALICE, ALICE, "tell me something long")
            partial = await telegram.wait_for(
                lambda: [m for m in telegram.chat(ALICE).bot_messages if m.edits], timeout=START_TIMEOUT)
            first_life.send_signal(stop)
            await first_life.wait()
        assert partial[0].text.startswith("A partial answer that")

        fake_llm.responder = lambda request: Reply(text=f"You said: {request.last_user_text}")
        async with gateway_process(bot, env):
            await wait_until(leading, START_TIMEOUT)
            telegram.user_says(ALICE, ALICE, "are you back?")
            await telegram.wait_for_text(ALICE, "You said: are you back?", timeout=START_TIMEOUT)
            finished = await telegram.wait_for_text(ALICE, "You said: tell me something long",
                                                    timeout=START_TIMEOUT)
            await telegram.settle(quiet=1.0, timeout=30)
        shown = [m.text for m in telegram.chat(ALICE).bot_messages]
    assert finished.message_id == partial[0].message_id  # the cut reply is finished in place
    assert shown.count("You said: tell me something long") == 1
    assert shown.count("You said: are you back?") == 1
