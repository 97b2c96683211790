"""Clock benchmark: how late reminders arrive with 10,000 jobs in the store, what the scheduler costs while
nothing is due, and how soon a surviving replica delivers the run a killed one held.

- **Lateness** (target p99 ≤ 1 s): a real gateway (the engine harness, the real python-telegram-bot against the
  fake Telegram, in this process) with `--jobs` active jobs inserted through the `ScheduledJobs` port: most due
  in an hour to a month, `--due` of them (half once, half `every 1h`) at random moments of a `--window`
  second window, each to a chat of its own (Telegram paces a chat to about one message a second, which is
  not what this measures); with `--burst N`, N of them are due at one same moment instead (many people's
  `every day at 9am`), which the ticker sends side by side, 16 at a time. Per run: from its due time to the moment the fake Telegram accepted the message
  (`sendMessage` applied, the answer on its way back); every run must arrive exactly once.
- **Idle CPU**: the same store size, nothing due for an hour, no platform attached (the recording outlet):
  this process's CPU time (`time.process_time()`, every thread, the SQLite driver's included) over `--idle`
  seconds, scaled to a minute; then the clock's ticker is stopped and the same window measured again, so the
  difference is the ticker's own. On PostgreSQL the server's side of each query is not in this process.
- **Takeover**: two `hermes-gateway run` replicas (the real command, the fake Telegram, `HERMES_REPLICA_ID`s of
  their own, so neither judges the other's pids) on one database. Each round a reminder is made due in two
  seconds; the fake holds the `sendMessage` of whichever replica took it, that replica is killed (`kill -9`,
  holding the job's lease with its delivery in flight), the held call is dropped, and the time is taken
  from the kill to the survivor's message reaching the fake. The lease's time to live
  (`HERMES_SESSION_LEASE_SECONDS`, `--lease`; 30 s by default, as in a deployment) bounds it: a survivor
  cannot tell a dead replica from a slow one sooner.

    python tests/bench/clock_bench.py [--backend sqlite|postgres|both] [--only lateness,idle,takeover]
        [--jobs 10000] [--due 300] [--window 60] [--burst 0] [--idle 20] [--lease 30] [--rounds 3]

PostgreSQL needs HERMES_TEST_POSTGRES_URL (`eval "$(bash .ci/postgres.sh)"`); without it the PostgreSQL
runs are skipped with a line saying so. Exits 1 when the lateness target is missed or a run is lost or doubled.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import sqlalchemy as sa  # noqa: E402
from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM  # noqa: E402
from fakes.fake_telegram import FakeTelegram  # noqa: E402
from gateway_kit import database_url, free_port, replica, wait_ready, wait_until  # noqa: E402
from postgres import PG_URL, fresh_schema  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402

from hermes_engine.clock import ClockFeature  # noqa: E402
from hermes_engine.ports.jobs import JobSpec  # noqa: E402
from storage.engine import make_engine  # noqa: E402
from storage.store import SqlStore  # noqa: E402

TARGET_P99 = 1.0
BOT = "clock-bench"
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
START_TIMEOUT = 90


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def wall(monotonic: float) -> float:
    """A `time.monotonic()` reading of this process as a Unix time."""
    return monotonic + (time.time() - time.monotonic())


@asynccontextmanager
async def engine_database(backend: str, folder: Path) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(url, engine options) for the engine harness: a SQLite file, or a fresh PostgreSQL schema."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / 'hermes.db'}", {}
        return
    assert PG_URL
    async with fresh_schema() as schema:
        yield PG_URL, {"connect_args": {"server_settings": {"search_path": schema}}}


def job(owner: int, target: dict[str, Any], name: str, due: datetime, *, recurring: bool) -> JobSpec:
    return JobSpec(owner_id=owner, bot=BOT, target=target, session_key=f"telegram:{target['account']}:dm:"
                   f"{target['chat_id']}", name=name, schedule="every 1h" if recurring else "in 1h", timezone="UTC",
                   kind="reminder", text=name, next_due=due, once=not recurring)


async def fill(store: Any, owner: int, account: str, count: int) -> float:
    """`count` jobs none of which is due within the next hour (some recurring, some once), through the port;
    returns how many a second were inserted."""
    rng = random.Random(7)
    now = datetime.now(UTC)
    started = time.perf_counter()

    def later(i: int) -> JobSpec:
        due = now + timedelta(hours=1, seconds=rng.uniform(0, 30 * 86400))
        target = {"platform": "telegram", "account": account, "chat_id": str(10_000_000 + i), "thread_id": None,
                  "reply_to_id": None}
        return job(owner, target, f"later {i}", due, recurring=i % 3 == 0)

    for i in range(count):
        await store.create_job(later(i))
    return count / (time.perf_counter() - started)


async def lateness(backend: str, jobs: int, due: int, window: float, burst: int = 0) -> list[float]:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        async with AsyncExitStack() as stack:
            telegram = await stack.enter_async_context(FakeTelegram())
            os.environ.update(TELEGRAM_BOT_TOKEN=telegram.token, TELEGRAM_API_BASE_URL=telegram.base_url)
            database = await stack.enter_async_context(engine_database(backend, folder))
            profile = make_profile(name=BOT, access={"allowed_users": ["42"]}, platforms={"telegram": FAST},
                                   toolsets=["core", "clock"])
            e = await Engine(folder, profile, database=database).start()
            stack.push_async_callback(e.stop)
            from adapters.telegram import PLATFORM

            assert e.gateway is not None and e.store is not None
            adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
            e.gateway.attach(adapter)
            await adapter.start()
            stack.push_async_callback(adapter.stop)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            owner = (await e.store.resolve_account("telegram", adapter.account, "42")).person_id
            rate = await fill(e.store, owner, adapter.account, jobs - due)
            lead = 2 + 1.5 * due / rate  # the due ones are all in before the first of them is due
            rng = random.Random(11)
            start = datetime.now(UTC) + timedelta(seconds=lead)
            slots: dict[str, float] = {}
            for i in range(due):
                at = start + timedelta(seconds=window / 2 if i < burst else rng.uniform(0, window))
                name = f"due {i}"
                target = {"platform": "telegram", "account": adapter.account, "chat_id": str(20_000_000 + i),
                          "thread_id": None, "reply_to_id": None}
                await e.store.create_job(job(owner, target, name, at, recurring=i % 2 == 0))
                slots[f"⏰ Reminder: {name}"] = at.timestamp()
            print(f"  {backend}: {jobs:,} jobs in the store ({rate:.0f} inserts/s); {due} due over {window:g} s",
                  flush=True)

            def arrived() -> dict[str, list[float]]:
                seen: dict[str, list[float]] = {}
                for chat in telegram.chats.values():
                    for message in chat.bot_messages:
                        if message.text in slots:
                            seen.setdefault(message.text, []).append(wall(message.history[0][0]))
                return seen

            async def all_arrived() -> bool:
                return len(arrived()) == due

            await wait_until(all_arrived, lead + window + 120)
            await asyncio.sleep(3)  # a run delivered twice would show by now
            seen = arrived()
            doubled = {text: len(times) for text, times in seen.items() if len(times) > 1}
            if doubled:
                raise SystemExit(f"runs delivered more than once: {doubled}")
            return [times[0] - slots[text] for text, times in seen.items()]


async def idle_cpu(backend: str, jobs: int, seconds: float) -> tuple[float, float]:
    """CPU seconds per idle minute of the whole gateway with `jobs` jobs, and of the same gateway with the
    clock's ticker stopped."""
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        async with engine_database(backend, folder) as database:
            e = await Engine(folder, make_profile(name=BOT, toolsets=["core", "clock"]), database=database).start()
            try:
                assert e.gateway is not None and e.store is not None
                owner = (await e.store.resolve_account("telegram", "bench", "42")).person_id
                await fill(e.store, owner, "bench", jobs)
                await asyncio.sleep(3)  # what the start and the inserts left behind settles

                async def measured() -> float:
                    cpu = time.process_time()
                    await asyncio.sleep(seconds)
                    return (time.process_time() - cpu) * 60 / seconds

                with_clock = await measured()
                clock = next(f for f in e.gateway.features if isinstance(f, ClockFeature))
                await clock.stop()
                without = await measured()
            finally:
                await e.stop()
    return with_clock, without


