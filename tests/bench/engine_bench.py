"""Engine benchmark: time per turn spent in the engine itself, prompt size and prefix reuse.

Drives scripted turns through the real gateway (SQLite, real SDK, real features) against the fake LLM with
zero latency and subtracts the fake's own serving time, so what remains is the engine: routing, storage,
prompt building, the SDK's request/stream handling, tool dispatch and reply delivery.

It also counts what a plain turn on an existing conversation sends to the database (`round_trips.py`, on
SQLAlchemy's events): statements, transactions (store round trips) and connection checkouts (each one a
ping on PostgreSQL), per turn, over turns that each wait until the previous one is wholly done.

    python tests/bench/engine_bench.py [--turns 300] [--db postgresql+asyncpg://…]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (fakes, engine_harness)

from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from round_trips import TripCounter, Trips, stop_the_clock  # noqa: E402

TURNS_PER_SESSION = 10


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def prefix_share(previous: dict, current: dict) -> float:
    """Share of the previous request (tools + messages, serialized) that the current one repeats unchanged
    at its start: what a provider's prefix cache can serve. 100% means nothing earlier was rewritten."""
    def parts(body: dict) -> list[str]:
        return [json.dumps(body.get("tools"), sort_keys=True)] + [json.dumps(m, sort_keys=True)
                                                                  for m in body.get("messages", [])]
    prev, cur = parts(previous), parts(current)
    shared = 0
    for a, b in zip(prev, cur, strict=False):
        if a != b:
            break
        shared += len(b)
    return shared / sum(len(p) for p in prev)


async def run_turns(engine: Engine, fake: FakeLLM, turns: int, with_tool: bool, chat_prefix: str) -> list[float]:
    times = []
    for i in range(turns):
        if with_tool:
            fake.script(Reply(tool_calls=[("calculate", {"expression": f"{i}*7"})]), Reply(text=f"It is {i * 7}."))
        else:
            fake.script(Reply(text="Sure, here is a short answer to that question."))
        first_request = len(fake.requests)
        chat = f"{chat_prefix}{i // TURNS_PER_SESSION}"
        before = len(engine.outlet.delivered)
        started = time.perf_counter()
        await engine.gateway.handle(engine.message(f"question number {i}", chat=chat, user=chat))
        await engine.outlet.wait_for(before + 1)
        wall = time.perf_counter() - started
        served = sum(r.served_seconds for r in fake.requests[first_request:])
        times.append(wall - served)
    await engine.idle()
    return times


async def trips_per_plain_turn(engine: Engine, fake: FakeLLM, turns: int, chat: str) -> list[Trips]:
    """What each plain turn on an existing conversation sends to the store: the conversation's first turn
    runs before counting, the clock is stopped (`stop_the_clock`), and each turn is wholly done (its
    completion and ledger write included) before the next message comes, so a turn's count is its own."""
    assert engine.store is not None and engine.gateway is not None
    await engine.let_go(30)  # the sessions before give back their leases first: those trips are theirs
    await engine.say("the first message of the conversation", chat=chat, user=chat)
    await engine.idle()
    await stop_the_clock(engine.gateway)
    counter = TripCounter(engine.store)
    counts = []
    with counter.counting():
        for i in range(turns):
            fake.script(Reply(text="Sure, here is a short answer to that question."))
            before = counter.snapshot()
            await engine.say(f"question number {i}", chat=chat, user=chat)
            await engine.idle()
            counts.append(counter.snapshot().minus(before))
    return counts


async def main(turns: int, database: str | None = None) -> dict:
    """`database`: a PostgreSQL server's URL, where the run gets a schema of its own (dropped after)."""
    if database is None:
        return await run(turns, None)
    os.environ["HERMES_TEST_POSTGRES_URL"] = database
    from postgres import empty_database

    async with empty_database("postgres", "") as place:
        return await run(turns, place)


