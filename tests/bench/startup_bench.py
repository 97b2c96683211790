"""Start-up benchmark: from `hermes-gateway run` to the answer of a DM that was waiting, and memory after 20.

The real process (`hermes-gateway run --bot bots/telegram-dm-assistant`) is started as an operator starts it:
from a virtualenv of its own made by `pip install .` (built first, in a scratch directory, unless `--python`
names one), so it runs the installed package with the bytecode pip compiled and only the dependencies an
operator gets (no test tools), with the interpreter's own defaults (`PYTHONDONTWRITEBYTECODE` unset). It
runs against the loopback fake Telegram (long polling) and the fake LLM (both model SDKs pointed at it
through their own variables, the profile's models unchanged), on a fresh home each run. A DM
is waiting before the process starts; the clock runs from just before the process is spawned until the
complete answer shows in the chat. Then 19 more messages are answered one after the other and the process's
resident memory is read from /proc/<pid>/status (VmRSS).

Where the time goes: one more run under `python -X importtime` sums the import time by top-level package,
and the gateway's own log lines (timestamps in milliseconds) give the phases. Where the memory goes: one
more run under tracemalloc groups what is allocated after 20 messages by top-level package (Python
allocations only; the rest of RSS is the interpreter, shared libraries and allocator slack).

The same is measured with an OpenAI primary model, and beside each figure what the primary model's SDK
costs on its own in a bare interpreter (`import anthropic` is most of both figures).

    python tests/bench/startup_bench.py [--runs 3] [--no-breakdown] [--python /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from fakes.fake_telegram import FakeTelegram  # noqa: E402

# Relative to the floor: what the gateway adds to its primary model's SDK, and a whole-process bound for the
# lighter SDK.
TARGET_REST_S = 0.5  # start -> first reply, beyond `import <sdk>` alone
TARGET_REST_MB = 50.0  # resident memory after 20 messages, beyond what `import <sdk>` alone takes
TARGET_OPENAI_MB = 105.0  # the whole process with an OpenAI primary
ALICE = 4242
MESSAGES = 20
TIMEOUT = 60.0
ARGS = ["run", "--bot", str(ROOT / "bots" / "telegram-dm-assistant")]
COMMAND = ["-m", "hermes_gateway.cli.main", *ARGS]

# Run inside the gateway's process for the memory breakdown: tracemalloc from the first line, and on
# SIGUSR1 the live allocations grouped by top-level package, written to the file named in the environment.
_TRACE_WRAPPER = r"""
import os, runpy, signal, sys, tracemalloc
from collections import defaultdict
tracemalloc.start(1)
def dump(*_):
    sizes = defaultdict(int)
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        sizes[_package(stat.traceback[0].filename)] += stat.size
    with open(os.environ["BENCH_TRACE_OUT"] + ".part", "w") as out:
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            out.write(f"{size}\t{name}\n")
    with open(os.environ["BENCH_TRACE_OUT"] + ".modules", "w") as out:
        out.write("\n".join(name for name in sys.modules if not name.startswith("__")))
    os.replace(os.environ["BENCH_TRACE_OUT"] + ".part", os.environ["BENCH_TRACE_OUT"])
