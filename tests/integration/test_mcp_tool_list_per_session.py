"""An MCP server's tool list is frozen per session, not per gateway: a change (`tools/list_changed`, a
server that comes up late, a different list after a restart) reaches the sessions that start after it,
and a session's requests keep the tool list they started with. Through the real gateway, the `mcp` SDK on
both sides (tests/fakes/mcp_server.py) and the fake LLM."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
LEGACY_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_legacy_server.py")


def stdio(env: dict[str, str]) -> dict[str, object]:
    """Unsandboxed: the server reads the files the test writes."""
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "env": env, "timeout": 20, "sandbox": False}


def listed(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [t["function"]["name"] for t in request.tools]


async def registered(e, name: str) -> None:  # type: ignore[no-untyped-def]
    """Wait (bounded) until the gateway's registry, which new sessions copy, has the tool."""
    for _ in range(600):
        if e.gateway.tools.get(name) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never reached the registry")


async def test_tools_list_changed_reaches_new_sessions_and_not_the_running_one(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": stdio({})}))
    fake_llm.script(Reply(tool_calls=[("fake__grow", {"name": "sprout"})]), Reply(text="grown"))
    assert await e.say("grow", chat="c1", timeout=30) == "grown"
    await registered(e, "fake__sprout")
    fake_llm.reset()
    fake_llm.script(Reply(text="same tools"), Reply(tool_calls=[("fake__sprout", {"text": "hi"})]), Reply(text="new"))
    assert await e.say("again", chat="c1", timeout=30) == "same tools"
    assert "fake__sprout" not in listed(fake_llm.requests[0]) and "fake__grow" in listed(fake_llm.requests[0])
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "new"
    assert "fake__sprout" in listed(fake_llm.requests[1])
    assert "sprout got: hi" in fake_llm.requests[2].messages[-1]["content"]
    fake_llm.reset()
    fake_llm.script(Reply(text="fresh"))
    await e.say("/new", chat="c1", timeout=30)
    assert await e.say("after new", chat="c1", timeout=30) == "fresh"
    assert "fake__sprout" in listed(fake_llm.requests[0])


async def test_a_server_that_comes_up_late_is_listed_from_the_next_session(engine, fake_llm, tmp_path):
    gate = tmp_path / "up"
    e = await engine(profile=make_profile(mcp_servers={"late": stdio({"FAKE_MCP_FAIL_UNLESS": str(gate)})}))
    fake_llm.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    assert await e.say("hi", chat="c1", timeout=30) == "one"
    assert not any(n.startswith("late__") for n in listed(fake_llm.requests[0]))
    gate.write_text("up", encoding="utf-8")
    await registered(e, "late__echo")
    assert await e.say("still here", chat="c1", timeout=30) == "two"
    assert not any(n.startswith("late__") for n in listed(fake_llm.requests[1]))
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "three"
    assert "late__echo" in listed(fake_llm.requests[2])


async def test_a_changed_list_after_a_restart_reaches_new_sessions(engine, fake_llm, tmp_path):
    extra, marker = tmp_path / "extra", tmp_path / "crashed"
    e = await engine(profile=make_profile(mcp_servers={"fake": stdio({"FAKE_MCP_EXTRA": str(extra)})}))
    extra.write_text("reborn\n", encoding="utf-8")  # read by the next process only
    fake_llm.script(Reply(tool_calls=[("fake__crash_once", {"marker": str(marker)})]), Reply(text="crashed"),
                    Reply(text="old list"), Reply(text="new list"))
    assert await e.say("crash", chat="c1", timeout=30) == "crashed"
    await registered(e, "fake__reborn")
    assert await e.say("again", chat="c1", timeout=30) == "old list"
    assert "fake__reborn" not in listed(fake_llm.requests[2])
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "new list"
    assert "fake__reborn" in listed(fake_llm.requests[3])


async def test_a_handshake_era_server_announcing_a_change_reaches_the_next_session(engine, fake_llm):
    legacy = {"command": sys.executable, "args": [LEGACY_SERVER], "timeout": 20}
    e = await engine(profile=make_profile(mcp_servers={"old": legacy}))
    fake_llm.script(Reply(tool_calls=[("old__grow", {"name": "sprout"})]), Reply(text="grown"),
                    Reply(text="same tools"), Reply(tool_calls=[("old__sprout", {"text": "hi"})]), Reply(text="new"))
    assert await e.say("grow", chat="c1", timeout=30) == "grown"
    assert "old__sprout" not in listed(fake_llm.requests[0])
    await registered(e, "old__sprout")  # only `notifications/tools/list_changed` tells the client
    assert await e.say("again", chat="c1", timeout=30) == "same tools"
    assert "old__sprout" not in listed(fake_llm.requests[2])
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "new"
    assert "old__sprout" in listed(fake_llm.requests[3])
    assert "sprout got: hi" in fake_llm.requests[4].messages[-1]["content"]
