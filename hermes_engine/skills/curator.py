"""The skill curator: grades skills by use, marks stale ones, archives long-unused ones, merges overlaps.

One run: back up the whole library → deterministic pass (age and outcomes from the usage file) → optional
LLM pass (find overlapping agent-written skills, merge each group into one umbrella skill that keeps every
distinct pitfall) → a report (JSON + Markdown) under `<library>/.reports/`.

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
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from hermes_engine.ports.conversation import Message
from hermes_engine.errors import ProviderError
from hermes_engine.providers.base import Completed, ModelRequest, Provider, TextDelta
from hermes_engine.skills.library import (
    REPORT_DIR,
    FileSkillLibrary,
    PendingQueue,
    SkillChange,
    atomic_write_text,
)
from hermes_engine.skills.model import (
    Skill,
    SkillError,
    bullets,
    parse_skill,
    render,
    replace_section,
    section,
    validate_name,
)
from hermes_engine.skills.usage import SkillUsage, UsageLog, utcnow

log = logging.getLogger(__name__)

KEEP_REPORTS = 30

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
description, version, category, tags, then the sections ## When to use, ## Steps, ## Pitfalls.

Reply exactly in this shape:
{{"name": "umbrella-skill-name", "content": "---\\nname: umbrella-skill-name\\n...---\\n\\n## When to use\\n..."}}

{texts}"""


