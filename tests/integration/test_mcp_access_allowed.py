"""A server whose tools only the bot's allowed people may call (`access: {people: allowed}`): listed people,
people approved through pairing and admins call them, anyone else the bot answers (a Slack workspace member let in by membership, say) gets
a tool error. Through the real gateway, the `mcp` SDK and the fake LLM."""

from __future__ import annotations

import sys
from pathlib import Path

from engine_harness import make_profile
from fakes.fake_llm import Reply

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
REFUSED = "Error: the tools of fake may be used by the people the bot allows only."


def profile():  # type: ignore[no-untyped-def]
    server = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20,
              "access": {"people": "allowed"}}
    return make_profile(mcp_servers={"fake": server}, access={"allowed_users": ["friend"], "admins": ["boss"]})


def results(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def test_allowed_people_and_admins_call_the_tools_and_others_are_refused(engine, fake_llm):
    e = await engine(profile=profile())
    e.gateway.access.pairing.approve_user("test", "paired")  # what `hermes-gateway pairing approve` does
    for user, chat in (("friend", "c1"), ("boss", "c2"), ("paired", "c3"), ("member", "c4")):
        fake_llm.script(Reply(tool_calls=[("fake__echo", {"text": user})]), Reply(text=f"done {user}"))
        assert await e.say("go", user=user, chat=chat, timeout=30) == f"done {user}"
    friend, boss, paired, member = (results(fake_llm.requests[i])[-1] for i in (1, 3, 5, 7))
    assert "fake says: friend" in friend and "fake says: boss" in boss and "fake says: paired" in paired
    assert member == REFUSED
