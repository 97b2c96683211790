"""A terminal procedure becomes a skill: the background review after a turn of several commands sees the
commands and their results with the instruction to save such procedures, and the skill it writes names
the tools it used; skill_view and the hints know which of those tools this bot has."""

from __future__ import annotations

import json

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.skills.model import parse_skill

ADMIN = "admin1"
REVIEW = "[Background review"
SKILL = """---
name: build-and-run-report
description: Write report.py in the workspace and run it with python3.
tools: [terminal, write_file]
---

## When to use
The person wants a small Python report built and run.

## Steps
1. write_file report.py
2. terminal: python3 report.py

## Pitfalls
- Running it before the file exists fails with "No such file".
"""


def profile(toolsets=("core", "terminal", "files", "skills"), **overrides):
    base = dict(toolsets=list(toolsets), access={"admins": [ADMIN]}, workspace={"approve": []},
                review={"memory_every_turns": 0, "skill_every_iterations": 3}, skills={"curator_every_days": 0})
    return make_profile(**{**base, **overrides})


def since_user(request) -> list[dict]:
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[last_user + 1:]


def calls_in(messages) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]


async def test_the_review_of_a_terminal_turn_saves_the_procedure_with_its_tools(engine, fake_llm):
    e = await engine(profile=profile())
    steps = [("terminal", {"command": "python3 report.py"}),
             ("write_file", {"path": "report.py", "content": "print('total', 6 * 7)\n"}),
             ("terminal", {"command": "python3 report.py"})]
    reviews = []

    def respond(request):
        if REVIEW in request.last_user_text:
            reviews.append(request)
            if since_user(request):
                return Reply(text="Saved.")
            return Reply(tool_calls=[("skill_manage", {"action": "create", "name": "build-and-run-report",
                                                       "content": SKILL, "category": "devops"})])
        done = sum(1 for m in since_user(request) if m["role"] == "assistant")
        if done < len(steps):
            return Reply(tool_calls=[steps[done]])
        return Reply(text="The report says: total 42")

    fake_llm.responder = respond
    assert await e.say("build me a report script and run it", user=ADMIN) == "The report says: total 42"
    await e.idle(30)
    review = reviews[0]
    assert calls_in(review.messages) == steps  # the turn's commands, in order, reach the review
    results = [m["content"] for m in review.messages if m["role"] == "tool"]
    assert "No such file" in results[0] and results[-1] == "total 42\n[exit code 0]"
    assert "multi-step terminal or file procedure" in review.last_user_text
    assert "tools: [terminal" in review.last_user_text
    saved = (e.home / "skills" / "testbot" / "devops" / "build-and-run-report" / "SKILL.md").read_text()
    assert parse_skill(saved).tools == ("terminal", "write_file")


async def test_skill_view_flags_tools_the_bot_lacks_and_hints_skip_that_skill(engine, fake_llm):
    e = await engine(profile=profile(toolsets=("core", "skills")))
    folder = e.home / "skills" / "testbot" / "devops" / "build-and-run-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    fake_llm.script(Reply(tool_calls=[("skill_view", {"name": "build-and-run-report"})]), Reply(text="seen"))
    assert await e.say("build and run a python report script", user=ADMIN) == "seen"
    first, second = fake_llm.requests[-2:]
    assert "Skills that may fit" not in first.last_user_text
    viewed = [m["content"] for m in since_user(second) if m["role"] == "tool"][0]
    assert "[this bot has no terminal, write_file: the steps that call them cannot run here]" in viewed


async def test_hints_name_the_tools_of_a_skill_the_bot_can_run(engine, fake_llm):
    e = await engine(profile=profile(review={"memory_every_turns": 0, "skill_every_iterations": 0}))
    folder = e.home / "skills" / "testbot" / "devops" / "build-and-run-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    fake_llm.script(Reply(text="ok"))
    await e.say("build and run a python report script", user=ADMIN)
    assert "build-and-run-report (uses terminal, write_file)" in fake_llm.requests[-1].last_user_text
