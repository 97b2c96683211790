"""What the Skills pages show, read through each bot's `SkillsFeature`: the library with the figures
`hermes-gateway skills stats` prints (the same `SkillUsage` and `ranked`), a skill's text and the diffs of
its kept writes, the curator's reports and the changes held for an admin."""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass

from hermes_engine.skills.approvals import PendingChange
from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.history import Revision, revisions
from hermes_engine.skills.model import NAME_RE, Skill
from hermes_engine.skills.report import CuratorReport, recent_reports
from hermes_engine.skills.usage import SkillUsage, ranked
from hermes_gateway.dashboard import skill_reads
from hermes_gateway.dashboard.views import Sources

REPORTS_SHOWN = 5
DIFF_CONTEXT = 3
SKILLS_PER_PAGE = 50


@dataclass(frozen=True)
class SkillRow:
    name: str
    category: str
    description: str
    agent_written: bool
    usage: SkillUsage


@dataclass(frozen=True)
class Library:
    bot: str
    rows: tuple[SkillRow, ...]
    pending: tuple[PendingChange, ...]
    reports: tuple[CuratorReport, ...]
    total: int  # skills in the library; `rows` is page `page` of `pages`
    page: int = 1
    pages: int = 1


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add" | "remove" | "context" | "hunk" | "file"
    text: str


@dataclass(frozen=True)
class Patch:
    revision: Revision
    lines: tuple[DiffLine, ...]


@dataclass(frozen=True)
class SkillPage:
    bot: str
    skill: Skill
    usage: SkillUsage
    patches: tuple[Patch, ...]
    pending: tuple[PendingChange, ...]  # held changes to this skill


async def library(feature: SkillsFeature, bot: str, page: int = 1) -> Library:
    """One bot's library, a page at a time: skills most used first, as `skills stats` ranks them."""
    found = await skill_reads.read(feature, bot)
    if "rows" not in found.derived:
        by_name = found.skills
        found.derived["rows"] = tuple(
            SkillRow(name, by_name[name].category, by_name[name].description, by_name[name].agent_written, usage)
            for name, usage in ranked(found.usages, by_name))
    rows: tuple[SkillRow, ...] = found.derived["rows"]
    pages = max(1, -(-len(rows) // SKILLS_PER_PAGE))
    page = min(max(page, 1), pages)
    pending = await asyncio.to_thread(feature.pending_for(bot).list)
    reports = await asyncio.to_thread(recent_reports, feature.raw_library(bot).root, REPORTS_SHOWN)
    shown = rows[(page - 1) * SKILLS_PER_PAGE:page * SKILLS_PER_PAGE]
    return Library(bot, shown, tuple(pending), tuple(reports), len(rows), page, pages)


async def libraries(sources: Sources, bot: str | None = None, page: int = 1) -> tuple[Library, ...]:
    """Every bot's library; `page` of the one named `bot`, the first page of the others."""
    return tuple([await library(feature, name, page if name == bot else 1)
                  for name, feature in sorted(sources.skills.items())])


async def skill(sources: Sources, bot: str, name: str) -> SkillPage | None:
    feature = sources.skills.get(bot)
    if feature is None or not NAME_RE.match(name):
        return None
    read = await skill_reads.read(feature, bot)
    found = read.skills.get(name)
    if found is None:
        return None
    usage = read.usages.get(name, SkillUsage())
    kept = await asyncio.to_thread(revisions, feature.raw_library(bot).root, name)
    held = [p for p in await asyncio.to_thread(feature.pending_for(bot).list) if p.change.name == name]
    return SkillPage(bot, found, usage, tuple(Patch(r, diff(r)) for r in kept), tuple(held))


def diff(revision: Revision) -> tuple[DiffLine, ...]:
    """The write as a unified diff, line by line, each marked for how it is drawn."""
    lines = []
    for line in difflib.unified_diff(revision.before.splitlines(), revision.after.splitlines(),
                                     f"a/{revision.file}", f"b/{revision.file}", n=DIFF_CONTEXT, lineterm=""):
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "remove"
        else:
            kind = "context"
        lines.append(DiffLine(kind, line))
    return tuple(lines)


def pending_text(entry: PendingChange) -> str:
    """What a held change would write, for the admin to judge before approving."""
    change = entry.change
    if change.action == "patch":
        return f"replace:\n{change.old_string or ''}\n\nwith:\n{change.new_string or ''}"
    return change.content or change.file_content or ""


__all__ = ["DiffLine", "Library", "Patch", "SkillPage", "SkillRow", "diff", "libraries", "library",
           "pending_text", "skill"]
