"""Two gateways on one PostgreSQL, Telegram in webhook mode behind a round-robin proxy (the test posts each
update to one replica, and to the other when that one does not take it); the replica running a goal is
killed with `kill -9` in the middle of its turns. Every DM is answered exactly once and in each person's order, no
partial message is left (the one the dead replica streamed is edited into the answer), and the goal the
dead replica was working on goes on on the other one without a repeated turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine_harness import fake_llm_environment, is_judge, verdict
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from postgres import PG_URL, fresh_schema
from sqlalchemy.pool import NullPool

from hermes_engine.loops.goals import CONTINUE_PREFIX
from storage.engine import make_engine
from storage.store import SqlStore

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(400),  # two processes start on a loaded machine
              pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")]

ROOT = Path(__file__).resolve().parents[2]
BOT = "replicated-bot"
SECRET = "replica-webhook-secret"
PEOPLE = list(range(1001, 1021))  # 20 people, two DMs each
GOAL_PERSON = 5000
HANG_GUARD = 180  # seconds: generous, for a loaded machine; nothing is timed
PROFILE = f"""\
name: {BOT}
model: openai:gpt-test
toolsets: [core]
streaming: true
access:
  allowed_users: [{", ".join(f'"{p}"' for p in [*PEOPLE, GOAL_PERSON])}]
  pairing: false
platforms:
  telegram:
    mode: webhook
    edit_interval_seconds: 0.2
