"""A profile with `mcp_servers` gives the agent those tools on every platform: the real Telegram, Slack and
Discord adapters against their fakes, each in front of a gateway whose profile names the small SDK MCP
server (stdio). The model calls the server's echo tool and answers from its result; the person sees that
answer in a DM."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from dm_kit import DMS
from engine_harness import make_profile
from fakes.fake_llm import Reply

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")
ANSWER = "The server answered: fake says: hello from every platform"

# python-telegram-bot warns about its own RetryAfter.retry_after type change when it builds the error.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def respond(request: Any) -> Reply:
    """Call the server's echo tool, then answer with the line it said."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if results:
        said = next((line for line in results[0].splitlines() if "says:" in line), results[0])
        return Reply(text=f"The server answered: {said}")
    return Reply(tool_calls=[("fake__echo", {"text": "hello from every platform"})])


def profile_for(person: str) -> Any:
    server = {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "timeout": 20}
    return make_profile(mcp_servers={"fake": server}, access={"allowed_users": [person], "pairing": False})


@pytest.mark.parametrize("platform", list(DMS))
async def test_the_profiles_mcp_tools_answer_the_person_on_every_platform(platform, engine, fake_llm, monkeypatch):
    fake_llm.responder = respond
    async with DMS[platform](engine, monkeypatch, profile_for) as dm:
        await dm.say("ask the server to say hello")
        await dm.shown(ANSWER)
    tool_calls = [c["function"]["name"] for r in fake_llm.requests for m in r.messages
                  for c in m.get("tool_calls") or ()]
    assert tool_calls == ["fake__echo"]
    assert "fake__echo" in [t["function"]["name"] for t in fake_llm.requests[0].tools]
