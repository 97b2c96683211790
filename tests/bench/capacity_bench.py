"""Capacity benchmark: one replica under sustained load, 200 Telegram chats each sending a DM every 10 s.

The real `hermes-gateway run` serves the shipped Telegram DM assistant (long polling) against the loopback
fake Telegram and the fake LLM, which answers each request after 1 s, on a fresh SQLite home (or a
PostgreSQL schema with `--backend postgres`). Each person writes at their own moment of the interval, so
the updates come at an even 20 a second. After a warm-up (every person's first turn, which makes their
person, session and prompt), over the steady part that follows, it measures:

- gateway-added latency per turn, p50 and p99: from the moment the fake Telegram handed the update out in
  a getUpdates answer to the moment the fake LLM received that turn's model request (what the gateway
  adds before the model starts working: parsing, the inbox, routing, the session's lease and load, the
  prompt, the SDK's request);
- CPU time of the gateway process per turn: utime + stime from /proc/<pid>/stat over the steady part,
  divided by the turns completed in it (their answers shown in the chat). On a machine shared with other
  work CPU time moves far less than wall time (some: shared caches and cores), so the load average is
  printed beside the figures;
- the reply time a person sees (update handed out → answer shown, the model's second included) and the
  process's resident memory at the end, for context.

It prints a table and exits non-zero when a target is missed or a DM went unanswered.

    python tests/bench/capacity_bench.py [--minutes 2] [--users 200] [--interval 10] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine_harness import fake_llm_environment  # noqa: E402
from fakes.fake_llm import FakeLLM, RecordedRequest, Reply  # noqa: E402
from fakes.fake_telegram import FakeTelegram  # noqa: E402
from gateway_kit import database_url, gateway_process, wait_until  # noqa: E402

TARGET_P50_MS = 15.0
TARGET_P99_MS = 50.0
TARGET_CPU_MS = 5.0
FIRST_USER = 700_000
BOT = "bots/telegram-dm-assistant"
START_TIMEOUT = 120.0
DRAIN_TIMEOUT = 60.0


@dataclass
class Turn:
    user: int
    text: str
    answer: str
    update_id: int = 0
    requested: float = 0.0  # monotonic: the model request reached the fake LLM
    shown: float = 0.0  # monotonic: the answer reached the chat


@dataclass
class Load:
    """What was sent and what came back, keyed by each DM's text."""

    turns: dict[str, Turn] = field(default_factory=dict)
    other_requests: int = 0  # model requests that answer no DM (background reviews, a goal's judge)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def run(args: argparse.Namespace) -> bool:
    load = Load()
    users = [FIRST_USER + n for n in range(args.users)]

    async def model(request: RecordedRequest) -> Reply:
        turn = load.turns.get(request.last_user_text)
        if turn is not None and not turn.requested:
            turn.requested = request.received
        elif turn is None:
            load.other_requests += 1
        await asyncio.sleep(args.latency)
        return Reply(text=turn.answer if turn is not None else "Nothing to save.")

    async with FakeLLM() as llm, FakeTelegram() as telegram:
        llm.responder = model
        with tempfile.TemporaryDirectory() as home:
            async with database_url(args.backend, Path(home)) as db_url:
                env = {**fake_llm_environment(llm), "HERMES_HOME": str(home), "HERMES_DATABASE_URL": db_url,
                       "HERMES_HTTP_PORT": "0", "TELEGRAM_BOT_TOKEN": telegram.token,
                       "TELEGRAM_API_BASE_URL": telegram.base_url,
                       "TELEGRAM_ALLOWED_USERS": ",".join(map(str, users)),
                       "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
                if args.model:
                    env.update({"HERMES_MODEL": args.model, "HERMES_FALLBACK_MODELS": ""})
                async with gateway_process(BOT, env) as proc:
                    await wait_until(lambda: _polling(telegram, proc), START_TIMEOUT)
                    return await drive(args, load, users, telegram, proc)


async def _polling(telegram: FakeTelegram, proc: asyncio.subprocess.Process) -> bool:
    assert proc.returncode is None, "the gateway exited"
    return any(call.method == "getUpdates" for call in telegram.requests)


async def drive(args: argparse.Namespace, load: Load, users: list[int], telegram: FakeTelegram,
                proc: asyncio.subprocess.Process) -> bool:
    """Send the DMs on schedule; measure the steady part; wait for the last answers."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    duration = args.minutes * 60
    warm_up = args.warmup if args.warmup is not None else 1.5 * args.interval
    step = args.interval / len(users)
    sent = 0
    steady_from = steady_cpu = 0.0
    while (at := sent * step) < duration:
        delay = started + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if not steady_from and at >= warm_up:
            steady_from, steady_cpu = time.monotonic(), cpu_seconds(proc.pid)
        user = users[sent % len(users)]
        text = f"message {sent // len(users) + 1} from {user}"
        turn = Turn(user, text, f"answer to {text}")
        load.turns[text] = turn
        turn.update_id = telegram.user_says(user, user, text)["update_id"]
        sent += 1
    steady_to, steady_end_cpu = time.monotonic(), cpu_seconds(proc.pid)
    memory = rss_mb(proc.pid)

    def answered() -> bool:
        return all(chat_shows(telegram, turn) for turn in load.turns.values())

    with contextlib.suppress(TimeoutError):  # what is still unanswered then is reported
        await telegram.wait_for(answered, timeout=DRAIN_TIMEOUT)
    return report(args, load, telegram, (steady_from, steady_to), steady_end_cpu - steady_cpu, memory)


def chat_shows(telegram: FakeTelegram, turn: Turn) -> bool:
    """Whether the answer reached the chat; notes when it first did (the call that carried it)."""
    if turn.shown:
        return True
    for call in telegram.chat(turn.user).calls:
        if call.status == 200 and call.params.get("text") == turn.answer:
            turn.shown = call.time
            return True
    return False


def report(args: argparse.Namespace, load: Load, telegram: FakeTelegram, window: tuple[float, float],
           cpu: float, memory: float) -> bool:
    start, end = window
    handed = telegram.first_handed_out
    steady = [t for t in load.turns.values() if start <= handed.get(t.update_id, 0.0) < end]
    latencies = [(t.requested - handed[t.update_id]) * 1000 for t in steady if t.requested]
    replies = [(t.shown - handed[t.update_id]) * 1000 for t in steady if t.shown]
    completed = sum(1 for t in load.turns.values() if start <= t.shown < end)
    unanswered = [t.text for t in load.turns.values() if not t.shown]
    per_turn = cpu / completed * 1000 if completed else float("inf")
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    rows = [
        ("DMs sent / answered", f"{len(load.turns)} / {len(load.turns) - len(unanswered)}", "all"),
        ("steady part: seconds, turns completed", f"{end - start:.1f} s, {completed}", ""),
        ("gateway-added latency, p50", f"{p50:.1f} ms", f"<= {TARGET_P50_MS:.0f} ms"),
        ("gateway-added latency, p99 (max)", f"{p99:.1f} ms ({max(latencies, default=0):.1f})",
         f"<= {TARGET_P99_MS:.0f} ms"),
        ("gateway CPU per turn (utime+stime)", f"{per_turn:.2f} ms ({cpu:.2f} s)", f"<= {TARGET_CPU_MS:.0f} ms"),
        ("reply shown, p50 / p99 (model included)",
         f"{percentile(replies, 50):.0f} / {percentile(replies, 99):.0f} ms", ""),
        ("Bot API calls per turn", calls_per_turn(telegram, len(load.turns)), ""),
        ("other model requests (reviews)", str(load.other_requests), ""),
        ("resident memory at the end", f"{memory:.1f} MB", ""),
    ]
    print(f"capacity: {args.users} chats, a DM each every {args.interval:g} s "
          f"({args.users / args.interval:.0f}/s), model {args.latency:g} s, {args.backend}, "
          f"{args.minutes:g} min; load average {load_average()}")
    width = max(len(name) for name, _, _ in rows)
    for name, measured, target in rows:
        print(f"  {name:<{width}}  {measured:<24} {target}")
    if unanswered:
        print(f"  unanswered: {unanswered[:5]}{' …' if len(unanswered) > 5 else ''}")
    return (not unanswered and p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS and per_turn <= TARGET_CPU_MS)


def calls_per_turn(telegram: FakeTelegram, turns: int) -> str:
    counts: dict[str, int] = {}
    for call in telegram.requests:
        if call.method != "getUpdates":
            counts[call.method] = counts.get(call.method, 0) + 1
    return ", ".join(f"{method} {count / turns:.2f}" for method, count in sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between one person's DMs")
    parser.add_argument("--latency", type=float, default=1.0, help="the fake model's seconds per reply")
    parser.add_argument("--warmup", type=float, default=None, help="seconds left out at the start "
                        "(default: one and a half intervals, every person's first turn)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--model", default="", help="HERMES_MODEL instead of the profile's (no fallback)")
    args = parser.parse_args()
    # The fake LLM's own complaint when a stopped gateway drops a background call it was still answering.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    return 0 if asyncio.run(run(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
