"""Helpers shared by the skill tests: a SKILL.md builder, calling the skill tools as the model does, and a
byte snapshot of a library (to prove a refused or staged write left it unchanged)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from hermes_engine.ports.conversation import ToolCall
from hermes_engine.ports.services import Services
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.skills.tools import SKILLS, TOOLS
from hermes_engine.tools.registry import ToolRegistry


def skill_md(name: str, description: str = "Squash a branch's commits into one before merging.", *,
             category: str | None = None, created_by: str | None = None, when: str = "Before merging a branch.",
             steps: str = "1. git rebase -i main\n2. mark commits as squash", pitfalls: str = "- Never rewrite shared history") -> str:
    meta = [f"name: {name}", f"description: {description}", "version: 1.0.0", "tags: [git]"]
    if category:
        meta.append(f"category: {category}")
    if created_by:
        meta.append(f"created_by: {created_by}")
    return ("---\n" + "\n".join(meta) + "\n---\n\n"
            f"## When to use\n{when}\n\n## Steps\n{steps}\n\n## Pitfalls\n{pitfalls}\n")


def write_skill(folder: Path, text: str) -> Path:
    """A hand-written skill: a folder and its SKILL.md, put there by a person (not through the tools)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def skill_tools() -> ToolRegistry:
    return ToolRegistry(list(TOOLS))


def ctx_for(library: object, *, in_review: bool = False) -> ToolContext:
    return ToolContext(bot="default", session_id=1, session_key="dm:1", services=Services({SKILLS: library}),
                       in_review=in_review)


async def call(registry: ToolRegistry, library: object, tool_name: str, /, *, in_review: bool = False,
               **arguments: object) -> ToolResult:
    return await registry.call(ToolCall("c1", tool_name, json.dumps(arguments)), ctx_for(library, in_review=in_review))


def snapshot(root: Path, *, skip: tuple[str, ...] = (".locks",)) -> dict[str, bytes]:
    """Every file under `root` (symlinks not followed) except the given bookkeeping folders."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and not set(skip) & set(p.relative_to(root).parts)}


def used_library(root: Path, *, baseline: int, calls: list[int], at: datetime) -> None:
    """Two skills, as usage statistics see them: rotate-logs, learned from work of `baseline` tool calls and
    used once per entry of `calls` (that many tool calls each), and renew-certs, never used."""
    from hermes_engine.skills.contract import SkillChange
    from hermes_engine.skills.files import FileSkillLibrary
    from hermes_engine.skills.usage import UsageLog

    library = FileSkillLibrary(root)
    for name in ("rotate-logs", "renew-certs"):
        library.apply_sync(SkillChange("create", name, content=skill_md(name, f"Do {name}.")))
    log = UsageLog.for_library(root)
    log.set_baseline(["rotate-logs", "renew-certs"], baseline)
    for n in calls:
        log.record_turn({"rotate-logs": 1}, calls=n, at=at)
