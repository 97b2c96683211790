"""SkillsFeature: tools through services, frozen index, hints, usage from turns, commands, approval, scheduling."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from hermes_engine.core.scheduler import Scheduler
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.feature import TurnOutcome
from hermes_engine.ports.metrics import NO_METRICS
from hermes_engine.ports.services import Services
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.tools import ToolContext
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.tools.registry import ToolRegistry


def skill_md(name: str, description: str, when: str = "When it fits.", tags: str = "[]") -> str:
    return (f"---\nname: {name}\ndescription: {description}\ntags: {tags}\n---\n\n## When to use\n{when}\n\n"
            f"## Steps\n1. Go\n\n## Pitfalls\n- Careful\n")


def scope(session_id: int = 1, bot: str = "helper") -> SessionScope:
    return SessionScope(bot=bot, session_id=session_id, session_key=f"dm:{session_id}", chat_kind="dm")


@pytest.fixture
def feature(tmp_path: Path) -> SkillsFeature:
    return SkillsFeature(tmp_path / "skills", bot="helper", curator_interval_seconds=None)


async def create(feature: SkillsFeature, name: str, description: str, **kw: str) -> None:
    await feature.raw_library().apply(SkillChange("create", name, content=skill_md(name, description, **kw),
                                                  category="devops"))


def turn(*messages: Message, failed: bool = False, session_id: int = 1) -> TurnOutcome:
    return TurnOutcome(scope=scope(session_id), person_id=7, new_messages=list(messages), tool_calls=1,
                       tool_iterations=1, failed=failed)


def view_call(name: str) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall("c1", "skill_view", json.dumps({"name": name})),))


def command_ctx(feature: SkillsFeature, args: str, *, admin: bool) -> CommandContext:
    return CommandContext(host=SimpleNamespace(bot="helper"), session=SimpleNamespace(scope=scope()),
                          message=None, person_id=7, args=args, is_admin=admin)  # type: ignore[arg-type]


async def test_tools_reach_the_bot_library_through_services(feature, tmp_path):
    registry = ToolRegistry(feature.tools())
    ctx = ToolContext(bot="helper", session_id=1, session_key="dm:1", services=Services(feature.services()))
    content = skill_md("rotate-logs", "Rotate application logs.")
    result = await registry.call(ToolCall("1", "skill_manage", json.dumps(
        {"action": "create", "name": "rotate-logs", "content": content, "category": "ops"})), ctx)
    assert not result.is_error, result.content
    assert (tmp_path / "skills" / "helper" / "ops" / "rotate-logs" / "SKILL.md").is_file()
    other = ToolContext(bot="other-bot", session_id=2, session_key="dm:2", services=Services(feature.services()))
    assert (await registry.call(ToolCall("2", "skill_view", '{"name": "rotate-logs"}'), other)).is_error
    assert {t.toolset for t in feature.tools()} == {"skills"}


async def test_index_is_frozen_for_a_session_and_fresh_for_the_next(feature):
    await create(feature, "rotate-logs", "Rotate application logs.")
    first = await feature.frozen_section(scope(1))
    assert "rotate-logs" in first
    await create(feature, "renew-certs", "Renew TLS certificates.")
    assert await feature.frozen_section(scope(1)) == first  # byte-identical for the whole session
    assert "renew-certs" in await feature.frozen_section(scope(2))


async def test_turn_note_names_relevant_skills_and_follows_library_changes(feature):
    await create(feature, "rotate-logs", "Rotate application logs.", when="Log files grow too big.", tags="[logs]")
    assert await feature.turn_note(scope(), 7, "thanks!") is None
    assert await feature.turn_note(scope(), 7, "my nginx certificate expired, renew it") is None
    await create(feature, "renew-certs", "Renew TLS certificates before they expire.", tags="[tls, certificate]")
    note = await feature.turn_note(scope(), 7, "my nginx certificate expired, renew it")
    assert note is not None and "renew-certs" in note and "rotate-logs" not in note


async def test_turn_end_records_views_errors_and_corrections(feature):
    await create(feature, "rotate-logs", "Rotate application logs.")
    usage = feature.usage_for()
    await feature.on_turn_end(turn(Message(role="user", content="rotate my logs"), view_call("rotate-logs"),
                                   view_call("rotate-logs"), view_call("no-such-skill"),
                                   Message(role="assistant", content="done")))
    record = usage.get("rotate-logs")
    assert (record.views, record.turns, record.errors) == (2, 1, 0) and record.last_used
    assert usage.get("no-such-skill").turns == 0

    await feature.on_turn_end(turn(Message(role="user", content="no, that didn't work, the old logs are still there")))
    assert usage.get("rotate-logs").corrections == 1
    assert usage.get("rotate-logs").recent[-1]["outcome"] == "correction"

    await feature.on_turn_end(turn(Message(role="user", content="again"), view_call("rotate-logs"), failed=True))
    record = usage.get("rotate-logs")
    assert (record.turns, record.errors) == (2, 1) and record.bad_ratio() == (2, 2)


async def test_each_skill_is_a_chat_command(feature):
    await create(feature, "rotate-logs", "Rotate application logs.")
    text = await feature.skill_command("rotate-logs", "for the api service")
    assert text.startswith("Use the skill rotate-logs:\n---\nname: rotate-logs")
    assert text.endswith("## Pitfalls\n- Careful\n\nfor the api service")
    assert await feature.skill_command("rotate_logs", "") == text.rsplit("\n\n", 1)[0]  # Telegram-style name
    assert await feature.skill_command("nope", "") is None
    assert await feature.skill_command("../etc", "") is None
    await feature.on_turn_end(turn(Message(role="user", content=text)))
    assert feature.usage_for().get("rotate-logs").turns == 1


async def test_skills_command_lists_and_admins_review_pending_writes(tmp_path):
    feature = SkillsFeature(tmp_path / "skills", bot="helper", require_approval=True, curator_interval_seconds=None)
    registry = CommandRegistry()
    feature.register_commands(registry)
    skills_cmd, curator_cmd = registry.get("skills"), registry.get("curator")
    assert curator_cmd.admin_only and not skills_cmd.admin_only

    tools = ToolRegistry(feature.tools())
    ctx = ToolContext(bot="helper", session_id=1, session_key="dm:1", services=Services(feature.services()))
    for name in ("rotate-logs", "renew-certs"):
        result = await tools.call(ToolCall("1", "skill_manage", json.dumps(
            {"action": "create", "name": name, "content": skill_md(name, f"Do {name}.")})), ctx)
        assert "Queued for admin approval" in result.content
    assert await feature.raw_library().list_skills() == []

    assert "Only an admin" in await skills_cmd.handler(command_ctx(feature, "pending", admin=False))
    listing = await skills_cmd.handler(command_ctx(feature, "pending", admin=True))
    ids = [e.id for e in feature.pending_for().list()]
    assert all(i in listing for i in ids) and "create rotate-logs" in listing

    approved = await skills_cmd.handler(command_ctx(feature, f"approve {ids[0]}", admin=True))
    assert "Approved" in approved
    rejected = await skills_cmd.handler(command_ctx(feature, f"reject {ids[1]}", admin=True))
    assert "Rejected" in rejected
    assert "Could not approve" in await skills_cmd.handler(command_ctx(feature, "approve p-000000", admin=True))
    assert len(await feature.raw_library().list_skills()) == 1 and feature.pending_for().list() == []
    assert "/rotate-logs" in await skills_cmd.handler(command_ctx(feature, "", admin=False)) or \
        "/renew-certs" in await skills_cmd.handler(command_ctx(feature, "", admin=False))


async def test_curator_command_runs_and_reports(feature):
    registry = CommandRegistry()
    feature.register_commands(registry)
    handler = registry.get("curator").handler
    assert "has not run yet" in await handler(command_ctx(feature, "report", admin=True))
    await create(feature, "rotate-logs", "Rotate application logs.")
    ran = await handler(command_ctx(feature, "run dry-run", admin=True))
    assert ran.startswith("Curator dry run (ok): 1 skills")
    assert "# Skill curator report" in await handler(command_ctx(feature, "report", admin=True))


async def test_start_schedules_the_curator_under_a_lease(tmp_path):
    leases: list[tuple[str, str, float]] = []

    class Store:
        async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
            leases.append((name, holder, ttl_seconds))
            return True

        async def release_lease(self, name: str, holder: str) -> bool:
            return True

        async def hand_over_lease(self, name: str, holder: str, to: str, ttl_seconds: float) -> bool:
            return True

    fixed = datetime(2025, 1, 1, tzinfo=UTC)
    feature = SkillsFeature(tmp_path / "skills", bot="helper", curator_interval_seconds=3600, llm_pass=False,
                            clock=lambda: fixed)
    scheduler = Scheduler(Store())  # the host's
    await scheduler.start()
    await feature.start(SimpleNamespace(store=Store(), metrics=NO_METRICS, tools=[], schedule=scheduler.every))
    try:
        job = scheduler.jobs["skills-curator:helper"]
        assert job.interval == 3600 and job.lease
        for _ in range(100):
            if job.runs and not job.running:
                break
            await asyncio.sleep(0.02)
        assert job.runs == 1 and job.last_error is None
        assert leases[0][0] == "skills-curator:helper" and leases[0][2] == 3600
        assert feature.curator_for().latest_report() is not None
    finally:
        await scheduler.stop()
        await feature.stop()
