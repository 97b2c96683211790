"""Discord across replicas: two gateways on one database, one holds the gateway connection and the other
stands by; `kill -9` the holder and the stand-by connects. With shard ids configured there is no election:
each replica identifies with its own shard.

Real `hermes-gateway run` processes against the fake Discord, on one SQLite file or one PostgreSQL schema; the
lease is two seconds.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from fakes.fake_discord import FakeDiscord, FakeMessage
from fakes.fake_llm import Reply
from gateway_kit import database_url, free_port, leader_and_stand_by, ready_roles, wait_until
from gateway_kit import replica as gateway_replica
from postgres import BACKENDS

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

LEASE_SECONDS = 2
START_TIMEOUT = 60  # the children import everything first; a loaded CI machine is slow
TAKEOVER_GUARD = max(30, 3 * LEASE_SECONDS)  # a hang guard, not a speed target
PROFILE = """\
name: discord-bot
model: openai:gpt-test
toolsets: [core]
platforms:
  discord:
    lease_seconds: {lease}
    ready_timeout: 5
{shards}"""


@asynccontextmanager
async def replica(name: str, fake: FakeDiscord, fake_llm, folder: Path, bot: Path, db_url: str,
                  port: int) -> AsyncIterator[asyncio.subprocess.Process]:
    async with gateway_replica(name, folder, bot, db_url, port, {"DISCORD_BOT_TOKEN": fake.token,
                                                      "DISCORD_API_BASE_URL": fake.url, "DISCORD_GATEWAY_URL": fake.gateway_url,
                                                      "DISCORD_ALLOWED_GUILDS": fake.guild_id},
                               fake_llm) as proc:
        yield proc


def profile(folder: Path, name: str, shards: str = "") -> Path:
    bot = folder / name
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE.format(lease=LEASE_SECONDS, shards=shards))
    return bot


@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_replica_holds_the_discord_connection_and_a_stand_by_connects_when_it_is_killed(
        backend, fake_llm, tmp_path):
    bot = profile(tmp_path, "discord-bot")
    ports = {"a": free_port(), "b": free_port()}
    async with database_url(backend, tmp_path) as db_url, FakeDiscord() as fake, \
            aiohttp.ClientSession(trust_env=False) as http:
        lease = f"discord:{fake.bot['id']}"
        async with replica("a", fake, fake_llm, tmp_path, bot, db_url, ports["a"]) as proc_a, \
                replica("b", fake, fake_llm, tmp_path, bot, db_url, ports["b"]) as proc_b:
            procs = {"a": proc_a, "b": proc_b}
            holder, standby = await leader_and_stand_by(http, ports, lease, lambda: fake.connected, START_TIMEOUT)
            assert len(fake.identifies) == 1  # the stand-by has checked the lease and never connected

            procs[holder].send_signal(signal.SIGKILL)
            await procs[holder].wait()

            async def standby_connected() -> bool:
                return len(fake.identifies) == 2 and fake.connected
            await wait_until(standby_connected, TAKEOVER_GUARD)
            assert await ready_roles(http, ports[standby]) == {lease: "leader"}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_mentions_sent_while_no_replica_held_the_connection_are_answered_by_the_one_taking_it_over(
        backend, fake_llm, tmp_path):
    fake_llm.responder = lambda request: Reply(text="re: " + request.last_user_text)
    bot = profile(tmp_path, "discord-bot")
    ports = {"a": free_port(), "b": free_port()}
    async with database_url(backend, tmp_path) as db_url, FakeDiscord() as fake, \
            aiohttp.ClientSession(trust_env=False) as http:

        def answered(question: FakeMessage) -> list[str]:
            thread = fake.thread_of(question)
            return [m.content for m in fake.bot_messages(thread["id"])] if thread else []

        async with replica("a", fake, fake_llm, tmp_path, bot, db_url, ports["a"]) as proc_a, \
                replica("b", fake, fake_llm, tmp_path, bot, db_url, ports["b"]) as proc_b:
            procs = {"a": proc_a, "b": proc_b}
            holder, _ = await leader_and_stand_by(http, ports, f"discord:{fake.bot['id']}", lambda: fake.connected,
                                                  START_TIMEOUT)
            first = await fake.user_says(fake.channel_id, "alice", "first question", mentions_bot=True)
            await fake.wait_for(lambda: answered(first) == ["re: [alice] first question"], START_TIMEOUT)

            procs[holder].send_signal(signal.SIGKILL)
            await procs[holder].wait()
            meanwhile = [await fake.user_says(fake.channel_id, name, f"question from {name}", mentions_bot=True)
                         for name in ("bob", "carol", "dave")]  # before the stand-by connects: sent to no one
            for question, name in zip(meanwhile, ("bob", "carol", "dave"), strict=True):
                await fake.wait_for(lambda q=question, n=name: answered(q) == [f"re: [{n}] question from {n}"],
                                    TAKEOVER_GUARD, f"the answer to {name}")
            assert len(fake.identifies) == 2 and fake.resumes == []  # a new session, which Discord sends nothing


async def test_replicas_given_shard_ids_each_identify_with_their_own_shard_without_an_election(fake_llm, tmp_path):
    ports = [free_port(), free_port()]
    bots = [profile(tmp_path, f"shard-{n}", f"    shard_count: 2\n    shard_ids: [{n}]\n") for n in range(2)]
    async with database_url("sqlite", tmp_path) as db_url, FakeDiscord() as fake, \
            aiohttp.ClientSession(trust_env=False) as http:
        async with replica("a", fake, fake_llm, tmp_path, bots[0], db_url, ports[0]), \
                replica("b", fake, fake_llm, tmp_path, bots[1], db_url, ports[1]):
            async def both_identified() -> bool:
                return len(fake.identifies) >= 2
            await wait_until(both_identified, START_TIMEOUT)
            assert sorted(tuple(identify["shard"]) for identify in fake.identifies) == [(0, 2), (1, 2)]

            async def both_ready() -> bool:
                return None not in [await ready_roles(http, port) for port in ports]
            await wait_until(both_ready, START_TIMEOUT)
            assert [await ready_roles(http, port) for port in ports] == [{}, {}]  # nothing elected