async def run(turns: int, database: tuple[str, dict] | None) -> dict:
    home = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        # The background review runs off the reply path; it is left out so the figures are the turn's own.
        profile = make_profile(name="bench", toolsets=["core", "memory", "skills", "search"],
                               review={"memory_every_turns": 0, "skill_every_iterations": 0})
        engine = await Engine(home, profile, database=database).start()
        try:
            await run_turns(engine, fake, 20, False, "warm")
            await run_turns(engine, fake, 20, True, "warmtool")
            fake.requests.clear()
            plain = await run_turns(engine, fake, turns, False, "plain")
            first = fake.requests[0].body
            first_tokens = (len(first["messages"][0]["content"]) + len(json.dumps(first.get("tools", [])))) // 4
            session_requests = [r.body for r in fake.requests[:TURNS_PER_SESSION]]
            fake.requests.clear()
            tool = await run_turns(engine, fake, turns, True, "tool")
            session_requests_tool = [r.body for r in fake.requests[:2 * TURNS_PER_SESSION]]
            trips = await trips_per_plain_turn(engine, fake, 20, "counted")  # last: it stops the clock
        finally:
            await engine.stop()
    shares = [prefix_share(a, b) for seq in (session_requests, session_requests_tool) for a, b in zip(seq, seq[1:], strict=False)]
    return {
        "turns": turns, "database": "PostgreSQL" if database else "SQLite",
        "statements": statistics.median(t.statements for t in trips), "statements_max": max(t.statements for t in trips),
        "transactions": statistics.median(t.transactions for t in trips),
        "transactions_max": max(t.transactions for t in trips),
        "checkouts": statistics.median(t.checkouts for t in trips),
        "statement_list": max(trips, key=lambda t: t.statements).sql,
        "plain_p50_ms": statistics.median(plain) * 1000, "plain_p99_ms": percentile(plain, 99) * 1000,
        "tool_p50_ms": statistics.median(tool) * 1000, "tool_p99_ms": percentile(tool, 99) * 1000,
        "first_request_tokens": first_tokens,
        "prefix_shared_min_pct": min(shares) * 100, "prefix_shared_mean_pct": statistics.mean(shares) * 100,
    }


def command_line(doc: str, *, database: bool = True) -> argparse.Namespace:
    """`--turns N` (default 300), `--db URL` (default: SQLite in a temporary home); the fake LLM on loopback
    is never reached through a proxy."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    if database:
        parser.add_argument("--db", default=None, help="a PostgreSQL server's URL (the run makes a schema there)")
    args = parser.parse_args()
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = "127.0.0.1,localhost"
    return args


def turns_from_command_line(doc: str) -> int:
    return int(command_line(doc, database=False).turns)


if __name__ == "__main__":
    options = command_line(__doc__)
    r = asyncio.run(main(int(options.turns), options.db))
    print(f"store per plain turn on an existing conversation, {r['database']}, median (max) of 20:")
    print(f"  {r['transactions']:g} round trips ({r['transactions_max']}), {r['statements']:g} statements "
          f"({r['statements_max']}), {r['checkouts']:g} connection checkouts   (target: round trips <= 4)")
    for sql in r["statement_list"]:
        print(f"    {sql[:110]}")
    print(f"engine time per turn over {r['turns']} turns (fake LLM time subtracted), {r['database']}:")
    print(f"  plain turn     p50 {r['plain_p50_ms']:6.2f} ms   p99 {r['plain_p99_ms']:6.2f} ms   (target p50 <= 8 ms)")
    print(f"  one-tool turn  p50 {r['tool_p50_ms']:6.2f} ms   p99 {r['tool_p99_ms']:6.2f} ms   (target p50 <= 15 ms)")
    print(f"first request (system prompt + tool schemas): {r['first_request_tokens']} tokens (chars/4; target <= 3000)")
    print(f"prefix shared with the previous request of the session: min {r['prefix_shared_min_pct']:.1f}% "
          f"mean {r['prefix_shared_mean_pct']:.1f}% (target >= 99%)")