def _package(filename):
    parts = filename.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return parts[parts.index(marker) + 1].removesuffix(".py")
    root = os.environ["BENCH_ROOT"].rstrip("/") + "/"
    if filename.startswith(root):
        return filename[len(root):].split("/")[0].removesuffix(".py")
    if filename.startswith("<frozen importlib"):
        return "(code of imported modules)"
    if filename.startswith("<"):
        return "(interpreter)"
    return "stdlib"
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["hermes_gateway.cli.main", *sys.argv[1:]]
runpy.run_module("hermes_gateway.cli.main", run_name="__main__", alter_sys=True)
"""


# The operator's interpreter (see `operator_python`); set by `main`.
PYTHON = sys.executable


def operator_python(scratch: Path) -> str:
    """A virtualenv in `scratch` with this checkout installed as an operator installs it (`pip install .`)."""
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", str(ROOT)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return python


def environment(telegram: FakeTelegram, llm: FakeLLM, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERMES_", "TELEGRAM_", "SLACK_", "DISCORD_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"HERMES_HOME": str(home), "HERMES_HTTP_PORT": "0", "HERMES_LOG_LEVEL": "INFO",
                "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
                "TELEGRAM_ALLOWED_USERS": str(ALICE),
                "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": llm.openai_base_url,
                "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": llm.anthropic_base_url,
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    return env


class Run:
    """One life of the gateway: spawned with a DM waiting, measured, stopped."""

    timeout = TIMEOUT  # for each answer

    def __init__(self, argv: list[str], messages: int, env_extra: dict[str, str] | None = None) -> None:
        self.argv, self.messages, self.env_extra = argv, messages, env_extra or {}
        self.first_reply = 0.0
        self.rss_mb = 0.0
        self.stderr = ""
        self.spawned_at = 0.0  # wall clock, to line up with the log's timestamps

    async def go(self) -> Run:
        async with FakeLLM() as llm, FakeTelegram() as telegram:
            llm.responder = lambda request: Reply(text="Hello! How can I help?")
            with tempfile.TemporaryDirectory() as home:
                telegram.user_says(ALICE, ALICE, "hello there")
                env = {**environment(telegram, llm, Path(home)), **self.env_extra}
                self.spawned_at = time.time()
                started = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    PYTHON, *self.argv,
                    cwd=home, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
                assert proc.stderr is not None
                drain = asyncio.create_task(proc.stderr.read())
                try:
                    await telegram.wait_for_messages(ALICE, 1, timeout=self.timeout)
                    await telegram.wait_for(lambda: telegram.chat(ALICE).bot_texts[-1] == "Hello! How can I help?",
                                            timeout=self.timeout, message="the first answer")
                    self.first_reply = time.perf_counter() - started
                    for n in range(2, self.messages + 1):
                        telegram.user_says(ALICE, ALICE, f"message number {n}")
                        await telegram.wait_for_messages(ALICE, n, timeout=self.timeout)
                        await telegram.wait_for(lambda n=n: telegram.chat(ALICE).bot_texts[n - 1:] ==  # type: ignore[misc]
                                                ["Hello! How can I help?"], timeout=self.timeout)
                    self.rss_mb = vm_rss_mb(proc.pid)
                    await self.after_messages(proc.pid)
                finally:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGTERM)
                        try:
                            await asyncio.wait_for(proc.wait(), 20)
                        except TimeoutError:
                            proc.kill()
                            await proc.wait()
                    self.stderr = (await drain).decode(errors="replace")
        return self

    async def after_messages(self, pid: int) -> None:
        return None


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def import_breakdown(stderr: str) -> list[tuple[str, float]]:
    """`-X importtime` lines → self time summed by top-level package, largest first (seconds)."""
    totals: dict[str, float] = defaultdict(float)
    for match in re.finditer(r"^import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", stderr, re.MULTILINE):
        totals[match.group(2).split(".")[0]] += int(match.group(1)) / 1e6
    return sorted(totals.items(), key=lambda kv: -kv[1])


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ (\S+): (.*)$", re.MULTILINE)


def log_phases(stderr: str, spawned_at: float, first_reply: float) -> list[tuple[float, str]]:
    """The gateway's log lines up to the first answer, as (seconds since spawn, line)."""
    phases = []
    for match in LOG_LINE.finditer(stderr):
        stamp = time.mktime(time.strptime(match.group(1)[:19], "%Y-%m-%d %H:%M:%S")) + int(match.group(1)[20:]) / 1000
        at = stamp - spawned_at
        if at > first_reply + 0.2:
            break
        phases.append((at, f"{match.group(2)}: {match.group(3)[:90]}"))
    return phases


class TracedRun(Run):
    timeout = 5 * TIMEOUT  # tracemalloc slows every allocation down

    def __init__(self, messages: int, out: Path, env_extra: dict[str, str]) -> None:
        super().__init__(["-c", _TRACE_WRAPPER, *ARGS], messages,
                         {**env_extra, "BENCH_TRACE_OUT": str(out), "BENCH_ROOT": str(ROOT)})
        self.out = out

    async def after_messages(self, pid: int) -> None:
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + self.timeout
        while not self.out.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - another process writes it
            await asyncio.sleep(0.05)


# Each configuration: its extra environment and the model SDK its primary model imports.
CONFIGS = [("the shipped profile (Anthropic primary, OpenAI fallback)", {}, "anthropic"),
           ("the same bot with HERMES_MODEL=openai:gpt-4.1-mini", {"HERMES_MODEL": "openai:gpt-4.1-mini"}, "openai")]

FLOOR_SCRIPT = """import time
started = time.perf_counter()
import {module}
seconds = time.perf_counter() - started
print(seconds, next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024)
"""


