"""Compression benchmark: a 500-turn session with tool calls in a 16K window stays bounded and flat.

One scripted person talks to the real gateway (SQLite, real SDK, real features) for 500 turns; every turn
calls a tool that returns ~2,000 characters, so the window fills every few turns and compression has to
keep up. The fake LLM answers summary calls with a structured summary. Reported:

- the largest turn request — as the provider counted it (the fake counts body bytes / 4) and as the
  engine estimated it before sending — against 50% of the window plus one turn;
- the number of compressions (summaries) and placeholder passes;
- engine time per turn (wall time minus the fake's own serving time) around turn 10 and turn 500: flat
  means the per-turn cost does not grow with the stored history.

    python tests/bench/compression_bench.py [--turns 500] [--window 16384]
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

from hermes_engine.compression.feature import CompressionFeature  # noqa: E402
from hermes_engine.compression.service import SessionContext  # noqa: E402
from hermes_engine.compression.summariser import SUMMARY_SYSTEM  # noqa: E402
from hermes_engine.ports.conversation import estimate_tokens  # noqa: E402
from hermes_engine.tools.registry import tool  # noqa: E402

SUMMARY = ("## Goal\nWork through the inventory, one item per turn.\n## Constraints\n- one lookup per turn\n"
           "## Progress\n### Done\n- items up to {n} looked up\n### In progress\nNone.\n### Blocked\nNone.\n"
           "## Key decisions\n- keep answers short\n## Open questions\nNone.\n## Next steps\n- next item\n"
           "## Critical facts\n" + "".join(f"- item {i}: shelf {i * 7 % 13}, count {i * 3 % 17}\n" for i in range(25)))


@tool(toolset="bench")
def lookup(item: int) -> str:
    """Look an inventory item up."""
    return f"item {item}: " + " ".join(f"field{j}=value{(item * j) % 97}" for j in range(150))


def is_summary(request) -> bool:
    return request.system.startswith(SUMMARY_SYSTEM[:60])


def responder(request):
    if is_summary(request):
        return Reply(text=SUMMARY.format(n=len(request.messages[0]["content"]) % 1000))
    last = request.messages[-1]
    if last["role"] == "user":
        item = len(request.messages)
        return Reply(tool_calls=[("lookup", {"item": item})])
    return Reply(text="Item noted: it sits on its shelf, the count is fine and nothing needs reordering. " * 3)


def question(i: int) -> str:
    return f"Turn {i}: look up the next inventory item and tell me where it is. " + "Context for the item. " * 20


async def main(turns: int, window: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix="hermes-compression-bench-"))
    estimates: list[int] = []
    original = SessionContext.before_call

    async def measured(self, history, router):
        messages = await original(self, history, router)
        estimates.append(self.measure(history.view()))
        return messages

    SessionContext.before_call = measured  # record the engine's own estimate of each request it sends
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        fake.responder = responder
        profile = make_profile(name="bench", context_window=window,
                               toolsets=["core", "memory", "skills", "search", "bench"],
                               review={"memory_every_turns": 0, "skill_every_iterations": 0})
        engine = await Engine(home, profile).start()
        engine.gateway.tools.register(lookup)
        times: list[float] = []
        summary_turns: list[int] = []
        turn_requests: list[tuple[int, int]] = []  # (fake's count, engine estimate)
        try:
            for i in range(turns):
                first = len(fake.requests)
                first_estimate = len(estimates)
                before = len(engine.outlet.delivered)
                started = time.perf_counter()
                await engine.gateway.handle(engine.message(question(i)))
                await engine.outlet.wait_for(before + 1, timeout=60)
                wall = time.perf_counter() - started
                requests = fake.requests[first:]
                times.append(wall - sum(r.served_seconds for r in requests))
                turn_only = [r for r in requests if not is_summary(r)]
                if len(turn_only) < len(requests):
                    summary_turns.append(i)
                for request, estimate in zip(turn_only, estimates[first_estimate:], strict=False):
                    turn_requests.append((len(json.dumps(request.body)) // 4, estimate))
                fake.requests.clear()
                estimates.clear()
            await engine.idle()
            session = next(iter(engine.gateway.sessions.values()))
            stored = await engine.store.load_stored_messages(session.record.id)
            from storage.search import list_compactions

            compactions = await list_compactions(engine.store.engine, [session.record.id])
            context = next(f for f in engine.gateway.features if isinstance(f, CompressionFeature)).service.context(session)
            final_view = len(session.history)
        finally:
            await engine.stop()
            SessionContext.before_call = original
    # one turn = the largest turn's own messages (question, tool call, tool result, answer)
    per_turn = [stored[k:k + 4] for k in range(0, len(stored), 4)]
    one_turn = max(sum(estimate_tokens(s.message.content) + 4 + sum(len(c.arguments) // 4 for c in s.message.tool_calls)
                       for s in turn) for turn in per_turn)
    counted = max(c for c, _ in turn_requests)
    estimated = max(e for _, e in turn_requests)
    return {
        "turns": turns, "window": window, "stored": len(stored), "view": final_view,
        "largest_counted": counted, "largest_estimated": estimated, "bound": window // 2 + one_turn,
        "one_turn": one_turn, "compressions": len(compactions),
        "reasons": sorted({c.reason for c in compactions}),
        "early_ms": statistics.median(times[5:25]) * 1000, "late_ms": statistics.median(times[-20:]) * 1000,
        "slope_ms": statistics.linear_regression(range(5, len(times)), times[5:]).slope * 100_000,
        "p50_ms": statistics.median(times) * 1000,
        "max_ms": max(times[5:]) * 1000, "slowest_turn": max(range(5, len(times)), key=times.__getitem__),
        "plain_p50_ms": statistics.median(t for i, t in enumerate(times) if i not in summary_turns) * 1000,
        "summary_p50_ms": statistics.median(times[i] for i in summary_turns) * 1000 if summary_turns else 0.0,
        "estimate_error_pct": 100 * statistics.mean(abs(e - c) / c for c, e in turn_requests),
        "fixed": context.fixed,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=16_384)
    args = parser.parse_args()
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = "127.0.0.1,localhost"
    started = time.perf_counter()
    r = asyncio.run(main(args.turns, args.window))
    print(f"{r['turns']} turns with a tool call each, {r['window']:,}-token window "
          f"(system prompt + tools ~{r['fixed']:,} tokens), SQLite, fake LLM:")
    print(f"  largest turn request: {r['largest_counted']:,} tokens counted by the provider, "
          f"{r['largest_estimated']:,} estimated by the engine "
          f"(bound: 50% of the window + one turn = {r['window'] // 2:,} + {r['one_turn']:,} = {r['bound']:,}) "
          f"-> {'OK' if r['largest_counted'] <= r['bound'] else 'OVER'}")
    print(f"  engine estimate vs provider count: mean error {r['estimate_error_pct']:.1f}%")
    print(f"  compressions (summaries): {r['compressions']} ({', '.join(r['reasons'])}); "
          f"{r['stored']:,} messages stored, {r['view']} in the live view at the end")
    print(f"  engine time per turn (median of 20, fake LLM time subtracted): turns 6-25 {r['early_ms']:.2f} ms, "
          f"turns {r['turns'] - 19}-{r['turns']} {r['late_ms']:.2f} ms; trend {r['slope_ms']:+.2f} ms per 100 turns")
    print(f"  p50 {r['p50_ms']:.2f} ms; turns without a summary p50 {r['plain_p50_ms']:.2f} ms, turns with one "
          f"p50 {r['summary_p50_ms']:.2f} ms; slowest after warm-up {r['max_ms']:.2f} ms (turn {r['slowest_turn']})")
    print(f"  wall time {time.perf_counter() - started:.1f} s")
