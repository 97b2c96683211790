"""MCP benchmark: what attaching MCP servers costs.

- First-request tokens (the fake LLM counts request body bytes / 4, as a provider's input tokens) of the
  default toolset alone, then with two typical servers attached (the published `mcp-server-time` and the
  test server, 13 tools in all) at the default schema budget, and with a budget of 0 (everything compact).
  Target: at most 3,000 tokens with the two servers.
- Per-call overhead: the mean wall time of a `fake__echo` call as the agent loop makes it (the bot's tool
  registry, the feature's untrusted marking and size cap, the gateway's server manager, then the redaction
  of the arguments and the result the store keeps) against the server's own round trip through a bare
  SDK `Client`, and the characters the untrusted marking adds to each result.
- Start and stop of the test server (median of five, to its listed tools and back to nothing left): with
  `sandbox: false`, in the sandbox (through the launcher: cgroup, bwrap), and with `network: true`
  (slirp4netns too); and the memory (RSS) the launcher holds beside each sandboxed server.

    python tests/bench/mcp_bench.py [--calls 200]
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
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from hermes_engine.agent.tool_record import as_kept  # noqa: E402
from hermes_engine.config import BotProfile, Settings  # noqa: E402
from hermes_engine.ports.conversation import Message, ToolCall  # noqa: E402
from hermes_engine.ports.tools import ToolContext  # noqa: E402
from hermes_gateway.mcp.launch import MODULE  # noqa: E402
from hermes_gateway.mcp.manager import ServerManager  # noqa: E402
from hermes_gateway.wiring import server_sandbox  # noqa: E402

FAKE_SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py")
SERVERS = {"time": {"command": "mcp-server-time"},
           "fake": {"command": sys.executable, "args": [FAKE_SERVER, "stdio"]}}
TARGET_TOKENS = 3000


def default_profile(**overrides: object) -> BotProfile:
    profile = make_profile(**overrides)
    return profile.model_copy(update={"toolsets": BotProfile().toolsets})  # the shipped default toolset


async def first_request(fake: FakeLLM, home: Path, profile: BotProfile) -> tuple[int, int, Engine]:
    fake.reset()
    engine = await Engine(home, profile).start()
    fake.script(Reply(text="hello"))
    await engine.say("hi", timeout=60)
    request = fake.requests[0]
    return request_tokens(request.body), len(request.tools), engine


def request_tokens(body: dict[str, object]) -> int:
    """As the fake LLM counts input tokens: the request body's bytes / 4."""
    return len(json.dumps(body, separators=(",", ":")).encode()) // 4


def kept(call: ToolCall, result: str) -> tuple[str, str]:
    """What the store keeps of a call: its arguments and its result, redacted as the agent loop does."""
    calls = as_kept(Message(role="assistant", content="", tool_calls=(call,))).tool_calls
    return calls[0].arguments, as_kept(Message(role="tool", content=result, tool_call_id=call.id)).content


async def per_call(engine: Engine, calls: int) -> tuple[float, float, int]:
    """Mean seconds per call as the agent loop makes it and through a bare SDK client, in alternating
    rounds (so neither side gets the warmer process), and the characters the untrusted marking adds."""
    assert engine.gateway is not None
    tools = engine.gateway.tools
    assert tools.get("fake__echo") is not None, "fake__echo is listed in full at the default budget"
    ctx = ToolContext(bot="bench", session_id=1, session_key="bench")
    params = StdioServerParameters(command=sys.executable, args=[FAKE_SERVER, "stdio"])
    through = bare = 0.0
    rounds = 4
    async with Client(params, cache=None) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            for i in range(calls // rounds):
                call = ToolCall(f"call_{i}", "fake__echo", json.dumps({"text": f"call {i}"}))
                _, content = kept(call, (await tools.call(call, ctx)).content)
            through += time.perf_counter() - started
            started = time.perf_counter()
            for i in range(calls // rounds):
                await client.call_tool("echo", {"text": f"call {i}"})
            bare += time.perf_counter() - started
    marking = len(content) - len(f"fake says: call {calls // rounds - 1}")
    done = rounds * (calls // rounds)
    return through / done, bare / done, marking


def launcher_rss_kib() -> int:
    """The RSS of this process's MCP launchers (one server runs), read from /proc."""
    total = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MODULE.encode() in (entry / "cmdline").read_bytes() and \
                    int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == os.getpid():
                total += int((entry / "status").read_text().split("VmRSS:")[1].split()[0])
        except (OSError, IndexError):
            continue
    return total


async def start_stop(home: Path, settings: dict[str, object], rounds: int = 5) -> tuple[float, float, int]:
    """Median seconds to start the server (its tools listed) and to stop it, and the launcher's RSS."""
    profile = BotProfile(name="bench", mcp_servers={"fake": settings})
    starts, stops, rss = [], [], 0
    for _ in range(rounds):
        manager = ServerManager(profile.mcp_servers, server_sandbox(Settings(home=home), profile))
        started = time.perf_counter()
        await manager.start()
        starts.append(time.perf_counter() - started)
        assert manager.tools(), manager.not_ready()
        rss = launcher_rss_kib()
        started = time.perf_counter()
        await manager.stop()
        stops.append(time.perf_counter() - started)
    return statistics.median(starts), statistics.median(stops), rss


async def main(calls: int) -> int:
    fake = await FakeLLM().start()
    os.environ.update(fake_llm_environment(fake))
    engines: list[Engine] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for label, profile in [
                ("default toolset, no MCP", default_profile()),
                ("+ time + fake servers (budget 1500)", default_profile(mcp_servers=SERVERS)),
                ("+ time + fake servers (budget 0: compact)", default_profile(mcp_servers=SERVERS,
                                                                              mcp_schema_budget=0)),
            ]:
                tokens, tools, engine = await first_request(fake, Path(tmp) / str(len(rows)), profile)
                engines.append(engine)
                rows.append((label, tokens, tools))
            for label, tokens, tools in rows:
                print(f"first request, {label}: {tokens:,} tokens, {tools} tools")
            through, bare, marking = await per_call(engines[1], calls)
            print(f"per call ({calls} calls of fake__echo): {through * 1000:.2f} ms through the gateway, "
                  f"{bare * 1000:.2f} ms bare SDK client, overhead {(through - bare) * 1000:.2f} ms; "
                  f"untrusted marking adds {marking} characters (~{marking // 4} tokens) per result")
            worst = max(tokens for label, tokens, _ in rows[1:])
            ok = worst <= TARGET_TOKENS
            print(f"target: first request with two servers <= {TARGET_TOKENS:,} tokens: {'met' if ok else 'MISSED'}")
            for engine in engines:
                await engine.stop()
            engines.clear()
            fake_server = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"]}
            for label, settings in [("sandbox: false", {**fake_server, "sandbox": False}),
                                    ("sandboxed", fake_server), ("sandboxed, network: true",
                                                                 {**fake_server, "network": True})]:
                start, stop, rss = await start_stop(Path(tmp) / "servers", settings)
                print(f"server start / stop, {label}: {start:.2f} s / {stop:.2f} s"
                      + (f"; the launcher holds {rss / 1024:.0f} MB" if rss else ""))
            return 0 if ok else 1
    finally:
        for engine in engines:
            await engine.stop()
        await fake.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    sys.exit(asyncio.run(main(parser.parse_args().calls)))
