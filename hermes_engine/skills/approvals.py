"""The approval queue: agent writes that wait for an admin.

Two kinds of writer go through it: every agent write of a bot shared by people who do not trust each other
(`skills.require_approval`), and the background review, which is a guest in the library: it may create
skills and improve the ones the agent wrote, while deleting or removing anything and touching a hand-written
skill wait for an admin (`/skills pending`). A queued change is validated and scanned when the agent asks
(so the agent learns at once about a bad write, and the queue never holds one), and applied only when an
admin approves it. Each waiting change is one JSON file under `<library>/.pending/`, so the gateway and the
CLI see one queue.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write_text
from hermes_engine.confine import is_real_dir, own_dir
from hermes_engine.policy import security
from hermes_engine.skills.contract import PENDING_DIR, ChangeResult, SkillChange, SkillLibrary
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.model import Skill, SkillBlocked, SkillError

log = logging.getLogger(__name__)


@dataclass
class PendingChange:
    """A waiting change with who asked for it: the admin judges the request, the approval applies it as its author."""

    id: str
    change: SkillChange
    author: str
    requested_by: dict[str, Any]
    created_at: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "change": self.change.to_dict(), "author": self.author,
                "requested_by": self.requested_by, "created_at": self.created_at, "note": self.note}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingChange:
        return cls(id=data["id"], change=SkillChange.from_dict(data["change"]), author=data.get("author", "agent"),
                   requested_by=dict(data.get("requested_by") or {}), created_at=data.get("created_at", ""),
                   note=data.get("note", ""))

    def describe(self) -> str:
        who = self.requested_by.get("by") or self.requested_by.get("session_key") or self.author
        extra = f" — {self.note}" if self.note else ""
        return f"`{self.id}` {self.change.summary()} (from {who}, {self.created_at[:16]}){extra}"


class PendingQueue:
    """Writes waiting for an admin: one JSON file per change under `<library>/.pending/`."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.dir = self.root / PENDING_DIR

    def submit(self, change: SkillChange, *, author: str = "agent", requested_by: dict[str, Any] | None = None,
               note: str = "") -> PendingChange:
        entry = PendingChange(id="p-" + secrets.token_hex(3), change=change, author=author,
                              requested_by=dict(requested_by or {}),
                              created_at=datetime.now(UTC).isoformat(timespec="seconds"), note=note)
        folder = own_dir(self.root, PENDING_DIR, error=SkillError)
        atomic_write_text(folder / f"{entry.id}.json", json.dumps(entry.to_dict(), ensure_ascii=False, indent=1))
        return entry

    def list(self) -> list[PendingChange]:
        if not is_real_dir(self.dir):
            return []
        entries = []
        for path in self.dir.glob("p-*.json"):
            try:
                entries.append(PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable pending change %s: %s", path, exc)
        return sorted(entries, key=lambda e: (e.created_at, e.id))

    def get(self, pending_id: str) -> PendingChange | None:
        if not pending_id or not pending_id.startswith("p-") or not pending_id[2:].isalnum():
            return None
        path = self.dir / f"{pending_id}.json"
        if not is_real_dir(self.dir) or not path.is_file():
            return None
        return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def find(self, action: str, name: str) -> PendingChange | None:
        return next((e for e in self.list() if e.change.action == action and e.change.name == name), None)

    def remove(self, pending_id: str) -> None:
        if not is_real_dir(self.dir):
            return
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{pending_id}.json").unlink()

    async def approve(self, pending_id: str, library: SkillLibrary) -> ChangeResult:
        entry = self.get(pending_id)
        if entry is None:
            raise SkillError(f"No pending change {pending_id!r}.")
        approved = security.ScanMode(approved_by=f"skills approve {pending_id}")  # accepts low findings, by fingerprint
        result = await library.apply(replace(entry.change, scan_mode=approved), author=entry.author)
        self.remove(pending_id)
        return result

    def reject(self, pending_id: str) -> PendingChange:
        entry = self.get(pending_id)
        if entry is None:
            raise SkillError(f"No pending change {pending_id!r}.")
        self.remove(pending_id)
        return entry


Admits = Callable[[SkillChange, Skill | None], bool]


def review_may_apply(change: SkillChange, skill: Skill | None) -> bool:
    """What the background review may do without an admin: create a skill, and patch, rewrite or add a
    file to one the agent wrote. Deleting, removing files and any change to a hand-written skill wait."""
    if change.action == "create":
        return True
    return change.action in ("patch", "edit", "write_file") and skill is not None and skill.agent_written


class GatedLibrary:
    """A `SkillLibrary` whose agent writes wait for an admin: validated and scanned now, applied on approval.

    `admits` lets some changes through at once (the background review's own work); without it every write
    waits. Only `apply` differs from the library it wraps; everything else in the contract goes straight
    through. Code that needs more than the contract (the curator, the CLI) works on `inner`, the ungated
    library.
    """

    def __init__(self, inner: FileSkillLibrary, queue: PendingQueue | None = None, *,
                 admits: Admits | None = None, note: str = "", reason: str = "") -> None:
        """`note` is shown to the admin with each queued change; `reason` tells the agent why it waits."""
        self.inner = inner
        self.queue = queue or PendingQueue(inner.root)
        self.admits = admits
        self.note = note
        self.reason = reason

    def __repr__(self) -> str:
        return f"GatedLibrary({self.inner!r})"

    @property
    def root(self) -> Path:
        """The folder of the wrapped library (and of its queue)."""
        return self.inner.root

    async def list_skills(self, category: str | None = None) -> list[Skill]:
        return await self.inner.list_skills(category)

    async def get(self, name: str) -> Skill | None:
        return await self.inner.get(name)

    async def read_file(self, name: str, file_path: str) -> str:
        return await self.inner.read_file(name, file_path)

    async def revision(self) -> str:
        return await self.inner.revision()

    async def check(self, change: SkillChange, *, author: str = "agent") -> ChangeResult:
        return await self.inner.check(change, author=author)

    async def apply(self, change: SkillChange, *, author: str = "agent",
                    requested_by: dict[str, Any] | None = None) -> ChangeResult:
        if self.admits is not None and self.admits(change, await self.inner.get(change.name)):
            return await self.inner.apply(change, author=author, requested_by=requested_by)
        try:
            warnings = (await self.inner.check(change, author=author)).warnings
        except SkillBlocked as exc:  # held only for what an admin's approval accepts: the admin decides
            if not exc.findings or any(f.severity != security.LOW for f in exc.findings):
                raise
            warnings = [str(exc)]
        entry = self.queue.submit(change, author=author, requested_by=requested_by, note=self.note)
        why = f" {self.reason}." if self.reason else ""
        return ChangeResult(change.action, change.name,
                            f"Queued for admin approval as {entry.id} ({change.summary()}).{why} It takes effect "
                            f"once an admin approves it (/skills pending). Do not retry.", warnings,
                            pending_id=entry.id)

    async def archive(self, name: str) -> str:
        return await self.inner.archive(name)

    async def backup(self, keep: int = 5) -> str | None:
        return await self.inner.backup(keep)


REVIEW_REASON = ("The background review may create skills and improve the ones the agent wrote; deleting, "
                 "removing files and changing a hand-written skill wait for an admin")


def review_gate(library: SkillLibrary) -> SkillLibrary:
    """The library as the background review may write to it (see `review_may_apply`)."""
    if isinstance(library, GatedLibrary):
        return library  # every write already waits for an admin
    if isinstance(library, FileSkillLibrary):
        return GatedLibrary(library, admits=review_may_apply, note="from the background review",
                            reason=REVIEW_REASON)
    raise SkillError("This skill library cannot hold changes for an admin, so the background review may not "
                     "change skills.")


__all__ = ["Admits", "GatedLibrary", "PendingChange", "PendingQueue", "REVIEW_REASON", "review_gate",
           "review_may_apply"]
