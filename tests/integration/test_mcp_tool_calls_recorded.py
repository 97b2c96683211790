"""Each tool call is kept with the session (name, redacted arguments, result size, duration) and `/status`
counts them, through the real gateway, an MCP server over stdio and the fake LLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
SECRET = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9"


def fake_server() -> dict[str, object]:
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20}


async def test_each_tool_call_is_kept_with_redacted_arguments_size_and_duration(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake_server()}))
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": f"key {SECRET}"}), ("calculate", {"expression": "6*7"})]),
                    Reply(text="done"))
    assert await e.say("go", timeout=30) == "done"
    session = next(iter(e.gateway.sessions.values()))
    stored = {m.tool_name: m for m in await e.store.load_messages(session.record.id) if m.role == "tool"}
    echo, calc = stored["fake__echo"].meta["tool_call"], stored["calculate"].meta["tool_call"]
    assert SECRET not in echo["arguments"] and json.loads(echo["arguments"])["text"].startswith("key ")
    assert echo["result_chars"] == len(stored["fake__echo"].content) and echo["result_chars"] > len("fake says: key")
    assert isinstance(echo["duration_ms"], int) and echo["duration_ms"] >= 0
    assert json.loads(calc["arguments"]) == {"expression": "6*7"}
    assert calc["result_chars"] == len(stored["calculate"].content)


async def test_status_counts_this_sessions_tool_calls_by_name(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake_server()}))
    assert "Tools this session: no calls" in (await e.say("/status", timeout=30)).splitlines()
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": "a"}), ("calculate", {"expression": "1+1"}),
                                      ("calculate", {"expression": "2+2"})]),
                    Reply(tool_calls=[("calculate", {"expression": "3+3"})]), Reply(text="done"))
    assert await e.say("go", timeout=30) == "done"
    status = (await e.say("/status", timeout=30)).splitlines()
    assert "Tools this session: 4 calls — calculate ×3, fake__echo ×1" in status
    await e.say("/new", timeout=30)
    assert "Tools this session: no calls" in (await e.say("/status", timeout=30)).splitlines()
