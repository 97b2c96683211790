"""Replica benchmark: one and two gateway replicas on one PostgreSQL, 200 conversations at once.

Real `hermes-gateway run` processes serve one bot in Telegram webhook mode; this script is the
round-robin proxy (it posts each update to the next replica's `/telegram/<bot>`) and the model is the fake
LLM answering after 1 s. Every conversation sends one DM at the same moment. Measured per run:

- replies per second: conversations answered / time from the first update posted to the last reply shown;
- gateway-added latency, p50 and p99: from posting a DM's update to its turn's model request reaching
  the fake LLM (the time the gateway itself adds before the model works);
- resident memory (VmRSS) of each replica after the run.

Telegram's own pacing (30 calls a second per bot) is lifted in the benchmark's profile, so the figures are
the gateway's, not Telegram's limit. The machine's load average is printed beside the figures: on a shared
machine they move with it.

    eval "$(bash .ci/postgres.sh)"   # sets HERMES_TEST_POSTGRES_URL
    python tests/bench/replica_bench.py [--conversations 200] [--replicas 1 2] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
from gateway_kit import database_url, free_port, gateway_process, wait_until  # noqa: E402

SECRET = "bench-secret"
FIRST_USER = 500_000
START_TIMEOUT = 120
PROFILE = """\
name: replica-bench
model: openai:gpt-test
toolsets: [core]
streaming: false
platforms:
  telegram:
    mode: webhook
    register_commands: false
    global_rate_per_second: 100000
    edit_interval_seconds: 0
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(replicas: int, conversations: int, latency: float) -> dict[str, float | list[float]]:
    arrived: dict[str, float] = {}

    async def respond(request):  # the model: notes when each conversation's request came, answers later
        arrived.setdefault(request.last_user_text, time.perf_counter())
        await asyncio.sleep(latency)
        return Reply(text=f"Answer to {request.last_user_text}.")

    users = [FIRST_USER + i for i in range(conversations + replicas)]
    with tempfile.TemporaryDirectory() as folder:
        bot = Path(folder) / "replica-bench"
        bot.mkdir()
        (bot / "profile.yaml").write_text(PROFILE)
        ports = [free_port() for _ in range(replicas)]
        async with FakeLLM() as llm, FakeTelegram() as telegram, database_url("postgres", Path(folder)) as db_url, \
                aiohttp.ClientSession(trust_env=False) as http:
            llm.responder = respond
            env = {**fake_llm_environment(llm), "HERMES_DATABASE_URL": db_url, "HERMES_FALLBACK_MODELS": "",
                   "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
                   "TELEGRAM_WEBHOOK_SECRET": SECRET, "TELEGRAM_ALLOWED_USERS": ",".join(map(str, users)),
                   "HERMES_LOG_LEVEL": "WARNING"}
            async with _replicas(env, bot, ports, Path(folder)) as pids:

                async def post(n: int, text: str, user: int) -> float:
                    update = telegram.user_says(user, user, text)
                    port = ports[n % replicas]
                    started = time.perf_counter()
                    async with http.post(f"http://127.0.0.1:{port}/telegram/replica-bench", json=update,
                                         headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}) as response:
                        if response.status != 200:
                            raise RuntimeError(f"replica on {port} answered {response.status}")
                    return started

                async def all_ready() -> bool:
                    try:
                        for port in ports:
                            async with http.get(f"http://127.0.0.1:{port}/ready") as response:
                                if response.status != 200:
                                    return False
                    except aiohttp.ClientError:
                        return False
                    return True

                await wait_until(all_ready, START_TIMEOUT)
                warm = users[conversations:]
                for n, user in enumerate(warm):  # each replica's first turn loads what it loads once
                    await post(n, f"warm-up {n}", user)
                    await telegram.wait_for_messages(user, 1, timeout=START_TIMEOUT)
                arrived.clear()

                texts = [f"dm-{i}" for i in range(conversations)]
                posted = await asyncio.gather(*(post(i, texts[i], users[i]) for i in range(conversations)))
                await telegram.wait_for(lambda: all(telegram.chat(users[i]).bot_messages
                                                    for i in range(conversations)), timeout=600)
                done = time.perf_counter()
                memory = [rss_mb(pid) for pid in pids]
    added = [(arrived[texts[i]] - posted[i]) * 1000 for i in range(conversations) if texts[i] in arrived]
    return {"replies_per_second": conversations / (done - min(posted)), "p50_ms": percentile(added, 50),
            "p99_ms": percentile(added, 99), "rss_mb": memory, "measured": len(added)}


class _replicas:
    """Start the replicas, each with its own HERMES_HOME and HTTP port; yields their pids."""

    def __init__(self, env: dict[str, str], bot: Path, ports: list[int], folder: Path) -> None:
        self.env, self.bot, self.ports, self.folder = env, bot, ports, folder
        self._contexts: list = []

    async def __aenter__(self) -> list[int]:
        pids = []
        for n, port in enumerate(self.ports):
            home = self.folder / f"home-{n}"
            home.mkdir()
            context = gateway_process(self.bot, {**self.env, "HERMES_HOME": str(home), "HERMES_HTTP_PORT": str(port)})
            proc = await context.__aenter__()
            self._contexts.append(context)
            pids.append(proc.pid)
        return pids

    async def __aexit__(self, *exc: object) -> None:
        for context in reversed(self._contexts):
            await context.__aexit__(None, None, None)


async def main(conversations: int, counts: list[int], latency: float) -> int:
    if not os.environ.get("HERMES_TEST_POSTGRES_URL"):
        print("HERMES_TEST_POSTGRES_URL is not set: eval \"$(bash .ci/postgres.sh)\" first", file=sys.stderr)
        return 2
    for replicas in counts:
        load_before = os.getloadavg()[0]
        result = await run(replicas, conversations, latency)
        rss = ", ".join(f"{m:.0f}" for m in result["rss_mb"])  # type: ignore[union-attr]
        print(f"{replicas} replica(s), {conversations} conversations, model {latency:.1f} s: "
              f"{result['replies_per_second']:.1f} replies/s; gateway-added latency p50 {result['p50_ms']:.0f} ms, "
              f"p99 {result['p99_ms']:.0f} ms ({result['measured']} measured); RSS per replica {rss} MB; "
              f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.conversations, args.replicas, args.latency)))
