"""MCP tools a profile marks as acting on the world (`approval`, `approve_tools`) wait for an approver,
through the terminal's approval gate: an approved call reaches the server, a denied one never does and the
model reads why. Through the real gateway as `build_features` wires it, the `mcp` SDK on both sides
(tests/fakes/mcp_server.py records the calls it received) and the fake LLM."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.config import Settings
from hermes_engine.ports.approval import Decision
from hermes_gateway.wiring import build_features

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
ADMIN = "boss"


class Asker:
    """Shows nothing; the test answers what was asked (as a person pressing a button would)."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue = asyncio.Queue()

    def take_presses(self, answers) -> None:
        return None  # the test answers through what `ask` was given

    async def ask(self, request, answers) -> None:  # type: ignore[no-untyped-def]
        self.asked.put_nowait((request, answers))

    async def settled(self, request, decision, note) -> None:  # type: ignore[no-untyped-def]
        return None


def last_result(request) -> str:  # type: ignore[no-untyped-def]
    return [m["content"] for m in request.messages if m["role"] == "tool"][-1]


async def started(engine, tmp_path: Path, asker: Asker, **server: object):  # type: ignore[no-untyped-def]
    calls = tmp_path / "calls"
    settings = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20,
                "env": {"FAKE_MCP_CALLS": str(calls)}, "sandbox": False, **server}  # it writes beside the test
    profile = make_profile(mcp_servers={"fake": settings}, access={"admins": [ADMIN]})
    features = build_features(Settings(home=tmp_path), profile, asker=asker)
    return await engine(profile=profile, features=features), calls


def received(calls: Path) -> list[str]:
    return calls.read_text(encoding="utf-8").split() if calls.exists() else []


async def test_an_approved_call_reaches_the_server_and_a_denied_one_never_does(engine, fake_llm, tmp_path):
    asker = Asker()
    e, calls = await started(engine, tmp_path, asker, approve_tools=["echo"])
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": "approved"})]), Reply(text="sent"),
                    Reply(tool_calls=[("fake__echo", {"text": "refused"})]), Reply(text="not sent"))
    first = asyncio.ensure_future(e.say("send it", user=ADMIN, timeout=30))
    request, answers = await asyncio.wait_for(asker.asked.get(), 20)
    assert request.risk == "mcp:fake/echo" and request.question == "Call this tool?" and '"approved"' in request.command
    assert received(calls) == []  # nothing reaches the server while the approver has not answered
    assert answers.answer(request.id, "stranger", Decision.ONCE) is False
    assert answers.answer(request.id, ADMIN, Decision.ONCE) is True
    assert await first == "sent"
    assert "fake says: approved" in last_result(fake_llm.requests[1])

    second = asyncio.ensure_future(e.say("send another", user=ADMIN, timeout=30))
    request, answers = await asyncio.wait_for(asker.asked.get(), 20)
    assert answers.answer(request.id, ADMIN, Decision.DENY) is True
    assert await second == "not sent"
    denied = last_result(fake_llm.requests[3])
    assert denied.startswith("Error: Denied: MCP server fake, tool echo was not called") and "denied by boss" in denied
    assert received(calls) == ["approved"]


async def test_approval_for_the_session_lets_later_calls_through_and_other_tools_never_ask(engine, fake_llm,
                                                                                           tmp_path):
    asker = Asker()
    e, calls = await started(engine, tmp_path, asker, approval="always")
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": "one"})]), Reply(text="first"),
                    Reply(tool_calls=[("fake__echo", {"text": "two"})]), Reply(text="second"))
    first = asyncio.ensure_future(e.say("send", user=ADMIN, timeout=30))
    request, answers = await asyncio.wait_for(asker.asked.get(), 20)
    assert answers.answer(request.id, ADMIN, Decision.SESSION) is True
    assert await first == "first"
    assert await e.say("again", user=ADMIN, timeout=30) == "second"  # not asked again in this session
    assert asker.asked.empty() and received(calls) == ["one", "two"]


async def test_a_tool_not_marked_is_called_without_asking(engine, fake_llm, tmp_path):
    asker = Asker()
    e, calls = await started(engine, tmp_path, asker, approve_tools=["env_var"])
    fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": "free"})]), Reply(text="done"))
    assert await e.say("send", user=ADMIN, timeout=30) == "done"
    assert asker.asked.empty() and received(calls) == ["free"]