async def floor(module: str, runs: int = 3) -> tuple[float, float]:
    """What importing `module` alone costs a bare interpreter: (seconds, MB resident above a bare one)."""
    async def once(name: str) -> tuple[float, float]:
        proc = await asyncio.create_subprocess_exec(PYTHON, "-c", FLOOR_SCRIPT.format(module=name),
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        seconds, mb = out.decode().split()
        return float(seconds), float(mb)

    bare = statistics.median([(await once("sys"))[1] for _ in range(runs)])
    measured = [await once(module) for _ in range(runs)]
    return statistics.median(s for s, _ in measured), statistics.median(mb for _, mb in measured) - bare


# Imports the modules named in a file (one per line, in the order loaded) a top-level package at a time,
# the SDK's first, then the other libraries, then the project's own, and prints each package's resident
# memory and modules added: what each costs the process (code, module dicts, what its import builds), which
# tracemalloc files under "importlib".
RESIDENT_SCRIPT = """import importlib, sys
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024
names = open(sys.argv[1]).read().split()
tops = list(dict.fromkeys(name.split(".")[0] for name in names))
own = ["hermes_engine", "storage", "adapters", "hermes_gateway"]  # each before what imports it
order = [sys.argv[2], *(top for top in tops if top not in own), *own]
for top in dict.fromkeys(order):
    before, count = rss(), len(sys.modules)
    for name in names:
        if name.split(".")[0] == top and name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    print(rss() - before, len(sys.modules) - count, top)
"""


async def resident_by_package(modules: Path, sdk: str) -> list[tuple[float, int, str]]:
    """Resident MB and modules each top-level package adds, largest first (see RESIDENT_SCRIPT)."""
    with tempfile.TemporaryDirectory() as cwd:  # nothing on sys.path but the virtualenv's packages
        proc = await asyncio.create_subprocess_exec(PYTHON, "-c", RESIDENT_SCRIPT, str(modules), sdk, cwd=cwd,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
    rows = [(float(mb), int(count), name) for mb, count, name in (line.split() for line in out.decode().splitlines())]
    big = sorted((row for row in rows if row[0] >= 0.5), key=lambda row: -row[0])
    small = [row for row in rows if row[0] < 0.5]
    return [*big, (sum(r[0] for r in small), sum(r[1] for r in small), f"({len(small)} packages under 0.5 MB each)")]


async def print_breakdown(last: Run, sdk: str, env: dict[str, str]) -> None:
    print("start-up phases (seconds since spawn, from the gateway's log; last run):")
    for at, line in log_phases(last.stderr, last.spawned_at, last.first_reply):
        print(f"  {at:6.3f}  {line}")
    print(f"  {last.first_reply:6.3f}  (the answer shows in the chat)")
    imports = await Run(["-X", "importtime", *COMMAND], 1, env).go()
    rows = import_breakdown(imports.stderr)
    total = sum(seconds for _, seconds in rows)
    print(f"import time by top-level package (-X importtime, one run, whole life; total {total:.3f} s):")
    for name, seconds in rows[:15]:
        print(f"  {seconds:6.3f} s  {name}")
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "trace.tsv"
        await TracedRun(MESSAGES, out, env).go()
        lines = [line.split("\t") for line in out.read_text().splitlines()]
        resident = await resident_by_package(out.with_suffix(".tsv.modules"), sdk)
    traced = sum(int(size) for size, _ in lines)
    print(f"Python allocations alive after {MESSAGES} messages by package (tracemalloc; {traced / 2**20:.1f} MB):")
    for size, name in lines[:12]:
        print(f"  {int(size) / 2**20:6.2f} MB  {name}")
    print(f"resident memory by package: the modules the gateway had loaded after {MESSAGES} messages, imported "
          f"again in a bare interpreter a package at a time: {sdk}, the other libraries, then the project's own "
          f"(each library counted where first imported):")
    for mb, count, name in resident:
        print(f"  {mb:6.1f} MB  {count:4d} modules  {name}")


async def main(runs: int, breakdown: bool, python: str | None) -> int:
    """The targets hold for what the gateway adds: the primary model's SDK alone (its import time and memory,
    measured in a bare interpreter in the same run) is printed beside each figure and the gateway's share,
    the rest, is what is checked; with an OpenAI primary the whole process is bounded as well."""
    global PYTHON
    with tempfile.TemporaryDirectory() as scratch:
        PYTHON = python or operator_python(Path(scratch))
        print(f"gateway interpreter: {PYTHON}")
        return await measure(runs, breakdown)


async def measure(runs: int, breakdown: bool) -> int:
    ok = True
    for label, env, sdk in CONFIGS:
        results = [await Run(COMMAND, MESSAGES, env).go() for _ in range(runs)]
        if breakdown:
            await print_breakdown(results[-1], sdk, env)
        firsts = sorted(r.first_reply for r in results)
        first, rss = statistics.median(firsts), statistics.median(r.rss_mb for r in results)
        sdk_seconds, sdk_mb = await floor(sdk)
        whole = f"; the whole process <= {TARGET_OPENAI_MB:.0f} MB" if sdk == "openai" else ""
        print(f"{label}:")
        print(f"  start -> first reply to a waiting DM: median {first:.2f} s "
              f"({', '.join(f'{f:.2f}' for f in firsts)}); `import {sdk}` alone {sdk_seconds:.2f} s; "
              f"the rest {first - sdk_seconds:.2f} s; target: the rest <= {TARGET_REST_S} s")
        print(f"  resident memory after {MESSAGES} messages: median {rss:.1f} MB "
              f"({', '.join(f'{r.rss_mb:.1f}' for r in results)}); `import {sdk}` alone +{sdk_mb:.1f} MB; "
              f"the rest {rss - sdk_mb:.1f} MB; target: the rest <= {TARGET_REST_MB:.0f} MB{whole}")
        ok = ok and first - sdk_seconds <= TARGET_REST_S and rss - sdk_mb <= TARGET_REST_MB and \
            (sdk != "openai" or rss <= TARGET_OPENAI_MB)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-breakdown", action="store_true", help="only the two figures")
    parser.add_argument("--python", help="the interpreter of a virtualenv where the gateway is installed "
                        "(default: one made by `pip install .` from this checkout, in a scratch directory)")
    args = parser.parse_args()
    # The fake LLM's own complaint when a stopped gateway drops a background call it was still answering.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    sys.exit(asyncio.run(main(args.runs, not args.no_breakdown, args.python)))
