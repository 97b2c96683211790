"""Kanban dispatcher benchmark: what the board costs per card, and how soon a ready card starts running.

100 ready cards, 4 workers (`max_in_progress_per_profile=4`), the default 60 s tick (so only the dispatcher's
own pokes move work along), a fake model: each attempt sleeps `--model-ms` and then completes its card through
the store, as a worker's `kanban_complete` does. Overhead per card is the wall time beyond what 4 workers
need for the model time alone, divided by the cards. Ready → running is, per card, the time from when a
worker slot was free for it (the later of its becoming ready and the previous card of that slot finishing)
to its claim.

    python tests/bench/kanban_bench.py [--cards 100] [--workers 4] [--model-ms 50] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hermes_engine.config import KanbanSettings  # noqa: E402
from hermes_engine.kanban.attempt import AttemptEnd  # noqa: E402
from hermes_engine.kanban.dispatcher import Dispatcher  # noqa: E402
from hermes_engine.ports.storage import CardRecord, CardSpec  # noqa: E402
from storage.store import SqlStore  # noqa: E402

TARGET_OVERHEAD_MS = 20.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def run(url: str, cards: int, workers: int, model_ms: float) -> tuple[float, list[float]]:
    store = SqlStore(url)
    await store.init()
    try:
        settings = KanbanSettings(max_in_progress_per_profile=workers, lease_seconds=60)
        finished: asyncio.Event = asyncio.Event()
        done_count = 0
        ended_at: list[float] = []  # when each attempt freed its slot
        waits: list[float] = []

        async def attempt(card: CardRecord, claim: str) -> AttemptEnd:
            nonlocal done_count
            claimed = time.perf_counter()
            free_since = sorted(ended_at)[-workers] if len(ended_at) >= workers else started
            waits.append((claimed - max(free_since, started)) * 1000)
            await asyncio.sleep(model_ms / 1000)
            end = await store.finish_attempt(card.id, claim, ok=True, result="ok")
            ended_at.append(time.perf_counter())
            done_count += 1
            if done_count == cards:
                finished.set()
            return AttemptEnd(end, True)

        await store.create_cards([CardSpec(f"card {i}", profile="bench", status="ready") for i in range(cards)],
                                 actor="bench")
        dispatcher = Dispatcher(store, "bench", settings, attempt, holder="bench")
        started = time.perf_counter()
        dispatcher.start()
        await asyncio.wait_for(finished.wait(), timeout=600)
        wall = time.perf_counter() - started
        await dispatcher.stop()
    finally:
        await store.close()
    return wall, waits


async def main(cards: int, workers: int, model_ms: float, url: str | None) -> int:
    with tempfile.TemporaryDirectory() as home:
        url = url or f"sqlite+aiosqlite:///{Path(home) / 'hermes.db'}"
        wall, waits = await run(url, cards, workers, model_ms)
    ideal = cards * model_ms / 1000 / workers
    overhead_ms = (wall - ideal) / cards * 1000
    backend = "PostgreSQL" if url.startswith("postg") else "SQLite"
    print(f"kanban, {backend}: {cards} cards, {workers} workers, model {model_ms:.0f} ms: wall {wall:.2f} s "
          f"(ideal {ideal:.2f} s), dispatcher overhead {overhead_ms:.1f} ms/card; ready → running "
          f"p50 {percentile(waits, 50):.1f} ms, p99 {percentile(waits, 99):.1f} ms; "
          f"target overhead <= {TARGET_OVERHEAD_MS:.0f} ms/card")
    return 0 if overhead_ms <= TARGET_OVERHEAD_MS else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--model-ms", type=float, default=50.0)
    parser.add_argument("--url", default=os.environ.get("HERMES_BENCH_DATABASE_URL"))
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.cards, args.workers, args.model_ms, args.url)))
