"""What a curator run did, kept under `<library>/.reports/` as JSON (for `/curator report` and the CLI)
and Markdown (for a person reading the folder).

Reports are numbered so the newest is found by name alone, and only the last `KEEP_REPORTS` are kept.
A report is written even when the run fails, so an admin can see how far it got.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write_text
from hermes_engine.confine import own_dir
from hermes_engine.skills.contract import REPORT_DIR
from hermes_engine.skills.model import SkillError

log = logging.getLogger(__name__)

KEEP_REPORTS = 30


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
    problems: dict[str, str] = field(default_factory=dict)  # skipped skills: unreadable, symlinked, name taken
    error: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # where this report was written

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CuratorReport:
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
        block("Skipped skills", [f"- {path}: {why}" for path, why in sorted(self.problems.items())])
        return "\n".join(out) + "\n"


def save_report(library_root: Path | str, report: CuratorReport, now: datetime) -> None:
    """Write `report` as the next numbered pair of files and drop the oldest beyond `KEEP_REPORTS`."""
    # never a planted symlink: old reports are deleted here
    folder = own_dir(Path(library_root), REPORT_DIR, error=SkillError)
    seq = 1 + max((int(p.name.split("-", 1)[0]) for p in folder.glob("*.json")
                   if p.name.split("-", 1)[0].isdigit()), default=0)
    stem = f"{seq:06d}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    report.files = {"json": f"{REPORT_DIR}/{stem}.json", "markdown": f"{REPORT_DIR}/{stem}.md"}
    atomic_write_text(folder / f"{stem}.md", report.to_markdown())
    atomic_write_text(folder / f"{stem}.json", json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    jsons = sorted(folder.glob("*.json"))
    for old in jsons[:-KEEP_REPORTS]:
        old.unlink(missing_ok=True)
        old.with_suffix(".md").unlink(missing_ok=True)


def latest_report(library_root: Path | str) -> CuratorReport | None:
    found = recent_reports(library_root, 1)
    return found[0] if found else None


def recent_reports(library_root: Path | str, limit: int = KEEP_REPORTS) -> list[CuratorReport]:
    """The newest `limit` readable reports, newest first (an unreadable one is logged and passed over)."""
    folder = Path(library_root) / REPORT_DIR
    reports = sorted(folder.glob("*.json")) if folder.is_dir() else []
    found: list[CuratorReport] = []
    for path in reversed(reports):
        if len(found) >= limit:
            break
        try:
            found.append(CuratorReport.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (ValueError, TypeError) as exc:
            log.warning("unreadable curator report %s: %s", path, exc)
    return found


__all__ = ["KEEP_REPORTS", "CuratorReport", "latest_report", "recent_reports", "save_report"]
