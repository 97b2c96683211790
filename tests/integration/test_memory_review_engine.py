"""The real background review is a guest in a person's memory: its removal is staged, the person decides."""

from __future__ import annotations

from engine_harness import make_profile
from fakes.fake_llm import Reply

RULE = "Never deploy on Fridays."


async def test_a_removal_by_the_review_waits_for_the_person(engine, fake_llm):
    e = await engine(profile=make_profile(review={"memory_every_turns": 1, "skill_every_iterations": 0}))
    reviewed: list[str] = []

    def respond(request):
        if "[Background review" in request.last_user_text:
            if any(m["role"] == "tool" for m in request.messages[-2:]):
                reviewed.append(request.messages[-1]["content"])
                return Reply(text="Done.")
            return Reply(tool_calls=[("memory", {"action": "remove", "target": "memory", "old_text": "Fridays"})])
        if "remember" in request.last_user_text:
            if any(m["role"] == "tool" for m in request.messages[-2:]):
                return Reply(text="noted")
            return Reply(tool_calls=[("memory", {"action": "add", "target": "memory", "content": RULE})])
        return Reply(text="answer")

    fake_llm.responder = respond
    await e.say(f"remember: {RULE}")
    await e.idle()
    assert reviewed and "Staged for the person" in reviewed[0]

    listing = await e.say("/memory")
    assert RULE in listing and "1 change(s) proposed by the background review" in listing
    assert f'1. MEMORY.md: remove "{RULE}"' in await e.say("/memory pending")
    assert "Applied change 1" in await e.say("/memory apply 1")
    assert RULE not in await e.say("/memory")