@dataclass
class CuratorReport:
    bot: str = ""
    started_at: str = ""
    finished_at: str | None = None
    dry_run: bool = False
    status: str = "running"  # "ok" | "failed"
    backup: str | None = None
    skills: int = 0
    stale: list[dict[str, Any]] = field(default_factory=list)  # {"name", "idle_days", "user"}
    reactivated: list[str] = field(default_factory=list)
    archived: list[dict[str, Any]] = field(default_factory=list)  # {"name", "idle_days", "to"}
    needs_approval: list[dict[str, Any]] = field(default_factory=list)  # {"name", "action", "reason", "pending_id"}
    flagged: list[dict[str, Any]] = field(default_factory=list)  # {"name", "bad", "uses"}
    merges: list[dict[str, Any]] = field(default_factory=list)  # {"into", "sources", "archived", "restored_pitfalls"}
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"what", "reason"}
    llm: str = "off"
    problems: dict[str, str] = field(default_factory=dict)  # unreadable skills
    error: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # where this report was written

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CuratorReport":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def summary(self) -> str:
        mode = "dry run" if self.dry_run else "run"
        return (f"Curator {mode} ({self.status}): {self.skills} skills; {len(self.archived)} archived, "
                f"{len(self.stale)} stale, {len(self.merges)} merged, {len(self.flagged)} flagged for review, "
                f"{len(self.needs_approval)} awaiting approval, {len(self.skipped)} skipped.")

    def to_markdown(self) -> str:
        out = [f"# Skill curator report{' — ' + self.bot if self.bot else ''}",
               "", f"- Started: {self.started_at}", f"- Finished: {self.finished_at or '—'}",
               f"- Mode: {'dry run (nothing changed)' if self.dry_run else 'applied'}",
               f"- Status: {self.status}" + (f" — {self.error}" if self.error else ""),
               f"- Backup: {self.backup or 'none'}", f"- Skills: {self.skills}", f"- LLM pass: {self.llm}", "",
               self.summary()]

        def block(title: str, rows: list[str]) -> None:
            if rows:
                out.extend(["", f"## {title} ({len(rows)})", *rows])

        verb = "Would archive" if self.dry_run else "Archived"
        block(verb, [f"- `{a['name']}` — unused {a['idle_days']} days → {a.get('to', '')}" for a in self.archived])
        block("Stale", [f"- `{s['name']}` — unused {s['idle_days']} days" + (" (user-written)" if s.get("user") else "")
                        for s in self.stale])
        block("Active again", [f"- `{n}`" for n in self.reactivated])
        block("Needs approval (user-written)",
              [f"- `{a['name']}`: {a['action']} — {a['reason']}" + (f" (pending `{a['pending_id']}`)"
                                                                   if a.get("pending_id") else "")
               for a in self.needs_approval])
        block("Flagged for review", [f"- `{f['name']}` — {f['bad']} of the last {f['uses']} uses ended in an error "
                                     f"or a correction" for f in self.flagged])
        block("Merged" if not self.dry_run else "Would merge",
              [f"- {', '.join('`' + s + '`' for s in m['sources'])} → `{m['into']}`"
               + (f" ({m['restored_pitfalls']} pitfall(s) restored)" if m.get("restored_pitfalls") else "")
               for m in self.merges])
        block("Skipped", [f"- {s['what']}: {s['reason']}" for s in self.skipped])
        block("Unreadable skills", [f"- {path}: {why}" for path, why in sorted(self.problems.items())])
        return "\n".join(out) + "\n"


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
    def __init__(self, library: FileSkillLibrary, usage: UsageLog | None = None, provider: Provider | None = None,
                 *, stale_days: int = 14, archive_days: int = 30, llm_pass: bool = True,
                 clock: Callable[[], datetime] = utcnow, keep_backups: int = 5, review_window: int = 10,
                 review_min_uses: int = 3, max_merges: int = 5, pending: PendingQueue | None = None,
                 bot: str = "") -> None:
        self.library: FileSkillLibrary = getattr(library, "inner", library)  # never through the approval gate
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
        return now if now.tzinfo else now.replace(tzinfo=timezone.utc)

    def _stamp(self) -> str:
        return self._now().isoformat(timespec="seconds")

    # ------------------------------------------------------------------ deterministic pass
    def _idle_seconds(self, skill: Skill, usage: SkillUsage, now: datetime) -> float:
        last = datetime.fromtimestamp(skill.updated_at, timezone.utc) if skill.updated_at else None
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
                        to = await self.library.archive(skill.name)
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
            category = Counter(s.category for s in sources).most_common(1)[0][0]
            change = (SkillChange("edit", name, content=content) if name in names else
                      SkillChange("create", name, content=content, category=category))
            await self.library.check(change, author="agent")
        except SkillError as exc:
            report.skipped.append({"what": what, "reason": f"the merged skill was refused: {exc}"})
            return
        archived: list[str] = []
        if not dry_run:
            await self.library.apply(change, author="agent")
            for source in sources:
                if source.name != name:
                    to = await self.library.archive(source.name)
                    self.usage.annotate(source.name, status="archived", status_since=self._stamp(),
                                        archived_to=to, merged_into=name)
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
        folder = self.root / REPORT_DIR
        folder.mkdir(parents=True, exist_ok=True)
        seq = 1 + max((int(p.name.split("-", 1)[0]) for p in folder.glob("*.json")
                       if p.name.split("-", 1)[0].isdigit()), default=0)
        stem = f"{seq:06d}-{self._now().strftime('%Y%m%dT%H%M%SZ')}"
        report.files = {"json": f"{REPORT_DIR}/{stem}.json", "markdown": f"{REPORT_DIR}/{stem}.md"}
        atomic_write_text(folder / f"{stem}.md", report.to_markdown())
        atomic_write_text(folder / f"{stem}.json", json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
        jsons = sorted(folder.glob("*.json"))
        for old in jsons[:-KEEP_REPORTS]:
            old.unlink(missing_ok=True)
            old.with_suffix(".md").unlink(missing_ok=True)

    def latest_report(self) -> CuratorReport | None:
        return latest_report(self.root)


def latest_report(library_root: Path | str) -> CuratorReport | None:
    folder = Path(library_root) / REPORT_DIR
    reports = sorted(folder.glob("*.json")) if folder.is_dir() else []
    for path in reversed(reports):
        try:
            return CuratorReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            log.warning("unreadable curator report %s: %s", path, exc)
    return None


__all__ = ["Curator", "CuratorReport", "latest_report", "parse_json_object"]
