"""Engine time per plain turn beside the reference agent's (Nous Research's Hermes Agent), measured side by
side in one run against one fake model (target: ours at most a tenth of theirs).

Both agents run as they chat, each a process of its own with one persistent session fed on a pipe: ours is
`hermes-gateway chat` (piped: a line in, the final answer out), theirs one of its CLI sessions kept across
turns (`reference_driver.py`, run with the reference's own Python). Both talk OpenAI Chat Completions to the
same `FakeLLM` on loopback, which answers every request at once with the same short text. A turn is timed
from its line written to its answer read; the fake's own serving time of the requests in that window is
subtracted, so what remains is each agent's engine: its prompt and history, its storage, its SDK's request
and stream handling, its output. The turns alternate, ours and theirs (which goes first alternates too), so
load on the machine falls on both alike; the first `--warmup` turns of each are left out.

Our store's statements and round trips per plain turn are counted beside it as `engine_bench.py` counts
them (in this process, on SQLAlchemy's events, against the same fake).

    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install hermes-agent
    python tests/bench/reference_bench.py --reference-python /tmp/refvenv/bin/python [--turns 200]

Exits with status 1 when our p50 is more than a tenth of theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))  # tests/ (fakes, engine_harness)
sys.path.insert(0, str(HERE))

from engine_bench import percentile, trips_per_plain_turn  # noqa: E402
from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM, Reply  # noqa: E402

ANSWER = "Sure, here is a short answer to that question."
MODEL = "gpt-bench"
STARTUP_SECONDS = 180


@dataclass
class Side:
    """One agent's process and what its turns took: `times` the engine's share of each measured turn (wall
    time less the fake's), `requests` how many model requests came in each turn's window, `sizes` their
    bodies' bytes."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    proc: asyncio.subprocess.Process | None = None
    times: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    async def start(self, ready_line: str | None) -> None:
        with self.log.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=log, limit=1 << 20)
        if ready_line is not None:
            line = await self._read_line(STARTUP_SECONDS)
            if line != ready_line:
                raise RuntimeError(f"{self.name} did not start: {line!r} (see {self.log})")

    async def _read_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError(f"{self.name} ended (status {await self.proc.wait()}; see {self.log})")
        return raw.decode().rstrip("\n")

    async def turn(self, fake: FakeLLM, text: str, measured: bool) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        first = len(fake.requests)
        started = time.perf_counter()
        self.proc.stdin.write(text.encode() + b"\n")
        await self.proc.stdin.drain()
        answer = await self._read_line(STARTUP_SECONDS)
        wall = time.perf_counter() - started
        if answer != ANSWER:
            raise RuntimeError(f"{self.name} answered {answer!r} to {text!r} (see {self.log})")
        window = fake.requests[first:]
        if measured:
            self.walls.append(wall)
            self.times.append(wall - sum(r.served_seconds for r in window))
            self.requests.append(len(window))
            self.sizes.extend(r.size for r in window)

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def clean_environment(home: Path) -> dict[str, str]:
    """This shell's environment without any agent's or model vendor's settings, and loopback never proxied."""
    prefixes = ("HERMES_", "OPENAI_", "ANTHROPIC_", "OPENROUTER_", "TELEGRAM_", "SLACK_", "DISCORD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update({"HOME": str(home), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def ours(fake: FakeLLM, place: Path) -> Side:
    home = place / "ours"
    home.mkdir()
    env = {**clean_environment(home), **fake_llm_environment(fake), "HERMES_HOME": str(home),
           "HERMES_MODEL": f"openai:{MODEL}"}
    return Side("hermes-gateway chat", [sys.executable, "-m", "hermes_gateway.cli.main", "chat"], env, ROOT,
                place / "ours.log")


def theirs(fake: FakeLLM, place: Path, python: str) -> Side:
    """The reference with a home of its own: one configuration file naming the fake as a custom OpenAI-
    compatible endpoint, with the context window it would otherwise probe the endpoint for (and, finding
    none, assume: 256,000 tokens), its working folder that home (no project around it to read)."""
    home = place / "reference"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  provider: custom\n  base_url: {fake.openai_base_url}\n  default: {MODEL}\n"
        "  context_length: 256000\n", encoding="utf-8")
    env = {**clean_environment(home), "HERMES_HOME": str(home)}
    return Side("reference (hermes-agent)", [python, str(HERE / "reference_driver.py")], env, home,
                place / "reference.log")


