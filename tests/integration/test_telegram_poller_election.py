"""Two gateways on one database polling one Telegram bot: one is elected poller and the other stands by
(no 409 fight); `kill -9` the poller and the stand-by takes over polling and answers what is written
after the kill, once — on PostgreSQL, and on SQLite with both processes on one file.

The gateways run as an operator runs them (`hermes-gateway run`) against the fake Telegram, each calling
it through its own base URL so the fake records which process polled; the poller lease is two seconds.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import all_answered, database_url, free_port, leader_and_stand_by, ready_roles, wait_until
from gateway_kit import replica as gateway_replica
from postgres import BACKENDS

ALICE = 4242
LEASE_SECONDS = 2
START_TIMEOUT = 60  # the children import everything first; a loaded CI machine is slow
TAKEOVER_GUARD = max(30, 3 * LEASE_SECONDS)  # a hang guard, not a speed target
PROFILE = f"""\
name: poller-bot
model: openai:gpt-test
toolsets: [core]
access:
  allowed_users: ["{ALICE}"]
platforms:
  telegram:
    mode: polling
    poll_timeout: 5
    poller_lease_seconds: {LEASE_SECONDS}
"""

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", BACKENDS)]


@asynccontextmanager
async def replica(name: str, telegram: FakeTelegram, fake_llm, folder: Path, bot: Path, db_url: str,
                  port: int) -> AsyncIterator[asyncio.subprocess.Process]:
    async with gateway_replica(name, folder, bot, db_url, port, {"TELEGRAM_BOT_TOKEN": telegram.token,
                                                      "TELEGRAM_API_BASE_URL": telegram.base_url_for(name)},
                               fake_llm) as proc:
        yield proc


async def test_one_replica_polls_and_a_stand_by_takes_over_when_it_is_killed(backend, fake_llm, tmp_path):
    bot = tmp_path / "poller-bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE)
    fake_llm.responder = lambda request: Reply(text=f"Answer {len(fake_llm.requests)}.")
    ports = {"a": free_port(), "b": free_port()}
    async with database_url(backend, tmp_path) as db_url, FakeTelegram() as telegram, \
            aiohttp.ClientSession(trust_env=False) as http:
        lease = f"telegram-poller:{telegram.token.split(':')[0]}"
        async with replica("a", telegram, fake_llm, tmp_path, bot, db_url, ports["a"]) as proc_a, \
                replica("b", telegram, fake_llm, tmp_path, bot, db_url, ports["b"]) as proc_b:
            procs = {"a": proc_a, "b": proc_b}
            poller, standby = await leader_and_stand_by(http, ports, lease, lambda: bool(telegram.pollers),
                                                        START_TIMEOUT)
            telegram.user_says(ALICE, ALICE, "hello before")
            await telegram.wait_for_messages(ALICE, 1, timeout=START_TIMEOUT)
            await wait_until(lambda: all_answered(db_url), START_TIMEOUT)  # killed later, it is not answered again
            # The stand-by has checked the lease many times over by now and never polled.
            assert set(telegram.pollers) == {poller}
            assert telegram.conflicts == []

            procs[poller].send_signal(signal.SIGKILL)
            await procs[poller].wait()
            telegram.user_says(ALICE, ALICE, "hello after")

            async def standby_polls() -> bool:
                return standby in telegram.pollers
            await wait_until(standby_polls, TAKEOVER_GUARD)
            await telegram.wait_for_messages(ALICE, 2, timeout=START_TIMEOUT)
            await telegram.settle(quiet=LEASE_SECONDS, timeout=30)
            assert await ready_roles(http, ports[standby]) == {lease: "leader"}

        chat = telegram.chat(ALICE)
        assert len(chat.bot_texts) == 2  # each DM answered once: before the kill, and after it by the stand-by
        assert telegram.conflicts == []