TAKEOVER_PROFILE = f"""\
name: {BOT}
model: openai:gpt-test
toolsets: [core, clock]
platforms:
  telegram:
    mode: polling
    poll_timeout: 1
"""


async def lease_holder(db_url: str, name: str) -> str | None:
    """Who holds lease `name`, read from the leases table as another process would."""
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(sa.text("SELECT holder FROM leases WHERE name = :name"), {"name": name})).first()
            return str(row[0]) if row else None
    finally:
        await engine.dispose()


async def one_takeover(n: int, telegram: FakeTelegram, live: dict[str, tuple[asyncio.subprocess.Process, int]],
                       db_url: str, lease: float) -> tuple[str, float, float]:
    """One round: a reminder due in two seconds, its sender killed with the send in flight; the killed replica's
    name (taken out of `live`), and the seconds from the kill and from the due time to the survivor's message."""
    account = telegram.token.split(":")[0]
    chat = 30_000_000 + n
    text = f"⏰ Reminder: takeover {n}"
    store = SqlStore(db_url)
    await store.init()
    try:
        owner = (await store.resolve_account("telegram", account, "42")).person_id
        due = datetime.now(UTC) + timedelta(seconds=2)
        target = {"platform": "telegram", "account": account, "chat_id": str(chat), "thread_id": None,
                  "reply_to_id": None}
        telegram.hold("sendMessage")
        made = await store.create_job(job(owner, target, f"takeover {n}", due, recurring=False))
    finally:
        await store.close()

    async def held() -> bool:
        return any(params.get("text") == text for _method, params in telegram.held)

    await wait_until(held, 30)
    holder = await lease_holder(db_url, f"job:{made.id}")
    assert holder is not None, "the run is in flight, so its lease is held"
    victim = holder.split(":", 1)[0]  # the holder's replica (HERMES_REPLICA_ID)
    proc = live.pop(victim)[0]
    killed = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    telegram.release()  # the dead replica's call is dropped, as a platform that never answered

    async def delivered() -> bool:
        return text in telegram.chat(chat).bot_texts

    await wait_until(delivered, lease + 60)
    shown = next(m for m in telegram.chat(chat).bot_messages if m.text == text).history[0][0]
    await asyncio.sleep(2)
    if telegram.chat(chat).bot_texts.count(text) != 1:
        raise SystemExit(f"round {n + 1}: the run was delivered {telegram.chat(chat).bot_texts.count(text)} times")
    return victim, shown - killed, wall(shown) - due.timestamp()


