"""`/status` lists the bot's most used skills with uses, successes, last use and tool calls saved per use."""

from __future__ import annotations

from datetime import UTC, datetime

from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.usage import UsageLog

SKILL = "---\nname: {n}\ndescription: Do {n}.\n---\n\n## When to use\nx\n\n## Steps\n1. y\n\n## Pitfalls\n- z\n"


async def test_status_lists_the_used_skills_with_what_each_saves(engine, fake_llm, tmp_path):
    e = await engine()
    assert "Skills: none saved yet" in await e.say("/status")

    root = tmp_path / "skills" / "testbot"
    library = FileSkillLibrary(root)
    for name in ("rotate-logs", "renew-certs"):
        library.apply_sync(SkillChange("create", name, content=SKILL.format(n=name)))
    log = UsageLog.for_library(root)
    log.set_baseline(["rotate-logs", "renew-certs"], 8)
    log.record_turn({"rotate-logs": 1}, calls=3, at=datetime(2026, 11, 30, 9, 15, tzinfo=UTC))

    lines = (await e.say("/status", chat="c2")).splitlines()
    at = lines.index("Skills: 2 saved, 1 used")
    assert lines[at + 1] == "- rotate-logs: 1 use, 1 ok, last used 2026-11-30 09:15 UTC, 5.0 tool calls saved per use"
    assert not any("renew-certs" in line for line in lines)  # unused skills are counted, not listed