async def our_store_per_turn(fake: FakeLLM, place: Path) -> tuple[float, float]:
    """Statements and round trips of a plain turn on an existing conversation, median of 20, as
    `engine_bench.py` counts them (its profile: the background review off, so the count is the turn's)."""
    saved = dict(os.environ)
    os.environ.update(fake_llm_environment(fake))
    profile = make_profile(name="bench", toolsets=["core", "memory", "skills", "search"],
                           review={"memory_every_turns": 0, "skill_every_iterations": 0})
    engine = await Engine(place / "counted", profile).start()
    try:
        trips = await trips_per_plain_turn(engine, fake, 20, "counted")
    finally:
        await engine.stop()
        os.environ.clear()
        os.environ.update(saved)
    return statistics.median(t.statements for t in trips), statistics.median(t.transactions for t in trips)


async def main(python: str, turns: int, warmup: int) -> int:
    place = Path(tempfile.mkdtemp(prefix="hermes-reference-bench-"))
    async with FakeLLM() as fake:
        fake.default_reply = Reply(text=ANSWER)
        (place / "counted").mkdir()
        statements, round_trips = await our_store_per_turn(fake, place)
        sides = [ours(fake, place), theirs(fake, place, python)]
        try:
            await sides[0].start(None)
            await sides[1].start("ready")
            for i in range(warmup + turns):
                for side in sides if i % 2 == 0 else sides[::-1]:
                    await side.turn(fake, f"question number {i}", measured=i >= warmup)
        finally:
            for side in sides:
                await side.stop()
    return report(sides, turns, statements, round_trips, place)


def report(sides: list[Side], turns: int, statements: float, round_trips: float, place: Path) -> int:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"engine time per plain turn, {turns} turns each, alternating, one fake model (its time subtracted); "
          f"load {load}")
    tenth = max(1, turns // 10)
    print(f"  {'agent':26} {'p50 ms':>7} {'p99 ms':>7} {'mean ms':>7} {'wall p50':>8} {'first':>7} {'last':>7} "
          f"{'requests/turn':>13} {'request KB':>10}")
    for side in sides:
        print(f"  {side.name:26} {ms(statistics.median(side.times))} {ms(percentile(side.times, 99))} "
              f"{ms(statistics.mean(side.times))} {ms(statistics.median(side.walls), 8)} "
              f"{ms(statistics.median(side.times[:tenth]))} {ms(statistics.median(side.times[-tenth:]))} "
              f"{statistics.mean(side.requests):13.2f} {statistics.median(side.sizes) / 1000:10.1f}")
    print(f"  (first, last: p50 of the first and the last {tenth} measured turns: the conversation grows turn by turn;"
          f" wall: the fake's time not subtracted;"
          f" request KB: the median request's body)")
    ours_p50, theirs_p50 = (statistics.median(s.times) for s in sides)
    print(f"ours / theirs at p50: {ours_p50 / theirs_p50:.3f} (target <= 0.100)")
    print(f"our store per plain turn (engine_bench's count, median of 20): {statements:g} statements, "
          f"{round_trips:g} round trips")
    print(f"logs: {place}")
    return 0 if ours_p50 <= theirs_p50 / 10 else 1


def ms(seconds: float, width: int = 7) -> str:
    return f"{seconds * 1000:{width}.2f}"


def command_line() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reference-python", required=True,
                        help="the Python of a venv with hermes-agent installed, e.g. /tmp/refvenv/bin/python")
    parser.add_argument("--turns", type=int, default=200, help="measured turns of each agent")
    parser.add_argument("--warmup", type=int, default=10, help="turns of each agent before measuring")
    return parser.parse_args()


if __name__ == "__main__":
    options = command_line()
    for key in ("NO_PROXY", "no_proxy"):
        os.environ[key] = "127.0.0.1,localhost"
    sys.exit(asyncio.run(main(options.reference_python, options.turns, options.warmup)))