async def takeover(backend: str, rounds: int, lease: float, fake_llm: FakeLLM) -> list[tuple[float, float]]:
    """Per round: seconds from the kill to the survivor's message at the fake, and from the run's due time."""
    took: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        bot = folder / BOT
        bot.mkdir()
        (bot / "profile.yaml").write_text(TAKEOVER_PROFILE)
        async with AsyncExitStack() as stack:
            db_url = await stack.enter_async_context(database_url(backend, folder))
            telegram = await stack.enter_async_context(FakeTelegram())
            live: dict[str, tuple[asyncio.subprocess.Process, int]] = {}

            async def start(name: str) -> None:
                port = free_port()
                env = {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url_for(name),
                       "HERMES_SESSION_LEASE_SECONDS": f"{lease:g}", "HERMES_MODEL": "openai:gpt-test",
                       "TELEGRAM_ALLOWED_USERS": "42"}
                proc = await stack.enter_async_context(replica(name, folder, bot, db_url, port, env, fake_llm))
                live[name] = (proc, port)

            await start("r0")
            await start("r1")
            for n in range(rounds):
                for proc, port in live.values():
                    await wait_ready(f"http://127.0.0.1:{port}/ready", proc, START_TIMEOUT)
                victim, after_kill, after_due = await one_takeover(n, telegram, live, db_url, lease)
                took.append((after_kill, after_due))
                print(f"  round {n + 1}: {victim} killed holding the run; {next(iter(live))} delivered it "
                      f"{after_kill:.2f} s after the kill ({after_due:.2f} s after it was due)", flush=True)
                await start(f"r{n + 2}")
    return took


