"""A session's frozen tool list is kept in the store: a session evicted from memory, or loaded by the next
process after a restart, lists the same tools byte for byte although the servers now offer others, and a
tool that has since disappeared answers with a clear error. Through the real gateway, the `mcp` SDK on both
sides (tests/fakes/mcp_server.py), the fake LLM, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import BACKENDS, empty_database

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")


def stdio(env: dict[str, str]) -> dict[str, object]:
    """Unsandboxed: the server reads the files the test writes."""
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "env": env, "timeout": 20, "sandbox": False}


def tools_json(request) -> str:  # type: ignore[no-untyped-def]
    return json.dumps(request.tools)


def listed(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [t["function"]["name"] for t in request.tools]


async def registered(e, name: str, present: bool = True) -> None:  # type: ignore[no-untyped-def]
    for _ in range(600):
        if (e.gateway.tools.get(name) is not None) == present:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never {'reached' if present else 'left'} the registry")


@pytest.fixture(params=BACKENDS)
async def database(request, tmp_path):
    async with empty_database(request.param, str(tmp_path / "tools.db")) as found:
        yield found


async def test_an_evicted_session_lists_the_tools_it_started_with(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_MAX_LIVE_SESSIONS", "1")
    e = await engine(profile=make_profile(mcp_servers={"fake": stdio({})}))
    fake_llm.script(Reply(tool_calls=[("fake__grow", {"name": "sprout"})]), Reply(text="grown"),
                    Reply(text="other chat"), Reply(text="back"))
    assert await e.say("grow", chat="c1", timeout=30) == "grown"
    await registered(e, "fake__sprout")
    await e.idle()  # c1's lane has finished its turn, so c1 may leave memory
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "other chat"
    assert "fake__sprout" in listed(fake_llm.requests[2])
    assert len(e.gateway.sessions) == 1  # c1 left memory to make room for c2
    assert await e.say("again", chat="c1", timeout=30) == "back"
    assert tools_json(fake_llm.requests[3]) == tools_json(fake_llm.requests[0])


async def test_after_a_restart_a_session_lists_its_tools_and_a_vanished_one_says_so(
        engine, fake_llm, tmp_path, database):
    extra = tmp_path / "extra"
    extra.write_text("fleeting\n", encoding="utf-8")
    profile = make_profile(mcp_servers={"fake": stdio({"FAKE_MCP_EXTRA": str(extra)})})
    first = await engine(profile=profile, database=database, home=tmp_path / "one")
    fake_llm.script(Reply(tool_calls=[("fake__fleeting", {"text": "hi"})]), Reply(text="used it"))
    assert await first.say("use it", chat="c1", timeout=30) == "used it"
    assert "fleeting got: hi" in fake_llm.requests[1].messages[-1]["content"]
    before = tools_json(fake_llm.requests[0])
    await first.stop()

    extra.write_text("newcomer\n", encoding="utf-8")  # the next server process offers another tool
    fake_llm.reset()
    second = await engine(profile=profile, database=database, home=tmp_path / "two")
    await registered(second, "fake__newcomer")
    fake_llm.script(Reply(tool_calls=[("fake__fleeting", {"text": "again"})]), Reply(text="gone"),
                    Reply(text="new chat"))
    assert await second.say("use it again", chat="c1", timeout=30) == "gone"
    assert tools_json(fake_llm.requests[0]) == before
    result = fake_llm.requests[1].messages[-1]["content"]
    assert "fake__fleeting is no longer available" in result and "fleeting got" not in result
    assert await second.say("hello", chat="c2", user="u2", timeout=30) == "new chat"
    assert "fake__newcomer" in listed(fake_llm.requests[2]) and "fake__fleeting" not in listed(fake_llm.requests[2])
