"""The seam between skills and their storage: the `SkillLibrary` Protocol and the change it accepts.

Tools, the feature and the approval queue speak only this contract, so the folder library (`skills.files`)
and the database's (`skills.database`) are interchangeable, and an approval gate (`skills.approvals`) can
stand in front of either.
The folder names of a library's bookkeeping live here too, because the curator, the usage log and the
approval queue all find their files by them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from hermes_engine.policy.security import ORDINARY, ScanMode
from hermes_engine.skills.model import Skill

Action = Literal["create", "patch", "edit", "delete", "write_file", "remove_file", "archive"]
ACTIONS = ("create", "patch", "edit", "delete", "write_file", "remove_file")  # what the agent may ask for
SKILL_FILE = "SKILL.md"
ARCHIVE_DIR = ".archive"
BACKUP_DIR = ".backups"
REPORT_DIR = ".reports"
PENDING_DIR = ".pending"
USAGE_FILE = ".usage.json"
USAGE_DAYS_DIR = ".usage-days"  # one file of per-day figures per UTC day (`skills.usage_days`)


@dataclass(frozen=True)
class SkillChange:
    """One requested write, as `skill_manage` receives it (also what the approval queue stores).

    `scan_mode` is how its text is scanned, which belongs to who asks rather than to what is written: the
    queue keeps the change without it, and the admin's approval applies it with its own."""

    action: str
    name: str
    content: str | None = None
    category: str | None = None
    old_string: str | None = None
    new_string: str | None = None
    file_path: str | None = None
    file_content: str | None = None
    replace_all: bool = False  # patch: every occurrence of old_string, not exactly one
    absorbed_into: str | None = None  # delete: the skill that now holds this one's content
    scan_mode: ScanMode = field(default=ORDINARY, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "scan_mode" and v is not None and v is not False}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillChange:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "scan_mode"})

    def summary(self) -> str:
        target = f" {self.file_path}" if self.file_path else ""
        into = f" into {self.absorbed_into}" if self.absorbed_into else ""
        return f"{self.action} {self.name}{target}{into}"


@dataclass
class ChangeResult:
    """What the agent is told after a write; warnings travel apart so a queued change can carry them too."""

    action: str
    name: str
    message: str
    warnings: list[str] = field(default_factory=list)
    pending_id: str | None = None

    def text(self) -> str:
        return " ".join([self.message, *self.warnings])


@runtime_checkable
class SkillLibrary(Protocol):
    """The seam between skills and their storage (folders, or the database through `skills.database`)."""

    async def list_skills(self, category: str | None = None) -> list[Skill]:
        """Every readable skill, ordered by (category, name)."""

    async def get(self, name: str) -> Skill | None: ...

    async def read_file(self, name: str, file_path: str) -> str:
        """A supporting file's text; raises `SkillError` when missing or the path is invalid."""

    async def apply(self, change: SkillChange, *, author: str = "agent",
                    requested_by: dict[str, Any] | None = None) -> ChangeResult:
        """Validate, scan and commit one change; raises `SkillError`/`SkillBlocked` with nothing written.
        `requested_by` (session, person) is kept when the write waits for approval."""

    async def check(self, change: SkillChange, *, author: str = "agent") -> ChangeResult:
        """Everything `apply` does except committing."""

    async def revision(self) -> str:
        """Changes whenever any SKILL.md changes (used to rebuild indexes)."""

    async def archive(self, name: str) -> str:
        """Move a skill out of the live library (never deleted). Returns where it went."""

    async def backup(self, keep: int = 5) -> str | None:
        """Snapshot the whole library; keep the newest `keep` snapshots."""


__all__ = [
    "ACTIONS", "ARCHIVE_DIR", "Action", "BACKUP_DIR", "ChangeResult", "PENDING_DIR", "REPORT_DIR", "SKILL_FILE",
    "SkillChange", "SkillLibrary", "USAGE_FILE",
]
