"""State benchmark: memory stays bounded however many people write, and one person's CPU-heavy tool does not
stall anyone else's chat.

(a) Sessions: 10,000 people write one message each to the real gateway (SQLite, real SDK, real features,
    default settings: at most 1,000 sessions held in memory), ten at a time, each ten answered and the
    gateway idle before the next. Reported, idle, after 5,000 and after 10,000 sessions: resident memory
    (RSS) and the live Python heap (tracemalloc, tracing from session 2,000 on, so both figures see a full
    session table made after tracing began). Targets: RSS grows by at most 10 MB between the two; the
    heap stays flat (grows by less than 1 MB).
(b) Stall probe: one person's tool burns CPU for 5 s (a pure-Python loop registered by this benchmark, in
    the gateway's tool threads); meanwhile another chat is answered again and again. Target: its median
    reply latency stays under 100 ms above its idle median (the fake LLM answers at once; its own serving
    time is part of both figures).

    python tests/bench/state_bench.py [--sessions 10000] [--burn 5]

Exits with status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (fakes, engine_harness)

from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM, Reply  # noqa: E402

from hermes_engine.tools.registry import tool  # noqa: E402

PARALLEL = 10
RSS_TARGET_MB = 10.0
HEAP_TARGET_MB = 1.0
STALL_TARGET_MS = 100.0

burning = threading.Event()


@tool(toolset="bench")
def burn(seconds: float) -> str:
    """Burn CPU for a while (a stand-in for any CPU-heavy sync tool)."""
    burning.set()
    end = time.perf_counter() + seconds
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    burning.clear()
    return f"{spins} spins"


def rss_mb() -> float:
    """Resident memory now (Linux /proc), in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def heap_mb() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def profile():
    return make_profile(name="bench", toolsets=["core", "memory", "skills", "search", "bench"])


async def reply_to(engine: Engine, chat: str, seen: int) -> int:
    """Wait for the next reply in `chat`; returns how many deliveries were looked at."""
    while True:
        await engine.outlet.wait_for(seen + 1, 60)
        seen += 1
        if engine.outlet.delivered[seen - 1].target.chat_id == chat:
            return seen


async def sessions(fake: FakeLLM, home: Path, count: int) -> dict:
    engine = await Engine(home, profile()).start()
    assert engine.gateway is not None
    fake.default_reply = Reply(text="Nice to meet you. What can I do for you today?")
    figures: dict = {"live_max": 0}
    try:
        for start in range(0, count, PARALLEL):
            if start == count // 5 // PARALLEL * PARALLEL:
                tracemalloc.start()
            chats = [f"person{i}" for i in range(start, min(count, start + PARALLEL))]
            for chat in chats:
                await engine.gateway.handle(engine.message(f"hello, I am {chat}", chat=chat, user=chat))
            await engine.outlet.wait_for(len(chats), 60)
            await engine.idle(60)
            engine.outlet.delivered.clear()
            fake.requests.clear()
            figures["live_max"] = max(figures["live_max"], len(engine.gateway.sessions))
            done = start + len(chats)
            if done in (count // 2, count):
                figures[done] = {"rss": rss_mb(), "heap": heap_mb(), "live": len(engine.gateway.sessions)}
                print(f"  after {done:,} sessions: RSS {figures[done]['rss']:.1f} MB, live heap "
                      f"{figures[done]['heap']:.2f} MB, {figures[done]['live']:,} sessions in memory", flush=True)
    finally:
        tracemalloc.stop()
        await engine.stop()
    return figures


async def latencies(engine: Engine, prefix: str, turns: int, *, while_burning: bool = False) -> list[float]:
    times = []
    for i in range(turns):
        if while_burning and not burning.is_set():
            break
        chat = f"{prefix}{i % 5}"
        seen = len(engine.outlet.delivered)
        started = time.perf_counter()
        await engine.gateway.handle(engine.message(f"quick question {i}", chat=chat, user=chat))
        await reply_to(engine, chat, seen)
        if while_burning and not burning.is_set():
            break  # the burn ended during this reply: not a busy figure
        times.append(time.perf_counter() - started)
    return times


async def stall(fake: FakeLLM, home: Path, seconds: float) -> dict:
    engine = await Engine(home, profile()).start()
    assert engine.gateway is not None
    engine.gateway.tools.register(burn)

    def respond(request):
        asked_to_burn = any(m["role"] == "user" and "burn" in str(m["content"]) for m in request.messages)
        if asked_to_burn and not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[("burn", {"seconds": seconds})])
        return Reply(text="Here is a short answer.")

    fake.responder = respond
    try:
        await latencies(engine, "warm", 20)
        idle = await latencies(engine, "idle", 40)
        seen = len(engine.outlet.delivered)
        await engine.gateway.handle(engine.message("burn some CPU", chat="burner", user="burner"))
        assert await asyncio.to_thread(burning.wait, 60), "the burning tool did not start"
        busy = await latencies(engine, "busy", 10_000, while_burning=True)
        await reply_to(engine, "burner", seen)
    finally:
        await engine.stop()
    return {"idle": idle, "busy": busy}


