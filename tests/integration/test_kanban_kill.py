"""`kill -9` a real gateway while its worker is in the middle of a card: the gateway restarted on the same
host finds the claiming process gone and reclaims the card on its first tick (long before the card's
ten-minute lease would run out), runs it again (the retry sees why the first attempt ended) and finishes it
once — on SQLite and on PostgreSQL.

The gateways run as an operator runs them (`hermes-gateway run`, Telegram by long polling against the fake
Telegram, the model behind the fake LLM).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import database_url, gateway_process, wait_until
from postgres import BACKENDS

from hermes_engine.kanban.worker import WORKER_SYSTEM
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.storage import CardSpec
from storage.store import SqlStore

ALICE = 4242
START_TIMEOUT = 60
PROFILE = """\
name: kanban-bot
model: openai:gpt-test
toolsets: [core]
access:
  allowed_users: ["4242"]
kanban:
  lease_seconds: 600
  tick_seconds: 0.5
platforms:
  telegram:
    mode: polling
"""

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", BACKENDS)]


def is_worker(request) -> bool:
    return request.system.startswith(WORKER_SYSTEM.splitlines()[0])


@asynccontextmanager
async def gateway(telegram: FakeTelegram, fake_llm, home: Path, bot: Path,
                  db_url: str) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_DATABASE_URL": db_url,
           "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": "0", "TELEGRAM_BOT_TOKEN": telegram.token,
           "TELEGRAM_API_BASE_URL": telegram.base_url}
    async with gateway_process(bot, env, stderr=asyncio.subprocess.PIPE) as proc:
        yield proc


async def test_a_card_whose_gateway_was_killed_is_reclaimed_by_the_restart_at_once_and_finished_once(
        backend, fake_llm, tmp_path):
    home, bot = tmp_path / "home", tmp_path / "kanban-bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE)
    async with database_url(backend, home) as db_url:
        store = SqlStore(db_url)
        await store.init()
        try:
            async with FakeTelegram() as telegram:
                target = ReplyTarget("telegram", telegram.token.split(":")[0], str(ALICE))
                [card] = await store.create_cards([CardSpec("count the stars", status="ready", profile="kanban-bot",
                                                            origin={"reply": target.to_dict()})], actor="test")
                # First life: the worker streams slowly, one word a second, and is killed mid-card.
                fake_llm.responder = lambda r: Reply(chunks=["counting "] * 60, delay=1.0) if is_worker(r) else None
                async with gateway(telegram, fake_llm, home, bot, db_url) as first_life:
                    async def worker_started() -> bool:
                        return any(is_worker(r) for r in fake_llm.requests)
                    await wait_until(worker_started, START_TIMEOUT)
                    running = await store.get_card(card.id)
                    assert running.status == "running" and running.attempts == 1
                    first_life.send_signal(signal.SIGKILL)
                    await first_life.wait()

                def finish(request):
                    if not is_worker(request):
                        return None
                    if not any(m["role"] == "tool" for m in request.messages):
                        return Reply(tool_calls=[("kanban_complete", {"card_id": card.id, "result": "seven"})])
                    return Reply(text="Done.")

                fake_llm.responder = finish
                async with gateway(telegram, fake_llm, home, bot, db_url):
                    async def finished() -> bool:
                        return (await store.get_card(card.id)).status == "done"
                    await wait_until(finished, START_TIMEOUT)
                    await telegram.wait_for_text(ALICE, "↩️ count the stars was taken back after its worker "
                                                 "stopped; it will run again", timeout=START_TIMEOUT)
                    await telegram.wait_for(lambda: any(f"Card #{card.id} done" in m.text
                                                        for m in telegram.chat(ALICE).bot_messages), START_TIMEOUT)
                    await telegram.settle(quiet=1.0, timeout=30)
                    told = [m.text for m in telegram.chat(ALICE).bot_messages]
            done = await store.get_card(card.id)
            events = await store.card_events(card.id)
        finally:
            await store.close()
    assert done.result == "seven" and done.attempts == 2
    kinds = [e.kind for e in events]
    assert kinds.count("claimed") == 2 and kinds.count("reclaimed") == 1 and kinds.count("completed") == 1
    retry_prompt = [r.last_user_text for r in fake_llm.requests if is_worker(r)][-2]
    assert "no longer runs" in retry_prompt  # the retry saw why the first attempt ended
    assert [t for t in told if f"Card #{card.id} done" in t] == [told[-1]]  # told once, after it was taken back
    assert told.count("▶️ Started: count the stars") == 2  # once per life
