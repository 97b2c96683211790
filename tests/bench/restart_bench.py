"""Restart benchmark: what a crash costs when the gateway is started again at once on the same host.

Each round runs a real `hermes-gateway run` (Telegram by long polling against the fake Telegram, the model
behind the fake LLM), `kill -9`s it in the middle of a streamed reply while a kanban card's worker waits on
the model, sends a DM while it is down, and starts it again. It times, from the moment the new process is up
(`/ready`, asked every tenth of a second, answers 200 with the poller elected; an answer that came before
that shows as a negative time):
- the DM that waited → its answer on the fake Telegram (target: under 2 s);
- the card's second attempt reaching the model (its worker's death → running again).
Start-up itself (spawn → up) is printed beside them. Every lease is ten minutes long, so waiting one out
would show.

    python tests/bench/restart_bench.py [--rounds 3] [--backend sqlite|postgres]

PostgreSQL needs HERMES_TEST_POSTGRES_URL (`eval "$(bash .ci/postgres.sh)"`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine_harness import fake_llm_environment  # noqa: E402
from fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from fakes.fake_telegram import FakeTelegram  # noqa: E402
from gateway_kit import database_url, free_port, gateway_process, ready_roles, wait_until  # noqa: E402

from hermes_engine.kanban.worker import WORKER_SYSTEM  # noqa: E402
from hermes_engine.ports.inbound import ReplyTarget  # noqa: E402
from hermes_engine.ports.storage import CardSpec  # noqa: E402
from storage.store import SqlStore  # noqa: E402

ALICE, BOB = 4242, 4343
TIMEOUT = 90
LEASE = 600
PROFILE = f"""\
name: restart-bot
model: openai:gpt-test
toolsets: [core]
access:
  allowed_users: ["{ALICE}"]
kanban:
  lease_seconds: {LEASE}
platforms:
  telegram:
    mode: polling
    poller_lease_seconds: {LEASE}
"""


def is_worker(request) -> bool:
    return request.system.startswith(WORKER_SYSTEM.splitlines()[0])


async def one_round(n: int, backend: str) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        bot = folder / "restart-bot"
        bot.mkdir()
        (bot / "profile.yaml").write_text(PROFILE)
        async with database_url(backend, folder) as db_url, FakeLLM() as fake_llm, FakeTelegram() as telegram, \
                aiohttp.ClientSession(trust_env=False) as http:
            port = free_port()
            env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(folder / "home"), "HERMES_DATABASE_URL": db_url,
                   "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port),
                   "HERMES_SESSION_LEASE_SECONDS": str(LEASE), "TELEGRAM_BOT_TOKEN": telegram.token,
                   "TELEGRAM_API_BASE_URL": telegram.base_url}
            store = SqlStore(db_url)
            await store.init()
            try:
                target = ReplyTarget("telegram", telegram.token.split(":")[0], str(BOB))  # its news: another chat
                [card] = await store.create_cards([CardSpec("count the stars", status="ready", profile="restart-bot",
                                                            origin={"reply": target.to_dict()})], actor="bench")
                fake_llm.responder = lambda r: Reply(chunks=["counting "] * 120, delay=0.5)

                async def up() -> bool:
                    roles = await ready_roles(http, port)
                    return roles is not None and "leader" in roles.values()

                async with gateway_process(bot, env) as first:
                    await wait_until(up, TIMEOUT)
                    telegram.user_says(ALICE, ALICE, "tell me something long")
                    await telegram.wait_for(lambda: [m for m in telegram.chat(ALICE).bot_messages if m.edits],
                                            timeout=TIMEOUT)
                    await wait_until(lambda: _true(any(is_worker(r) for r in fake_llm.requests)), TIMEOUT)
                    first.send_signal(signal.SIGKILL)
                    await first.wait()
                telegram.user_says(ALICE, ALICE, "are you back?")  # waits while the gateway is down
                workers_before = sum(1 for r in fake_llm.requests if is_worker(r))
                fake_llm.responder = lambda r: Reply(text="Done." if is_worker(r) else f"You said: {r.last_user_text}")
                spawned = time.monotonic()
                async with gateway_process(bot, env):
                    await wait_until(up, TIMEOUT)
                    ready = time.monotonic()
                    answered = await telegram.wait_for_text(ALICE, "You said: are you back?", timeout=TIMEOUT)
                    dm = min(t for t, text in answered.history if text == "You said: are you back?") - ready
                    await wait_until(lambda: _true(sum(1 for r in fake_llm.requests if is_worker(r)) > workers_before),
                                     TIMEOUT)
                    second = min(r.received for r in fake_llm.requests if is_worker(r) and r.received > spawned)
                    card_again = second - ready
            finally:
                await store.close()
    startup = ready - spawned
    print(f"round {n + 1}: up {startup:.2f} s after start; then the waiting DM answered after {dm:.2f} s, "
          f"the card running again after {card_again:.2f} s", flush=True)
    return startup, dm, card_again


async def _true(value: bool) -> bool:
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    rows = [asyncio.run(one_round(n, args.backend)) for n in range(args.rounds)]
    startup, dm, card = (statistics.median(column) for column in zip(*rows, strict=True))
    worst = max(row[1] for row in rows)
    print(f"restart after kill -9 ({args.backend}, leases {LEASE} s, {len(rows)} rounds, medians): up {startup:.2f} s "
          f"after start; waiting DM answered {dm:.2f} s after up (max {worst:.2f} s; target < 2 s); card running "
          f"again {card:.2f} s after up; load average {os.getloadavg()[0]:.2f}")
    sys.exit(0 if worst < 2.0 else 1)


if __name__ == "__main__":
    main()