"""
DM_TOKEN = re.compile(r"p\d+ m\d")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def goal_step(request) -> int:
    """Which turn of the goal this request is: 1 plus the continuations it carries."""
    return 1 + sum(1 for m in request.messages if m.get("role") == "user" and CONTINUE_PREFIX in str(m.get("content")))


class Model:
    """DMs: "Answer to pN mK done." streamed in three pieces over about a second. The goal: "goal step N";
    the judge says done once step 3 is answered. Until the kill, each second DM and the goal's second turn
    stream two pieces and then hang: those on the replica to be killed are cut short by the kill (the
    others' streams break then, and are asked again)."""

    def __init__(self) -> None:
        self.killed = asyncio.Event()

    def __call__(self, request) -> Reply:
        if is_judge(request):
            done = "goal step 3" in request.last_user_text
            return Reply(text=verdict("done" if done else "continue", "checked"))
        token = DM_TOKEN.search(request.last_user_text)
        chunks = ["Answer to ", token.group(0), " done."] if token else ["goal ", "step ", str(goal_step(request))]
        held = token.group(0).endswith("m2") if token else goal_step(request) == 2
        if held and not self.killed.is_set():
            return Reply(chunks=chunks, delay=0.35, disconnect_after_chunks=2, before_cut=self.killed.wait)
        return Reply(chunks=chunks, delay=0.35)


async def frozen_mid_turn(telegram: FakeTelegram, db_url: str) -> bool:
    """Every second DM and the goal's second turn show in part, and the delivery ledger holds each part's
    message: every send has returned and been written down (the one unguarded moment, between a send and its
    ledger write, is past for all of them). On a loaded machine a part may be sent whole, never edited, so the
    ledger is read rather than the chat's edits."""
    held = [(p, f"Answer to p{p} m2") for p in PEOPLE] + [(GOAL_PERSON, "goal step")]
    shown: dict[int, int] = {}
    for chat, text in held:
        found = [m.message_id for m in telegram.chat(chat).bot_messages if m.text == text]
        if not found:
            return False
        shown[chat] = found[0]
    recorded = await unfinished_deliveries(db_url)
    return all(any(f":{chat}:" in key and message_id in ids for key, ids in recorded)
               for chat, message_id in shown.items())


async def rows(db_url: str, sql: str) -> list[Any]:
    """Rows of a query, read as another process would."""
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return list((await conn.exec_driver_sql(sql)).all())
    finally:
        await engine.dispose()


async def unfinished_deliveries(db_url: str) -> list[tuple[str, set[int]]]:
    """The ledger's replies not yet final: their keys and the message ids they showed."""
    found = await rows(db_url, "SELECT key, message_ids FROM deliveries WHERE NOT final")
    return [(key, {int(i) for i in (json.loads(ids) if isinstance(ids, str) else ids)}) for key, ids in found]


async def until(condition: Callable[[], Awaitable[bool]], timeout: float, message: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(message)
        await asyncio.sleep(0.1)


async def goal_session_holder(db_url: str) -> str:
    """The replica holding the goal's session lease: the one running its turn."""
    leases = await rows(db_url, "SELECT name, holder FROM leases")
    return next(holder for name, holder in leases if name.startswith("session:") and name.endswith(f":dm:{GOAL_PERSON}"))


class Replica:
    def __init__(self, name: str, port: int, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.name, self.port, self.proc, self.log = name, port, proc, log

    @property
    def webhook(self) -> str:
        return f"http://127.0.0.1:{self.port}/telegram/{BOT}"


@asynccontextmanager
async def replica(name: str, telegram: FakeTelegram, fake_llm, tmp_path: Path, bot: Path,
                  db_url: str) -> AsyncIterator[Replica]:
    port, home, log = free_port(), tmp_path / f"home-{name}", tmp_path / f"{name}.log"
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_DATABASE_URL": db_url,
           "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port), "HERMES_REPLICA_ID": name,
           "HERMES_SESSION_LEASE_SECONDS": "3", "TELEGRAM_BOT_TOKEN": telegram.token,
           "TELEGRAM_API_BASE_URL": telegram.base_url, "TELEGRAM_WEBHOOK_SECRET": SECRET}
    env.pop("TELEGRAM_WEBHOOK_URL", None)  # the proxy (this test) posts; nothing registers a webhook
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", str(bot), cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=err)
    try:
        yield Replica(name, port, proc, log)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()


async def post(http: aiohttp.ClientSession, replicas: list[Replica], first: int, update: dict) -> None:
    """The round-robin proxy: `first` gets the update; one that is down or refuses it, the other one."""
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    deadline = asyncio.get_running_loop().time() + HANG_GUARD
    turn = first
    while asyncio.get_running_loop().time() < deadline:
        target = replicas[turn % len(replicas)]
        turn += 1
        if target.proc.returncode is None:
            try:
                async with http.post(target.webhook, json=update, headers=headers) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no replica took update {update['update_id']}")


def says(telegram: FakeTelegram, person: int, text: str) -> dict:
    telegram.user_says(person, person, text)
    return telegram.updates.pop()


def answered(telegram: FakeTelegram) -> bool:
    dms = all(telegram.chat(p).bot_texts[-2:] == [f"Answer to p{p} m1 done.", f"Answer to p{p} m2 done."]
              for p in PEOPLE)
    return dms and any(t.startswith("✅ Goal done") for t in telegram.chat(GOAL_PERSON).bot_texts)


async def test_a_replica_killed_mid_turn_leaves_every_dm_answered_once_in_order_and_its_goal_going_on(
        fake_llm, tmp_path):
    bot = tmp_path / BOT
    bot.mkdir()
    (bot / "profile.yaml").write_text(PROFILE)
    model = fake_llm.responder = Model()
    async with fresh_schema() as schema:
        db_url = f"{PG_URL}?options=-csearch_path%3D{schema}"
        store = SqlStore(db_url)
        await store.init()  # the schema exists before two processes race to migrate it
        try:
            async with FakeTelegram() as telegram, aiohttp.ClientSession(trust_env=False) as http, \
                    replica("a", telegram, fake_llm, tmp_path, bot, db_url) as a, \
                    replica("b", telegram, fake_llm, tmp_path, bot, db_url) as b:
                replicas = [a, b]
                # The goal is set through replica a; twenty people send two DMs each, a person's two DMs to
                # different replicas.
                await post(http, replicas, 0, says(telegram, GOAL_PERSON, "/goal count to three"))
                for k in (1, 2):
                    for p in PEOPLE:
                        await post(http, replicas, p + k, says(telegram, p, f"p{p} m{k}"))
                # Killed mid-turn: the second DMs and the goal's second turn are streaming.
                await until(lambda: frozen_mid_turn(telegram, db_url), HANG_GUARD,
                            "the second DMs and the goal's second turn never all streamed")
                victim = a if await goal_session_holder(db_url) == "a" else b
                survivor = b if victim is a else a
                victim.proc.send_signal(signal.SIGKILL)
                await victim.proc.wait()
                model.killed.set()
                try:
                    await telegram.wait_for(lambda: answered(telegram), timeout=HANG_GUARD)
                except TimeoutError:
                    chats = {p: telegram.chat(p).bot_texts for p in [*PEOPLE, GOAL_PERSON]}
                    raise AssertionError(f"not every DM was answered after the kill: {chats}") from None
                await telegram.settle(quiet=2.0, timeout=HANG_GUARD)
                takeover_log = survivor.log.read_text()
            goals = await store.list_goals(bot=BOT)
            pending = await store.pending_inbound()
        finally:
            await store.close()

    for p in PEOPLE:  # exactly once each, in order, and nothing else: no partial left, no second copy
        assert telegram.chat(p).bot_texts == [f"Answer to p{p} m1 done.", f"Answer to p{p} m2 done."], p
    goal_chat = telegram.chat(GOAL_PERSON).bot_texts
    steps = [t for t in goal_chat if not t.startswith(("🎯 Goal set", "✅ Goal done"))]
    assert steps == ["goal step 1", "goal step 2", "goal step 3"], goal_chat  # none repeated, lost or partial
    assert sum(t.startswith("✅ Goal done") for t in goal_chat) == 1
    [goal] = goals
    assert goal.status == "done" and goal.turns_used == 3
    assert pending == []
    # The goal's second turn, cut short by the kill, was run again on the other replica; no other turn twice.
    goal_turns = [goal_step(r) for r in fake_llm.requests if not is_judge(r) and not DM_TOKEN.search(r.last_user_text)]
    assert sorted(goal_turns) == [1, 2, 2, 3]
    assert "answering pending telegram event" in takeover_log
