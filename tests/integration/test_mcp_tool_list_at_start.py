"""A session freezes its tool list only once the MCP servers still in their first start came up, or the
profile's `mcp_start_wait_seconds` ran out: a message waiting when the gateway starts is answered with the
profile's tools, a server that is slower or failed is left out (the log and `/status` say so) and never
holds a turn up, and when every server is up or has failed nobody waits. Through a real `hermes-gateway run`
with Telegram, the real gateway in process, the `mcp` SDK on both sides (tests/fakes/mcp_server.py) and
the fake LLM."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import gateway_process

from hermes_engine.mcp.feature import McpFeature

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
ALICE = 4242
FOREVER = 3600.0  # a wait that, were it waited, would fail the test on its hang guard


def stdio(env: dict[str, str], **extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "env": env, "timeout": 20, **extra}


def listed(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [t["function"]["name"] for t in request.tools]


async def frozen(e: Engine, chat: str = "c1") -> list[str]:
    """The tool names the chat's session froze, as the store keeps them."""
    assert e.gateway is not None and e.store is not None
    session = e.gateway.session(e.gateway.session_key(e.message("", chat=chat)))
    assert session is not None
    text = await e.store.get_tool_list(session.record.state["tools"])
    assert text is not None
    return [tool["name"] for tool in json.loads(text)]


def write_bot(folder: Path, servers: dict[str, object], wait: float) -> Path:
    folder.mkdir()
    profile = {"name": "mcp-at-start", "model": "openai:gpt-test", "toolsets": ["core"], "streaming": False,
               "access": {"allowed_users": [str(ALICE)], "pairing": False},
               "platforms": {"telegram": {"mode": "polling"}},
               "mcp_servers": servers, "mcp_start_wait_seconds": wait}
    (folder / "profile.yaml").write_text(yaml.safe_dump(profile), encoding="utf-8")
    return folder


def frozen_in(db: Path) -> list[list[str]]:
    """Each session's frozen tool names, read as another process would."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        lists = dict(conn.execute("SELECT fingerprint, text FROM tool_lists").fetchall())
        states = [json.loads(row[0]) for row in conn.execute("SELECT state FROM sessions ORDER BY id")]
    return [[tool["name"] for tool in json.loads(lists[state["tools"]])] for state in states]


async def test_a_dm_waiting_when_the_gateway_starts_is_answered_with_the_tools_of_a_server_still_starting(
        fake_llm, tmp_path):
    fake_llm.script(Reply(text="Answered with every tool."))
    bot = write_bot(tmp_path / "bot", {"slow": stdio({"FAKE_MCP_START_DELAY": "1.5"})}, wait=60)
    async with FakeTelegram() as telegram:
        telegram.user_says(ALICE, ALICE, "hello")  # waiting before the gateway runs: taken at its start
        env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path), "HERMES_FALLBACK_MODELS": "",
               "HERMES_HTTP_PORT": "0", "TELEGRAM_BOT_TOKEN": telegram.token,
               "TELEGRAM_API_BASE_URL": telegram.base_url}
        async with gateway_process(bot, env):
            await telegram.wait_for_text(ALICE, "Answered with every tool.", timeout=60)
    assert "slow__echo" in listed(fake_llm.requests[0])
    [session_tools] = frozen_in(tmp_path / "hermes.db")
    assert "slow__echo" in session_tools


async def test_a_session_waits_for_a_server_still_starting_but_not_for_one_that_failed(engine, fake_llm):
    servers = {"slow": stdio({"FAKE_MCP_START_DELAY": "1.5"}), "broken": stdio({"FAKE_MCP_FAIL": "1"})}
    e = await engine(profile=make_profile(mcp_servers=servers, mcp_start_wait_seconds=FOREVER), adapters_first=True)
    fake_llm.script(Reply(text="answered"))
    assert await e.say("hi", timeout=60) == "answered"
    assert "slow__echo" in listed(fake_llm.requests[0])
    assert not any(name.startswith("broken__") for name in listed(fake_llm.requests[0]))
    assert "slow__echo" in await frozen(e)
    status = await e.say("/status", timeout=30)
    [note] = [line for line in status.splitlines() if line.startswith("Tools: this conversation")]
    assert note.startswith("Tools: this conversation started without the tools of MCP server broken (")
    assert "slow" not in note


async def test_a_server_not_up_within_the_wait_is_left_out_and_the_session_says_so(engine, fake_llm, caplog):
    caplog.set_level(logging.WARNING, logger="hermes_engine.core.tool_lists")
    slow = stdio({"FAKE_MCP_START_DELAY": "600"}, start_timeout=900)
    e = await engine(profile=make_profile(mcp_servers={"slow": slow}, mcp_start_wait_seconds=0.5),
                     adapters_first=True)
    fake_llm.script(Reply(text="without it"))
    assert await e.say("hi", timeout=30) == "without it"
    assert e.starting is not None and not e.starting.done()  # the gateway still waits for the server
    assert not any(name.startswith("slow__") for name in listed(fake_llm.requests[0]))
    assert not any(name.startswith("slow__") for name in await frozen(e))
    said = [r.getMessage() for r in caplog.records if r.name == "hermes_engine.core.tool_lists"]
    assert len(said) == 1 and "starts without the tools of MCP server slow (still starting)" in said[0], said
    status = await e.say("/status", timeout=30)
    assert ("Tools: this conversation started without the tools of MCP server slow (still starting); /new "
            "starts one with them once they are up.") in status


async def test_a_session_that_starts_when_every_server_is_up_or_failed_does_not_wait(engine, fake_llm):
    servers = {"fake": stdio({}), "broken": stdio({"FAKE_MCP_FAIL": "1"})}
    e = await engine(profile=make_profile(mcp_servers=servers, mcp_start_wait_seconds=FOREVER))
    fake_llm.script(Reply(text="at once"), Reply(text="again at once"))
    assert await e.say("hi", timeout=30) == "at once"
    assert await e.say("hello", chat="c2", user="u2", timeout=30) == "again at once"
    assert all("fake__echo" in listed(request) for request in fake_llm.requests)
    assert e.gateway is not None
    feature = next(f for f in e.gateway.features if isinstance(f, McpFeature))
    settling = feature.settle_tools()
    with pytest.raises(StopIteration) as settled:  # done at its first step: it never gave the loop a turn
        settling.send(None)
    assert [phrase.split(" (")[0] for phrase in settled.value.value] == ["MCP server broken"]
