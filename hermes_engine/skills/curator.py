"""The skill curator: grades skills by use, marks stale ones, archives long-unused ones, merges overlaps.

One run: back up the whole library → deterministic pass (age and outcomes from the usage file) → optional
LLM pass (find overlapping agent-written skills, merge each group into one umbrella skill that keeps every
distinct pitfall) → a report (JSON + Markdown) under `<library>/.reports/` (`skills.report`).

Nothing is ever deleted: archiving moves a folder to `<library>/.archive/`. A user-written skill
(`created_by: user`) is never archived or edited without approval — the curator queues the archive in
the approval queue (`/skills approve <id>`) and reports it. Every change is an atomic rename or an atomic
file replace, so a run that dies half way leaves a consistent library (and the backup taken first).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_engine.errors import ProviderError
from hermes_engine.policy.security import ORDINARY
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.models import Completed, ModelRequest, Provider, TextDelta
from hermes_engine.skills.approvals import GatedLibrary, PendingQueue
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.model import (
    Skill,
    SkillError,
    bullets,
    parse_skill,
    render,
    replace_section,
    section,
    validate_name,
    with_meta,
)
from hermes_engine.skills.report import KEEP_REPORTS, CuratorReport, latest_report, save_report
from hermes_engine.skills.usage import SkillUsage, UsageLog, utcnow

log = logging.getLogger(__name__)

CURATOR_SYSTEM = ("You curate a library of skills: short procedures an AI agent wrote for itself. "
                  "Reply with one JSON object only, no prose and no code fences.")

OVERLAP_PROMPT = """\
Below are the agent-written skills. Find groups that cover the same task closely enough that one \
umbrella skill should replace them (same tool and same goal; not merely the same topic). Leave distinct \
skills alone; an empty list is a fine answer.

Reply exactly in this shape:
{{"groups": [{{"skills": ["name-a", "name-b"], "reason": "one sentence"}}]}}

