"""The engine's time per plain turn with a dashboard open and refreshing, beside the same turns with none
(target: no change). One process, as in a deployment: the gateway's turns and the dashboard's pages share
its event loop and its SQLite store.

Rounds alternate: turns with nobody on the dashboard, then turns while a signed-in admin's browser reloads
Overview and People, one page every `--every` seconds (1 s: more than a person clicks; 0: as fast as they
come back, a stress far past any use); the median difference of the rounds' medians is reported, so the
machine's drift over the run cancels out.

    python tests/bench/dashboard_engine_bench.py [--rounds 10] [--turns 40] [--every 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402
from engine_bench import run_turns  # noqa: E402
from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM  # noqa: E402
from gateway_kit import free_port  # noqa: E402

from hermes_engine.memory import FileMemoryStore, MemoryBook  # noqa: E402
from hermes_gateway.dashboard.app import mount  # noqa: E402
from hermes_gateway.dashboard.config import Dashboard  # noqa: E402
from hermes_gateway.dashboard.links import sign_in_link  # noqa: E402
from hermes_gateway.dashboard.views import PlatformState, Sources  # noqa: E402


async def refreshing(client: TestClient, pages: list[str], every: float, counted: list[int]) -> None:
    """An admin's browser reloading the pages one after another, `every` seconds apart, until cancelled."""
    while True:
        for path in pages:
            response = await client.get(path)
            await response.read()
            assert response.status == 200, (path, response.status)
            counted[0] += 1
            await asyncio.sleep(every)


async def main(rounds: int, turns: int, every: float) -> None:
    home = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        profile = make_profile(name="bench", toolsets=["core", "memory", "skills", "search"],
                               review={"memory_every_turns": 0, "skill_every_iterations": 0})
        engine = await Engine(home, profile).start()
        port = free_port()
        dashboard = Dashboard(f"http://127.0.0.1:{port}", 600, 3600)
        http = web.Application()
        mount(http, Sources(engine.store, MemoryBook(FileMemoryStore.for_home(home)), ["bench"],
                            lambda: [PlatformState("bench", "console", True)]), dashboard)
        client = TestClient(TestServer(http, host="127.0.0.1", port=port), cookie_jar=aiohttp.CookieJar(unsafe=True))
        await client.start_server()
        try:
            token = (await sign_in_link(engine.store, dashboard, "operator")).split("token=", 1)[1]
            signed = await client.post("/admin/login", data={"token": token}, headers={"Origin": dashboard.origin})
            assert signed.status == 200, signed.status
            await run_turns(engine, fake, 40, False, "warm")
            quiet, watched, pages = [], [], [0]
            for n in range(rounds):
                quiet.append(statistics.median(await run_turns(engine, fake, turns, False, f"q{n}-")))
                refresher = asyncio.create_task(refreshing(client, ["/admin/", "/admin/people"], every, pages))
                try:
                    watched.append(statistics.median(await run_turns(engine, fake, turns, False, f"w{n}-")))
                finally:
                    refresher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await refresher
        finally:
            await client.close()
            await engine.stop()
    differences = sorted((w - q) * 1000 for q, w in zip(quiet, watched, strict=True))
    print(f"engine time per plain turn, median of {rounds} rounds of {turns} turns (fake LLM time subtracted):")
    print(f"  nobody on the dashboard    {statistics.median(quiet) * 1000:6.2f} ms")
    print(f"  dashboard refreshing       {statistics.median(watched) * 1000:6.2f} ms  ({pages[0]} pages served, "
          f"one every {every:g} s)")
    print(f"  difference, median of the rounds' {statistics.median(differences):+.2f} ms "
          f"(range {differences[0]:+.2f} to {differences[-1]:+.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--every", type=float, default=1.0)
    args = parser.parse_args()
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = "127.0.0.1,localhost"
    asyncio.run(main(args.rounds, args.turns, args.every))
