"""A gateway killed with `kill -9` while a dangerous command waits for approval in Telegram: the question
stays in the chat with its buttons (nobody could edit it), and when the restarted gateway receives a press on
it, the presser is answered "This request has ended." and nothing runs — the turn that waited died with its
process, whatever the database still says of the request. On SQLite and on PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
import pytest
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram, FakeUser
from gateway_kit import database_url, free_port, gateway_process, ready_roles, wait_until
from postgres import BACKENDS

ALICE = FakeUser(4242, "Alice", "alice")
START_TIMEOUT = 60  # a hang guard: the child imports everything first
COMMAND = "mkdir -p cache && rm -rf cache && echo purged | tee -a runs"
PROFILE = f"""\
name: approving-bot
model: openai:gpt-test
toolsets: [core, terminal]
access:
  admins: ["{ALICE.id}"]
  allowed_users: ["{ALICE.id}"]
workspace:
  approve: [dangerous]
  approval_timeout_seconds: 600
platforms:
  telegram:
    mode: polling
    poller_lease_seconds: 600
"""

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", BACKENDS)]


def respond(request) -> Reply:
    if request.turn_tool_results:
        return Reply(text="done: " + request.turn_tool_results[0].splitlines()[0])
    return Reply(tool_calls=[("terminal", {"command": COMMAND})])


async def test_a_press_on_a_question_whose_process_was_killed_is_answered_that_it_ended_and_runs_nothing(
        backend, fake_llm, tmp_path: Path):
    bot = tmp_path / "approving-bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE)
    home = tmp_path / "home"
    fake_llm.responder = respond
    async with database_url(backend, tmp_path) as db_url, FakeTelegram() as telegram, aiohttp.ClientSession() as http:
        port = free_port()
        env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_DATABASE_URL": db_url,
               "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port), "HERMES_SESSION_LEASE_SECONDS": "600",
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url}

        async def leading() -> bool:
            roles = await ready_roles(http, port)
            return roles is not None and "leader" in roles.values()

        async with gateway_process(bot, env) as first_life:
            telegram.user_says(ALICE.id, ALICE, "purge the cache")
            question = await telegram.wait_for(
                lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if m.buttons), None),
                timeout=START_TIMEOUT)
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        assert question.buttons  # nobody was left to take them away

        async with gateway_process(bot, env):
            await wait_until(leading, START_TIMEOUT)
            telegram.press(ALICE.id, ALICE, question.message_id, dict(question.buttons)["Approve once"])
            await telegram.wait_for(lambda: telegram.callback_answers, timeout=START_TIMEOUT)
            assert [text for _, text in telegram.callback_answers] == ["This request has ended."]
    assert [p.read_text() for p in home.glob("workspaces/*/runs")] == []