def p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


async def main(count: int, seconds: float) -> bool:
    ok = True
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        print(f"(a) {count:,} sessions, one message each, {PARALLEL} at a time (SQLite, fake LLM):", flush=True)
        started = time.perf_counter()
        s = await sessions(fake, Path(tempfile.mkdtemp(prefix="hermes-bench-")), count)
        half, full = s[count // 2], s[count]
        rss_growth, heap_growth = full["rss"] - half["rss"], full["heap"] - half["heap"]
        ok &= rss_growth <= RSS_TARGET_MB and heap_growth < HEAP_TARGET_MB
        print(f"  RSS {half['rss']:.1f} -> {full['rss']:.1f} MB: {rss_growth:+.1f} MB "
              f"(target <= {RSS_TARGET_MB:g} MB) -> {'OK' if rss_growth <= RSS_TARGET_MB else 'MISSED'}")
        print(f"  live heap {half['heap']:.2f} -> {full['heap']:.2f} MB: {heap_growth:+.2f} MB "
              f"(target flat, < {HEAP_TARGET_MB:g} MB) -> {'OK' if heap_growth < HEAP_TARGET_MB else 'MISSED'}")
        print(f"  at most {s['live_max']:,} sessions in memory; wall time {time.perf_counter() - started:.0f} s")

        fake.default_reply = Reply(text="ok")
        print(f"(b) stall probe: one tool burns CPU for {seconds:g} s in a worker thread; another chat meanwhile:",
              flush=True)
        r = await stall(fake, Path(tempfile.mkdtemp(prefix="hermes-bench-")), seconds)
        idle, busy = r["idle"], r["busy"]
        if not busy:
            print("  no reply was measured while the tool burned -> MISSED")
            return False
        added = (statistics.median(busy) - statistics.median(idle)) * 1000
        ok &= added < STALL_TARGET_MS
        print(f"  idle:    median {statistics.median(idle) * 1000:6.1f} ms, p90 {p90(idle) * 1000:6.1f} ms, "
              f"max {max(idle) * 1000:6.1f} ms ({len(idle)} replies)")
        print(f"  burning: median {statistics.median(busy) * 1000:6.1f} ms, p90 {p90(busy) * 1000:6.1f} ms, "
              f"max {max(busy) * 1000:6.1f} ms ({len(busy)} replies)")
        print(f"  median added while burning: {added:+.1f} ms (target < {STALL_TARGET_MS:g} ms) -> "
              f"{'OK' if added < STALL_TARGET_MS else 'MISSED'}")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--burn", type=float, default=5.0)
    args = parser.parse_args()
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = "127.0.0.1,localhost"
    sys.exit(0 if asyncio.run(main(args.sessions, args.burn)) else 1)
