"""Adminship through the real engine: a platform's role reported outside a place the operator listed opens
no admin-only command, no admin-only tool and no exemption from the daily limit; in a listed place it opens
all three, as `access.admins` does anywhere."""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.ports.commands import Command
from hermes_engine.ports.inbound import ChatKind

REFUSED = "Only an admin of this bot can use that command."
NO_FILES = "Error: only an admin of this bot can use the workspace tools."


async def admin_secret(ctx) -> str:
    return "the admin secret"


def write_then_done(request: Any) -> Reply:
    if request.turn_tool_results:
        return Reply(text="done")
    return Reply(tool_calls=[("write_file", {"path": "note.txt", "content": "hi"})])


@pytest.mark.parametrize("facts, admin", [
    ({"platform_admin": True, "place_listed": False}, False),
    ({"platform_admin": True, "place_listed": True}, True),
    ({"user": "boss"}, True),
], ids=["a role in a place nobody listed", "a role in a listed place", "named by the operator"])
async def test_one_decision_opens_admin_commands_admin_tools_and_the_limit_exemption(engine, fake_llm, facts, admin):
    fake_llm.responder = write_then_done
    e = await engine(profile=make_profile(toolsets=["core", "files"], access={"admins": ["boss"]},
                                          limits={"turns_per_day": 1}))
    assert e.gateway is not None
    e.gateway.commands.add(Command("secret", "admins only", admin_secret, admin_only=True))
    said = {"user": "eve", "kind": ChatKind.CHANNEL, **facts}

    assert await e.say("/secret", **said) == ("the admin secret" if admin else REFUSED)
    assert await e.say("write a note", **said) == "done"
    assert fake_llm.requests[-1].turn_tool_results[-1].startswith("Wrote" if admin else NO_FILES)
    second = await e.say("and another", **said)
    assert (second == "done") is admin and ("daily limit of 1 turn" in second) is not admin
