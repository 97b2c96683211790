"""`/status` lists the bot's most used skills with uses, successes, last use and tool calls saved per use."""

from __future__ import annotations

from datetime import UTC, datetime

from skills_kit import used_library


async def test_status_lists_the_used_skills_with_what_each_saves(engine, fake_llm, tmp_path):
    e = await engine()
    assert "Skills: none saved yet" in await e.say("/status")

    used_library(tmp_path / "skills" / "testbot", baseline=8, calls=[3], at=datetime(2026, 11, 30, 9, 15, tzinfo=UTC))
    lines = (await e.say("/status", chat="c2")).splitlines()
    at = lines.index("Skills: 2 saved, 1 used")
    assert lines[at + 1] == "- rotate-logs: 1 use, 1 ok, last used 2026-11-30 09:15 UTC, 5.0 tool calls saved per use"
    assert not any("renew-certs" in line for line in lines)  # unused skills are counted, not listed
