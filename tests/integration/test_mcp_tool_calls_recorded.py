"""Each tool call is kept with the session (name, redacted arguments, result size, duration), its arguments
and result are stored without secrets, and `/status` counts the calls, through the real gateway, an MCP
server over stdio and the fake LLM."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.secrets import REDACTED

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
SECRET = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9"
RESULT_SECRET = "ghp_" + "Zq8Lm3Np7Rt2Vx6Bc9Df4Gh1Jk5Ws0Ye8Ua"  # only the server knows it


def fake_server(**env: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20, "env": env}


def stored_rows(home: Path) -> str:
    """Every row of the messages table, as another process reads the database."""
    with sqlite3.connect(f"file:{home / 'hermes.db'}?mode=ro", uri=True, timeout=5) as conn:
        return repr(conn.execute("SELECT * FROM messages").fetchall())


async def test_each_tool_call_is_kept_with_redacted_arguments_size_and_duration(engine, fake_llm):
    e = await engine(profile=make_profile(mcp_servers={"fake": fake_server()}))
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": f"key {SECRET}"}), ("calculate", {"expression": "6*7"}),
                                      ("fake__hang", {"seconds": 0.3})]),
                    Reply(text="done"))
    assert await e.say("go", timeout=30) == "done"
    session = next(iter(e.gateway.sessions.values()))
    stored = {m.tool_name: m for m in await e.store.load_messages(session.record.id) if m.role == "tool"}
    echo, calc = stored["fake__echo"].meta["tool_call"], stored["calculate"].meta["tool_call"]
    assert SECRET not in echo["arguments"] and json.loads(echo["arguments"])["text"].startswith("key ")
    # the size of the result the tool returned, before its secret gave way to the shorter marker
    assert echo["result_chars"] == len(stored["fake__echo"].content) - len(REDACTED) + len(SECRET)
    assert isinstance(echo["duration_ms"], int)
    assert stored["fake__hang"].meta["tool_call"]["duration_ms"] >= 300  # the time the server took
    assert json.loads(calc["arguments"]) == {"expression": "6*7"}
    assert calc["result_chars"] == len(stored["calculate"].content)


async def test_secrets_in_tool_arguments_and_results_are_stored_redacted_and_the_turn_still_works(
        engine, fake_llm, tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("FAKE_SERVICE_TOKEN", RESULT_SECRET)
    server = fake_server(FAKE_MCP_CALLS=str(calls), SERVICE_TOKEN="${FAKE_SERVICE_TOKEN}")
    e = await engine(profile=make_profile(mcp_servers={"fake": {**server, "sandbox": False}}))  # writes `calls`
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": f"key {SECRET}"}),
                                      ("fake__env_var", {"name": "SERVICE_TOKEN"})]),
                    Reply(text="both done"))
    assert await e.say("go", timeout=30) == "both done"
    assert calls.read_text(encoding="utf-8") == f"key {SECRET}\n"  # the tool ran with what the model wrote
    session = next(iter(e.gateway.sessions.values()))
    stored = await e.store.load_messages(session.record.id)
    assistant = next(m for m in stored if m.tool_calls)
    assert json.loads(assistant.tool_calls[0].arguments) == {"text": f"key {REDACTED}"}
    results = {m.tool_name: m.content for m in stored if m.role == "tool"}
    assert f"fake says: key {REDACTED}" in results["fake__echo"] and f"\n{REDACTED}\n" in results["fake__env_var"]
    for secret in (SECRET, RESULT_SECRET):
        assert secret not in stored_rows(e.home)
    # the live session keeps what the tool returned: the model can use what it just read
    assert RESULT_SECRET in json.dumps(fake_llm.requests[1].messages)


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
