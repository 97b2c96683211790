"""Delivery ledger benchmark: how long a sent message stays unrecorded.

A reply is at-least-once only in one window: after the platform has accepted a send and before the ledger
row naming that message is committed. The window is the transit of the platform's response back to the
gateway plus this write. This measures the write on SQLite (a file in a temporary home, WAL, the store's
own write lane), as `record_delivery` is called after every send.

    python tests/bench/delivery_bench.py [--writes 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from storage.store import SqlStore  # noqa: E402

TARGET_P99_MS = 5.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def main(writes: int) -> int:
    with tempfile.TemporaryDirectory() as home:
        store = SqlStore(f"sqlite+aiosqlite:///{Path(home) / 'hermes.db'}")
        await store.init()
        try:
            timings = []
            for i in range(writes):
                key = f"event-{i // 3}:reply"  # a reply of three messages: three writes per key
                ids = [str(1000 + n) for n in range(i % 3 + 1)]
                started = time.perf_counter()
                await store.record_delivery("bench", "telegram", key, ids, final=i % 3 == 2)
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            await store.close()
    p50, p99 = percentile(timings, 50), percentile(timings, 99)
    print(f"ledger write after a send, SQLite: p50 {p50:.2f} ms, p99 {p99:.2f} ms ({writes} writes); "
          f"target p99 <= {TARGET_P99_MS} ms")
    return 0 if p99 <= TARGET_P99_MS else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000)
    sys.exit(asyncio.run(main(parser.parse_args().writes)))
