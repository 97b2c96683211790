"""Takeover benchmark: how soon after the elected Telegram poller is killed (`kill -9`) a stand-by polls.

Two `hermes-gateway run` replicas on one database poll one bot on the fake Telegram, each through its own
base URL so the fake knows who polled. Each round waits until one leads and the other stands by, kills
the leader, and times from the kill to the stand-by's first `getUpdates` reaching the fake; a fresh
replica then takes the killed one's place as the next stand-by. The target: within the lease period
(`platforms.telegram.poller_lease_seconds`); by design at most eleven twelfths of it.

    python tests/bench/takeover_bench.py [--rounds 5] [--lease 4] [--backend sqlite|postgres]

PostgreSQL needs HERMES_TEST_POSTGRES_URL (`eval "$(bash .ci/postgres.sh)"`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.fake_llm import FakeLLM  # noqa: E402
from fakes.fake_telegram import FakeTelegram  # noqa: E402
from gateway_kit import database_url, free_port, leader_and_stand_by, replica, wait_until  # noqa: E402

START_TIMEOUT = 90


def profile(lease: float) -> str:
    return f"""\
name: takeover-bot
model: openai:gpt-test
toolsets: [core]
platforms:
  telegram:
    mode: polling
    poll_timeout: 1
    poller_lease_seconds: {lease}
"""


async def run(rounds: int, lease: float, backend: str) -> list[float]:
    took: list[float] = []
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        bot = folder / "takeover-bot"
        bot.mkdir()
        (bot / "profile.yaml").write_text(profile(lease))
        async with AsyncExitStack() as stack:
            db_url = await stack.enter_async_context(database_url(backend, folder))
            fake_llm = await stack.enter_async_context(FakeLLM())
            telegram = await stack.enter_async_context(FakeTelegram())
            http = await stack.enter_async_context(aiohttp.ClientSession(trust_env=False))
            lease_name = f"telegram-poller:{telegram.token.split(':')[0]}"
            live: dict[str, tuple[asyncio.subprocess.Process, int]] = {}

            async def start(name: str) -> None:
                port = free_port()
                env = {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url_for(name)}
                proc = await stack.enter_async_context(replica(name, folder, bot, db_url, port, env, fake_llm))
                live[name] = (proc, port)

            await start("r0")
            await start("r1")
            for n in range(rounds):
                ports = {name: port for name, (_proc, port) in live.items()}
                leader, standby = await leader_and_stand_by(http, ports, lease_name, lambda: bool(telegram.pollers),
                                                            START_TIMEOUT)
                proc = live.pop(leader)[0]
                killed = time.monotonic()
                proc.send_signal(signal.SIGKILL)

                def first_poll(via: str, after: float) -> float | None:
                    times = [c.time for c in telegram.requests
                             if c.via == via and c.method == "getUpdates" and c.time > after]
                    return min(times, default=None)

                async def polled(via: str = standby, after: float = killed) -> bool:
                    return first_poll(via, after) is not None

                await wait_until(polled, START_TIMEOUT)
                first = first_poll(standby, killed)
                assert first is not None
                took.append(first - killed)
                print(f"round {n + 1}: {leader} killed, {standby} polled after {first - killed:.2f} s", flush=True)
                await proc.wait()
                await start(f"r{n + 2}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=float, default=4.0, help="poller_lease_seconds")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    took = asyncio.run(run(args.rounds, args.lease, args.backend))
    print(f"takeover after kill -9 ({args.backend}, lease {args.lease:g} s, {len(took)} rounds): "
          f"min {min(took):.2f} s, max {max(took):.2f} s; target: within {args.lease:g} s; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