async def main(args: argparse.Namespace) -> int:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    only = set(args.only.split(","))
    missed = False
    async with FakeLLM() as fake_llm:
        os.environ.update(fake_llm_environment(fake_llm))
        for backend in backends:
            if backend == "postgres" and not PG_URL:
                print("postgres: skipped (HERMES_TEST_POSTGRES_URL is not set; `eval \"$(bash .ci/postgres.sh)\"`)")
                continue
            if "lateness" in only:
                late = await lateness(backend, args.jobs, args.due, args.window, args.burst)
                p50, p99 = percentile(late, 50), percentile(late, 99)
                missed |= p99 > TARGET_P99
                burst = f", {args.burst} of them due at one moment" if args.burst else ""
                print(f"lateness ({backend}, {args.jobs:,} jobs, {len(late)} runs{burst}): p50 {p50 * 1000:.0f} ms, "
                      f"p99 {p99 * 1000:.0f} ms, max {max(late) * 1000:.0f} ms, mean "
                      f"{statistics.mean(late) * 1000:.0f} ms; target p99 ≤ {TARGET_P99:g} s "
                      f"{'MISSED' if p99 > TARGET_P99 else 'met'}; load average {os.getloadavg()[0]:.2f}", flush=True)
            if "idle" in only:
                with_clock, without = await idle_cpu(backend, args.jobs, args.idle)
                print(f"idle CPU ({backend}, {args.jobs:,} jobs, {args.idle:g} s measured, scaled to a minute): "
                      f"gateway {with_clock:.2f} s/min, without the clock's ticker {without:.2f} s/min, the ticker "
                      f"{with_clock - without:.2f} s/min; load average {os.getloadavg()[0]:.2f}", flush=True)
            if "takeover" in only:
                took = await takeover(backend, args.rounds, args.lease, fake_llm)
                after_kill = [t[0] for t in took]
                after_due = [t[1] for t in took]
                print(f"takeover ({backend}, lease {args.lease:g} s, {len(took)} rounds): delivered by the survivor "
                      f"{min(after_kill):.2f}–{max(after_kill):.2f} s after the kill, {min(after_due):.2f}–"
                      f"{max(after_due):.2f} s after it was due; bound: the lease ({args.lease:g} s) and a tick "
                      f"(1 s); load average {os.getloadavg()[0]:.2f}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--only", default="lateness,idle,takeover", help="comma-separated parts to run")
    parser.add_argument("--jobs", type=int, default=10_000, help="active jobs in the store")
    parser.add_argument("--due", type=int, default=300, help="of them, due during the measured window")
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which the due ones fall")
    parser.add_argument("--burst", type=int, default=0, help="of the due ones, how many share one due time")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of each idle CPU window")
    parser.add_argument("--lease", type=float, default=30.0, help="HERMES_SESSION_LEASE_SECONDS of the replicas")
    parser.add_argument("--rounds", type=int, default=3, help="takeover rounds")
    sys.exit(asyncio.run(main(parser.parse_args())))
