"""Metrics and usage-limit overhead per turn.

1. The Prometheus hooks alone: the calls one turn with one tool call makes, on `PrometheusMetrics`,
   timed over many repetitions.
2. The engine (as `engine_bench.py` measures it: the fake LLM's serving time subtracted) without metrics,
   with metrics, with a person's limits too (one upsert that checks and counts the turn; the tokens are
   added after the reply) and with the bot's total limit as well (one more read), in alternating blocks so
   machine noise falls on all of them alike.

    python tests/bench/metrics_bench.py [--turns 300]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (fakes, engine_harness)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import run_turns, turns_from_command_line  # noqa: E402
from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM  # noqa: E402

from hermes_engine.ports.metrics import NO_METRICS, Metrics  # noqa: E402
from hermes_gateway.metrics import PrometheusMetrics  # noqa: E402

BLOCK = 10


def hooks_per_turn_us(repetitions: int = 50_000) -> float:
    metrics = PrometheusMetrics()
    started = time.perf_counter()
    for _ in range(repetitions):
        metrics.turns_pending("bench", 1)
        metrics.turns_pending("bench", -1)
        metrics.model_request_started("bench", "test", 0.004)
        metrics.turn_finished("bench", "test", "answered", 0.012)
        metrics.tokens_used("bench", "test", input_tokens=1200, output_tokens=40, cached_tokens=900)
        metrics.tool_called("bench", "calculate")
    return (time.perf_counter() - started) / repetitions * 1e6


async def engine_p50s(turns: int) -> dict[str, tuple[float, float]]:
    configs: dict[str, tuple[Metrics, dict[str, object]]] = {
        "off": (NO_METRICS, {}),
        "metrics": (PrometheusMetrics(), {}),
        "+ person limits": (PrometheusMetrics(), {"turns_per_day": 10**9, "tokens_per_day": 10**12}),
        "+ bot total limit": (PrometheusMetrics(), {"turns_per_day": 10**9, "tokens_per_day": 10**12,
                                                    "total_turns_per_day": 10**9}),
    }
    rounds: dict[str, list[float]] = {name: [] for name in configs}  # each round's median, per config
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        engines = {}
        for name, (metrics, limits) in configs.items():
            profile = make_profile(name="bench", toolsets=["core", "memory", "skills", "search"], limits=limits,
                                   review={"memory_every_turns": 0, "skill_every_iterations": 0})
            home = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
            engines[name] = await Engine(home, profile, metrics=metrics).start()
            await run_turns(engines[name], fake, 20, False, "warm")
        try:
            for block in range(max(1, turns // BLOCK)):
                for name, engine in engines.items():
                    rounds[name].append(statistics.median(await run_turns(engine, fake, BLOCK, False, f"b{block}-")))
        finally:
            for engine in engines.values():
                await engine.stop()
    # Each round runs every configuration back to back; the median of the rounds' differences from "off"
    # cancels the load of a machine shared with other work better than comparing overall medians.
    return {name: (statistics.median(values) * 1000,
                   statistics.median(v - off for v, off in zip(values, rounds["off"], strict=True)) * 1000)
            for name, values in rounds.items()}


if __name__ == "__main__":
    turns = turns_from_command_line(__doc__)
    print(f"Prometheus hooks of one one-tool turn: {hooks_per_turn_us():.1f} µs")
    p50 = asyncio.run(engine_p50s(turns))
    print(f"engine time per plain turn, p50 over {turns} turns each (fake LLM time subtracted), SQLite:")
    for name, (ms, added) in p50.items():
        print(f"  {name:18s} {ms:6.2f} ms   (median difference from off per round of {BLOCK}: {added:+.2f} ms)")