Skills:
{listing}"""

MERGE_PROMPT = """\
Merge these skills into one umbrella skill. Keep every distinct step and every distinct pitfall (merge \
duplicates); drop nothing that is specific. The content is a full SKILL.md: YAML front matter with name, \
description, version, category, tags, triggers (the merged skills' example requests, at most 12), tools \
(every tool the merged skills name), then the \
sections ## When to use, ## Steps, ## Pitfalls.

Reply exactly in this shape:
{{"name": "umbrella-skill-name", "content": "---\\nname: umbrella-skill-name\\n...---\\n\\n## When to use\\n..."}}

{texts}"""


def _days(seconds: float) -> int:
    return int(seconds // 86400)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def parse_json_object(text: str) -> dict[str, Any]:
    """Strict JSON (a single object); tolerates only a surrounding code fence."""
    raw = text.strip()
    fence = re.match(r"^```(?:json)?\s*\n(.*)\n```$", raw, re.S)
    if fence:
        raw = fence.group(1).strip()
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


class Curator:
    """One bot's curator. It works on the ungated library: its own changes are housekeeping the admin asked
    for, and the ones that need a person's consent (user-written skills) go to the approval queue itself."""

    def __init__(self, library: FileSkillLibrary | GatedLibrary, usage: UsageLog | None = None,
                 provider: Provider | None = None,
                 *, stale_days: int = 14, archive_days: int = 30, llm_pass: bool = True,
                 clock: Callable[[], datetime] = utcnow, keep_backups: int = 5, review_window: int = 10,
                 review_min_uses: int = 3, max_merges: int = 5, pending: PendingQueue | None = None,
                 bot: str = "") -> None:
        self.library = library.inner if isinstance(library, GatedLibrary) else library
        self.root = Path(self.library.root)
        self.usage = usage or UsageLog.for_library(self.root)
        self.provider = provider
        self.stale_days = stale_days
        self.archive_days = archive_days
        self.llm_pass = llm_pass
        self.clock = clock
        self.keep_backups = keep_backups
        self.review_window = review_window
        self.review_min_uses = review_min_uses
        self.max_merges = max_merges
        self.pending = pending or PendingQueue(self.root)
        self.bot = bot or self.root.name
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ run
    async def run(self, dry_run: bool = False) -> CuratorReport:
        async with self._lock:
            report = CuratorReport(bot=self.bot, started_at=self._stamp(), dry_run=dry_run)
            try:
                if not dry_run:
                    report.backup = await self.library.backup(self.keep_backups)
                skills = await self.library.list_skills()
                report.skills = len(skills)
                report.problems = dict(self.library.problems)
                await self._deterministic(skills, report, dry_run)
                if not self.llm_pass:
                    report.llm = "off"
                elif self.provider is None:
                    report.llm = "skipped: no model configured"
                else:
                    await self._llm_pass(report, dry_run)
                report.status = "ok"
            except BaseException as exc:
                report.status = "failed"
                report.error = f"{type(exc).__name__}: {exc}"
                report.finished_at = self._stamp()
                self._save(report)
                raise
            report.finished_at = self._stamp()
            self._save(report)
            log.info("%s", report.summary())
            return report

    def _now(self) -> datetime:
        now = self.clock()
        return now if now.tzinfo else now.replace(tzinfo=UTC)

    def _stamp(self) -> str:
        return self._now().isoformat(timespec="seconds")

    # ------------------------------------------------------------------ deterministic pass
    def _idle_seconds(self, skill: Skill, usage: SkillUsage, now: datetime) -> float:
        last = datetime.fromtimestamp(skill.updated_at, UTC) if skill.updated_at else None
        used = usage.last_used_at
        if used and (last is None or used > last):
            last = used
        return (now - last).total_seconds() if last else 0.0

    async def _deterministic(self, skills: list[Skill], report: CuratorReport, dry_run: bool) -> None:
        now = self._now()
        usages = self.usage.all()
        for skill in skills:
            usage = usages.get(skill.name, SkillUsage())
            idle = self._idle_seconds(skill, usage, now)
            idle_days = _days(idle)
            bad, uses = usage.bad_ratio(self.review_window)
            if uses >= self.review_min_uses and bad * 2 > uses:
                report.flagged.append({"name": skill.name, "bad": bad, "uses": uses})
            if idle >= self.archive_days * 86400:
                if skill.agent_written:
                    to = "(dry run)"
                    if not dry_run:
                        try:
                            to = await self.library.archive(skill.name)
                        except SkillError as exc:
                            report.skipped.append({"what": f"archive {skill.name}", "reason": str(exc)})
                            continue
                        self.usage.annotate(skill.name, status="archived", status_since=self._stamp(), archived_to=to)
                    report.archived.append({"name": skill.name, "idle_days": idle_days, "to": to})
                else:
                    self._ask_approval(skill, "archive", f"user-written, unused {idle_days} days", report, dry_run)
                    self._mark_stale(skill, usage, idle_days, report, dry_run)
            elif idle >= self.stale_days * 86400:
                self._mark_stale(skill, usage, idle_days, report, dry_run)
            elif usage.status == "stale":
                if not dry_run:
                    self.usage.set_status(skill.name, "active", now)
                report.reactivated.append(skill.name)

    def _mark_stale(self, skill: Skill, usage: SkillUsage, idle_days: int, report: CuratorReport,
                    dry_run: bool) -> None:
        # the status lives in the usage file: marking a skill stale never edits the skill itself
        if usage.status != "stale" and not dry_run:
            self.usage.set_status(skill.name, "stale", self._now())
        report.stale.append({"name": skill.name, "idle_days": idle_days, "user": not skill.agent_written})

    def _ask_approval(self, skill: Skill, action: str, reason: str, report: CuratorReport, dry_run: bool) -> None:
        entry = self.pending.find(action, skill.name)
        if entry is None and not dry_run:
            entry = self.pending.submit(SkillChange(action=action, name=skill.name), author="curator",
                                        requested_by={"by": "curator"}, note=reason)
        report.needs_approval.append({"name": skill.name, "action": action, "reason": reason,
                                      "pending_id": entry.id if entry else None})

    # ------------------------------------------------------------------ LLM pass
    async def _ask(self, prompt: str) -> str:
        assert self.provider is not None
        request = ModelRequest(system=CURATOR_SYSTEM, messages=(Message(role="user", content=prompt),),
                               max_tokens=8192, temperature=0.0, purpose="curator")
        parts: list[str] = []
        final: str | None = None
        async for event in self.provider.stream(request):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Completed):
                final = event.response.text
        return final if final is not None else "".join(parts)

    async def _llm_pass(self, report: CuratorReport, dry_run: bool) -> None:
        gone = {a["name"] for a in report.archived}
        live = [s for s in await self.library.list_skills() if s.agent_written and s.name not in gone]
        if len(live) < 2:
            report.llm = "skipped: fewer than two agent-written skills"
            return
        by_name = {s.name: s for s in live}
        listing = "\n".join(
            f"- {s.name} [{s.category}]: {s.description}"
            + (f" | tags: {', '.join(s.tags)}" if s.tags else "")
            + (f" | when: {' '.join(s.when_to_use.split())[:160]}" if s.when_to_use else "")
            for s in live)
        try:
            answer = await self._ask(OVERLAP_PROMPT.format(listing=listing))
        except ProviderError as exc:
            report.llm = f"skipped: the model call failed ({exc})"
            return
        groups = self._parse_groups(answer, by_name, report)
        report.llm = f"ran: {len(groups)} overlap group(s) proposed"
        for group in groups[: self.max_merges]:
            await self._merge(group, by_name, report, dry_run)

    def _parse_groups(self, answer: str, by_name: dict[str, Skill], report: CuratorReport) -> list[list[str]]:
        try:
            data = parse_json_object(answer)
            raw_groups = data["groups"]
            if not isinstance(raw_groups, list):
                raise ValueError("'groups' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            report.skipped.append({"what": "overlap check", "reason": f"the model's answer was not the expected "
                                                                     f"JSON ({exc}); no merges this run"})
            return []
        groups: list[list[str]] = []
        taken: set[str] = set()
        for i, g in enumerate(raw_groups, start=1):
            names = g.get("skills") if isinstance(g, dict) else None
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                report.skipped.append({"what": f"group {i}", "reason": "malformed group"})
                continue
            names = list(dict.fromkeys(names))
            unknown = [n for n in names if n not in by_name]
            if unknown or len(names) < 2 or taken.intersection(names):
                why = (f"unknown or not agent-written: {', '.join(unknown)}" if unknown else
                       "fewer than two skills" if len(names) < 2 else "overlaps another group")
                report.skipped.append({"what": f"group {', '.join(map(str, names))}", "reason": why})
                continue
            taken.update(names)
            groups.append(names)
        return groups

    async def _merge(self, names: list[str], by_name: dict[str, Skill], report: CuratorReport,
                     dry_run: bool) -> None:
        sources = [by_name[n] for n in names]
        what = f"merge {', '.join(names)}"
        texts = "\n\n".join(f"=== {s.name} ===\n{s.text.strip()}" for s in sources)
        try:
            answer = await self._ask(MERGE_PROMPT.format(texts=texts))
            data = parse_json_object(answer)
            name = validate_name(data.get("name"))
            content = data.get("content")
            if not isinstance(content, str) or not content.strip():
                raise ValueError("no 'content'")
        except ProviderError as exc:
            report.skipped.append({"what": what, "reason": f"the model call failed ({exc})"})
            return
        except (ValueError, KeyError, TypeError, SkillError) as exc:
            report.skipped.append({"what": what, "reason": f"the model's answer was not valid ({exc})"})
            return
        existing = await self.library.get(name)
        if existing is not None and name not in names:
            report.skipped.append({"what": what, "reason": f"the umbrella name '{name}' belongs to another skill"})
            return
        try:
            merged = parse_skill(content, folder_name=name)
            content, restored = self._keep_pitfalls(merged, sources)
            tools = list(dict.fromkeys(t for s in (merged, *sources) for t in s.tools))
            if tools:  # the umbrella calls every tool its sources did (the model may drop some)
                content = with_meta(content, tools=tools)
            category = Counter(s.category for s in sources).most_common(1)[0][0]
            # The merge is made of skills already in the library, read by no turn: scanned ordinarily.
            change = (SkillChange("edit", name, content=content, scan_mode=ORDINARY) if name in names else
                      SkillChange("create", name, content=content, category=category, scan_mode=ORDINARY))
            await self.library.check(change, author="agent")
        except SkillError as exc:
            report.skipped.append({"what": what, "reason": f"the merged skill was refused: {exc}"})
            return
        archived: list[str] = []
        if not dry_run:
            await self.library.apply(change, author="agent")
            for source in sources:
                if source.name != name:
                    try:
                        to = await self.library.archive(source.name)
                    except SkillError as exc:
                        report.skipped.append({"what": f"archive {source.name}", "reason": str(exc)})
                        continue
                    self.usage.annotate(source.name, status="archived", status_since=self._stamp(),
                                        archived_to=to, absorbed_into=name)
                    archived.append(source.name)
        report.merges.append({"into": name, "sources": names, "archived": archived, "restored_pitfalls": restored})

    @staticmethod
    def _keep_pitfalls(merged: Skill, sources: list[Skill]) -> tuple[str, int]:
        """Append any source pitfall the merged text lost (the model may merge, not drop)."""
        have = _norm(merged.body)
        missing: list[str] = []
        for source in sources:
            for pitfall in source.pitfalls:
                key = _norm(pitfall)
                if key and key not in have and key not in {_norm(m) for m in missing}:
                    missing.append(pitfall)
        if not missing:
            return merged.text, 0
        current = section(merged.body, "Pitfalls")
        new_pitfalls = "\n".join([*(f"- {p}" for p in bullets(current)), *(f"- {p}" for p in missing)])
        body = replace_section(merged.body, "Pitfalls", new_pitfalls)
        return render(dict(merged.meta), body), len(missing)

    # ------------------------------------------------------------------ reports
    def _save(self, report: CuratorReport) -> None:
        save_report(self.root, report, self._now())

    def latest_report(self) -> CuratorReport | None:
        return latest_report(self.root)


__all__ = ["CURATOR_SYSTEM", "KEEP_REPORTS", "Curator", "CuratorReport", "latest_report", "parse_json_object"]
