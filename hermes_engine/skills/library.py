"""Where skills live: the `SkillLibrary` Protocol and its folder implementation.

One library per bot profile, at `<HERMES_HOME>/skills/<bot>/`:

    <category>/<name>/SKILL.md          hand-written and agent-written side by side
    <category>/<name>/references/…      optional supporting files (also templates/)
    .archive/  .backups/  .reports/  .pending/  .usage.json   (curator, approval queue, usage)

Every write is one transaction: build the new text, validate it, scan it, then replace atomically
(temp file + rename). Writes are serialized by a library-wide lock (a thread lock plus `flock` across
processes), so two concurrent patches of one skill both land. A refused write leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import tarfile
import tempfile
import threading
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal, Protocol, runtime_checkable

from hermes_engine.atomic import atomic_write
from hermes_engine.skills.model import (
    DEFAULT_CATEGORY,
    MAX_FILE_BYTES,
    MAX_SKILL_BYTES,
    SUPPORT_DIRS,
    Skill,
    SkillBlocked,
    SkillError,
    check_size,
    parse_skill,
    validate_category,
    validate_file_path,
    validate_name,
    with_meta,
)

try:  # POSIX advisory locks serialize writers across processes; threads are covered either way
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

Action = Literal["create", "patch", "edit", "delete", "write_file", "remove_file", "archive"]
ACTIONS = ("create", "patch", "edit", "delete", "write_file", "remove_file")
SKILL_FILE = "SKILL.md"
ARCHIVE_DIR = ".archive"
BACKUP_DIR = ".backups"
REPORT_DIR = ".reports"
PENDING_DIR = ".pending"
USAGE_FILE = ".usage.json"
_TMP_DIR = ".tmp"
_LOCK_DIR = ".locks"


@dataclass(frozen=True)
class SkillChange:
    """One requested write, as `skill_manage` receives it (also what the approval queue stores)."""

    action: str
    name: str
    content: str | None = None
    category: str | None = None
    old_string: str | None = None
    new_string: str | None = None
    file_path: str | None = None
    file_content: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SkillChange":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]

    def summary(self) -> str:
        target = f" {self.file_path}" if self.file_path else ""
        return f"{self.action} {self.name}{target}"


@dataclass
class ChangeResult:
    action: str
    name: str
    message: str
    warnings: list[str] = field(default_factory=list)
    pending_id: str | None = None

    def text(self) -> str:
        return " ".join([self.message, *self.warnings])


@runtime_checkable
class SkillLibrary(Protocol):
    """The seam between skills and their storage (folders today; a database table would fit too)."""

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


def scan_or_raise(text: str, what: str) -> None:
    """Run the shared security scanner over text the agent wants to save. Fails closed."""
    try:
        from hermes_engine.policy import security
    except ImportError as exc:  # the scanner is part of the engine; without it nothing is written
        raise SkillError(f"The security scanner is unavailable ({exc}); skill writes are disabled.") from None
    findings = security.scan_text(text, kind="skill")
    if findings:
        raise SkillBlocked(f"Blocked by the security scan in {what}: {security.explain(findings)} "
                           f"Nothing was written; remove that content and try again.", findings)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def _now_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


class _LibraryLock:
    """One writer at a time per library folder: a re-entrant thread lock shared by every instance on that
    folder in this process, plus an exclusive `flock` across processes (taken once per thread)."""

    _shared: dict[str, tuple[threading.RLock, threading.local]] = {}
    _registry_lock = threading.Lock()

    def __init__(self, root: Path) -> None:
        self.root = root
        key = str(root.resolve())
        with self._registry_lock:
            self._lock, self._depth = self._shared.setdefault(key, (threading.RLock(), threading.local()))

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._lock:
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            fh = None
            try:
                if depth == 0 and fcntl is not None:
                    lock_dir = self.root / _LOCK_DIR
                    lock_dir.mkdir(parents=True, exist_ok=True)
                    fh = open(lock_dir / "library.lock", "a+")
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                yield
            finally:
                if fh is not None:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
                    fh.close()
                self._depth.n = depth


class FileSkillLibrary:
    """Skills as folders under `root` (one bot's library)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _LibraryLock(self.root)
        self._cache: dict[Path, tuple[tuple[int, int], Skill | None, str | None]] = {}
        self._cache_lock = threading.Lock()
        self.problems: dict[str, str] = {}  # unreadable hand-written skills: relative path -> reason
        self._clean_staging()

    def __repr__(self) -> str:
        return f"FileSkillLibrary({str(self.root)!r})"

    def _clean_staging(self, older_than: float = 3600.0) -> None:
        """Remove staging folders a crashed writer left behind (never touches live skills)."""
        staging = self.root / _TMP_DIR
        if not staging.is_dir():
            return
        import time
        for entry in staging.iterdir():
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > older_than:
                    shutil.rmtree(entry, ignore_errors=True)

    # ---------------------------------------------------------------- reading
    def _skill_dirs(self) -> list[tuple[Path, str | None]]:
        """(folder, category from layout) for every folder holding a SKILL.md, in a stable order."""
        found: list[tuple[Path, str | None]] = []
        if not self.root.is_dir():
            return found
        for entry in sorted(self.root.iterdir(), key=lambda p: p.name):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            if (entry / SKILL_FILE).is_file():
                found.append((entry, None))  # uncategorized: <root>/<name>/SKILL.md
                continue
            for sub in sorted(entry.iterdir(), key=lambda p: p.name):
                if not sub.name.startswith(".") and (sub / SKILL_FILE).is_file():
                    found.append((sub, entry.name))
        return found

    @staticmethod
    def _support_files(folder: Path) -> tuple[str, ...]:
        files = []
        for sub in SUPPORT_DIRS:
            base = folder / sub
            if base.is_dir():
                for p in sorted(base.rglob("*")):
                    rel = p.relative_to(folder)
                    if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                        files.append(rel.as_posix())
        return tuple(files)

    def _load_one(self, folder: Path, category: str | None) -> Skill | None:
        path = folder / SKILL_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        with self._cache_lock:
            cached = self._cache.get(path)
        if cached and cached[0] == key:
            skill, problem = cached[1], cached[2]
        else:
            skill, problem = None, None
            try:
                text = path.read_text(encoding="utf-8")
                skill = parse_skill(text, category=category, path=folder, updated_at=st.st_mtime)
                if skill.name != folder.name:
                    log.warning("skill %s: front matter name %r differs from its folder; using the folder name",
                                folder, skill.name)
                    skill = replace(skill, name=folder.name)
                if category is None:
                    skill = replace(skill, category=validate_category(skill.meta.get("category")))
            except (SkillError, UnicodeDecodeError, OSError) as exc:
                problem = str(exc)
                log.warning("skipping unreadable skill %s: %s", path, problem)
            with self._cache_lock:
                self._cache[path] = (key, skill, problem)
        rel = folder.relative_to(self.root).as_posix()
        if problem:
            self.problems[rel] = problem
            return None
        self.problems.pop(rel, None)
        assert skill is not None
        return replace(skill, files=self._support_files(folder))

    def _load_all(self) -> dict[str, Skill]:
        skills: dict[str, Skill] = {}
        for folder, category in self._skill_dirs():
            skill = self._load_one(folder, category)
            if skill is None:
                continue
            if skill.name in skills:
                log.warning("duplicate skill name %r at %s; keeping %s", skill.name, folder, skills[skill.name].path)
                continue
            skills[skill.name] = skill
        return skills

    def _find(self, name: str) -> Skill | None:
        validate_name(name)
        for folder, category in self._skill_dirs():
            if folder.name == name:
                return self._load_one(folder, category)
        return None

    def _require(self, name: str) -> Skill:
        skill = self._find(name)
        if skill is None:
            raise SkillError(f"No skill named '{name}'. Use skills_list to see the available skills.")
        return skill

    def list_sync(self, category: str | None = None) -> list[Skill]:
        skills = sorted(self._load_all().values(), key=lambda s: (s.category, s.name))
        if category:
            skills = [s for s in skills if s.category == category]
        return skills

    def get_sync(self, name: str) -> Skill | None:
        try:
            return self._find(name)
        except SkillError:
            return None

    def read_file_sync(self, name: str, file_path: str) -> str:
        skill = self._require(name)
        rel = validate_file_path(file_path)
        assert skill.path is not None
        target = skill.path / rel
        if not target.is_file():
            listing = ", ".join(skill.files) or "none"
            raise SkillError(f"Skill '{name}' has no file {rel.as_posix()}. Its files: {listing}.")
        return target.read_text(encoding="utf-8", errors="replace")

    def revision_sync(self) -> str:
        digest = hashlib.sha1()
        for folder, _ in self._skill_dirs():
            try:
                st = (folder / SKILL_FILE).stat()
            except FileNotFoundError:
                continue
            digest.update(f"{folder.relative_to(self.root).as_posix()}:{st.st_mtime_ns}:{st.st_size}\n".encode())
        return digest.hexdigest()

    async def list_skills(self, category: str | None = None) -> list[Skill]:
        return self.list_sync(category)

    async def get(self, name: str) -> Skill | None:
        return self.get_sync(name)

    async def read_file(self, name: str, file_path: str) -> str:
        return self.read_file_sync(name, file_path)

    async def revision(self) -> str:
        return self.revision_sync()

    # ---------------------------------------------------------------- writing
    async def apply(self, change: SkillChange, *, author: str = "agent",
                    requested_by: dict[str, Any] | None = None) -> ChangeResult:
        return await asyncio.to_thread(self.apply_sync, change, author=author, commit=True)

    async def check(self, change: SkillChange, *, author: str = "agent") -> ChangeResult:
        return await asyncio.to_thread(self.apply_sync, change, author=author, commit=False)

    def apply_sync(self, change: SkillChange, *, author: str = "agent", commit: bool = True) -> ChangeResult:
        handler = getattr(self, f"_do_{change.action}", None) if change.action in (*ACTIONS, "archive") else None
        if handler is None:
            raise SkillError(f"Unknown action '{change.action}'. Use one of: {', '.join(ACTIONS)}.")
        validate_name(change.name)
        with self._lock.hold():
            return handler(change, author, commit)

    def _staging(self) -> Path:
        tmp = self.root / _TMP_DIR / secrets.token_hex(6)
        tmp.mkdir(parents=True)
        return tmp

    def _finalize_text(self, text: str, name: str, category: str, created_by: str) -> tuple[Skill, str]:
        """Validate SKILL.md text and pin the fields the library owns (category, created_by)."""
        parse_skill(text, folder_name=name)  # clear errors first, on the model's own text
        text = with_meta(text, category=category, created_by=created_by)
        check_size(text, MAX_SKILL_BYTES, "SKILL.md")
        skill = parse_skill(text, folder_name=name, category=category)
        scan_or_raise(text, "SKILL.md")
        return skill, text

    @staticmethod
    def _warnings(skill: Skill) -> list[str]:
        missing = skill.missing_sections()
        if missing:
            return [f"Note: the body has no {', '.join('## ' + m for m in missing)} section(s); "
                    f"add them so the skill is easy to follow."]
        return []

    def _do_create(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        name = change.name
        if change.content is None:
            raise SkillError("create needs content: the full SKILL.md with front matter.")
        existing = self._find(name)
        if existing is not None:
            raise SkillError(f"Skill '{name}' already exists (category {existing.category}); "
                             f"use patch or edit to change it.")
        category = change.category
        if not category:
            try:
                category = parse_skill(change.content, folder_name=name).meta.get("category")
            except SkillError:
                category = None
        category = validate_category(category)
        skill, text = self._finalize_text(change.content, name, category, author)
        if commit:
            staging = self._staging()
            try:
                folder = staging / name
                atomic_write_text(folder / SKILL_FILE, text)
                target = self.root / category / name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(folder, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return ChangeResult("create", name, f"Created skill '{name}' in category '{category}'.",
                            self._warnings(skill))

    def _do_edit(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        if change.content is None:
            raise SkillError("edit needs content: the full new SKILL.md. For small changes prefer patch.")
        new_skill, text = self._finalize_text(change.content, skill.name, skill.category, skill.created_by)
        if commit:
            assert skill.path is not None
            atomic_write_text(skill.path / SKILL_FILE, text)
        return ChangeResult("edit", skill.name, f"Rewrote skill '{skill.name}'.", self._warnings(new_skill))

    def _do_patch(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        assert skill.path is not None
        if not change.old_string:
            raise SkillError("patch needs old_string (the exact text to replace) and new_string.")
        if change.new_string is None:
            raise SkillError("patch needs new_string (use an empty string to delete old_string).")
        if change.file_path:
            rel = validate_file_path(change.file_path)
            target = skill.path / rel
            if not target.is_file():
                raise SkillError(f"Skill '{skill.name}' has no file {rel.as_posix()}.")
            label = rel.as_posix()
            current = target.read_text(encoding="utf-8")
        else:
            target, label, current = skill.path / SKILL_FILE, SKILL_FILE, skill.text
        count = current.count(change.old_string)
        if count == 0:
            raise SkillError(f"old_string was not found in {label} of '{skill.name}'. Call skill_view to read "
                             f"the current text and copy the passage exactly (whitespace included).")
        if count > 1:
            raise SkillError(f"old_string was found {count} times in {label} of '{skill.name}'; include more "
                             f"surrounding text so it matches exactly once.")
        updated = current.replace(change.old_string, change.new_string, 1)
        warnings: list[str] = []
        if target.name == SKILL_FILE and not change.file_path:
            new_meta_skill = parse_skill(updated, folder_name=skill.name)
            if new_meta_skill.created_by != skill.created_by and "created_by" in new_meta_skill.meta:
                raise SkillError("created_by cannot be changed.")
            new_skill, updated = self._finalize_text(updated, skill.name, skill.category, skill.created_by)
            warnings = self._warnings(new_skill)
        else:
            check_size(updated, MAX_FILE_BYTES, label)
            scan_or_raise(updated, label)
        if commit:
            atomic_write_text(target, updated)
        return ChangeResult("patch", skill.name, f"Patched {label} of skill '{skill.name}'.", warnings)

    def _do_delete(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        if commit:
            assert skill.path is not None
            staging = self._staging()
            os.rename(skill.path, staging / skill.name)  # atomic: gone from the library in one step
            shutil.rmtree(staging, ignore_errors=True)
            self._prune_empty(skill.path.parent)
        return ChangeResult("delete", skill.name, f"Deleted skill '{skill.name}'.")

    def _do_write_file(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        rel = validate_file_path(change.file_path)
        if change.file_content is None:
            raise SkillError("write_file needs file_content.")
        data = check_size(change.file_content, MAX_FILE_BYTES, rel.as_posix())
        scan_or_raise(change.file_content, rel.as_posix())
        if commit:
            assert skill.path is not None
            atomic_write(skill.path / rel, data)
        return ChangeResult("write_file", skill.name, f"Wrote {rel.as_posix()} in skill '{skill.name}'.")

    def _do_remove_file(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        rel = validate_file_path(change.file_path)
        assert skill.path is not None
        target = skill.path / rel
        if not target.is_file():
            listing = ", ".join(skill.files) or "none"
            raise SkillError(f"Skill '{skill.name}' has no file {rel.as_posix()}. Its files: {listing}.")
        if commit:
            target.unlink()
            self._prune_empty(target.parent, stop=skill.path)
        return ChangeResult("remove_file", skill.name, f"Removed {rel.as_posix()} from skill '{skill.name}'.")

    def _do_archive(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        where = self._archive_locked(skill) if commit else f"{ARCHIVE_DIR}/{skill.category}/{skill.name}"
        return ChangeResult("archive", skill.name, f"Archived skill '{skill.name}' to {where}.")

    def _prune_empty(self, folder: Path, stop: Path | None = None) -> None:
        stop = stop or self.root
        while folder != stop and folder != self.root and folder.is_dir():
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent

    # ---------------------------------------------------------------- curator support
    def _archive_locked(self, skill: Skill) -> str:
        assert skill.path is not None
        base = self.root / ARCHIVE_DIR / skill.category
        base.mkdir(parents=True, exist_ok=True)
        target = base / skill.name
        n = 1
        while target.exists():
            n += 1
            target = base / f"{skill.name}.{n}"
        os.rename(skill.path, target)
        self._prune_empty(skill.path.parent)
        return target.relative_to(self.root).as_posix()

    def archive_sync(self, name: str) -> str:
        with self._lock.hold():
            return self._archive_locked(self._require(name))

    async def archive(self, name: str) -> str:
        return await asyncio.to_thread(self.archive_sync, name)

    def archived(self) -> list[str]:
        base = self.root / ARCHIVE_DIR
        if not base.is_dir():
            return []
        return sorted(p.parent.relative_to(base).as_posix() for p in base.glob(f"*/*/{SKILL_FILE}"))

    def backup_sync(self, keep: int = 5) -> str:
        """A tar.gz of the library (skills, archive, pending queue, usage) under .backups/."""
        skip = {BACKUP_DIR, _TMP_DIR, _LOCK_DIR, REPORT_DIR}
        backups = self.root / BACKUP_DIR
        backups.mkdir(parents=True, exist_ok=True)
        with self._lock.hold():
            seq = 1 + max((_seq(p.name) for p in backups.glob("*.tar.gz")), default=0)
            target = backups / f"{seq:06d}-{_now_stamp()}.tar.gz"
            fd, tmp = tempfile.mkstemp(dir=backups, prefix=".tmp-", suffix=".part")
            os.close(fd)
            try:
                with tarfile.open(tmp, "w:gz") as tar:
                    for entry in sorted(self.root.iterdir(), key=lambda p: p.name):
                        if entry.name in skip or entry.name.startswith(".tmp-"):
                            continue
                        tar.add(entry, arcname=entry.name)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        for old in sorted(backups.glob("*.tar.gz"), key=lambda p: _seq(p.name))[:-keep or None]:
            old.unlink()
        return target.relative_to(self.root).as_posix()

    async def backup(self, keep: int = 5) -> str | None:
        return await asyncio.to_thread(self.backup_sync, keep)

    def backups(self) -> list[Path]:
        return sorted((self.root / BACKUP_DIR).glob("*.tar.gz"), key=lambda p: _seq(p.name))


def _seq(file_name: str) -> int:
    head = file_name.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


# -------------------------------------------------------------------- approval queue
@dataclass
class PendingChange:
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
    def from_dict(cls, data: dict[str, Any]) -> "PendingChange":
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
        self.dir = Path(root) / PENDING_DIR

    def submit(self, change: SkillChange, *, author: str = "agent", requested_by: dict[str, Any] | None = None,
               note: str = "") -> PendingChange:
        entry = PendingChange(id="p-" + secrets.token_hex(3), change=change, author=author,
                              requested_by=dict(requested_by or {}),
                              created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), note=note)
        atomic_write_text(self.dir / f"{entry.id}.json", json.dumps(entry.to_dict(), ensure_ascii=False, indent=1))
        return entry

    def list(self) -> list[PendingChange]:
        if not self.dir.is_dir():
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
        if not path.is_file():
            return None
        return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def find(self, action: str, name: str) -> PendingChange | None:
        return next((e for e in self.list() if e.change.action == action and e.change.name == name), None)

    def remove(self, pending_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{pending_id}.json").unlink()

    async def approve(self, pending_id: str, library: SkillLibrary) -> ChangeResult:
        entry = self.get(pending_id)
        if entry is None:
            raise SkillError(f"No pending change {pending_id!r}.")
        result = await library.apply(entry.change, author=entry.author)
        self.remove(pending_id)
        return result

    def reject(self, pending_id: str) -> PendingChange:
        entry = self.get(pending_id)
        if entry is None:
            raise SkillError(f"No pending change {pending_id!r}.")
        self.remove(pending_id)
        return entry


class GatedLibrary:
    """A library whose agent writes wait for an admin: validated and scanned now, applied on approval."""

    def __init__(self, inner: FileSkillLibrary, queue: PendingQueue | None = None) -> None:
        self.inner = inner
        self.queue = queue or PendingQueue(inner.root)

    def __getattr__(self, item: str) -> Any:  # reads, backups, archive: straight through
        return getattr(self.inner, item)

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
        checked = await self.inner.check(change, author=author)
        entry = self.queue.submit(change, author=author, requested_by=requested_by)
        return ChangeResult(change.action, change.name,
                            f"Queued for admin approval as {entry.id} ({change.summary()}); it takes effect "
                            f"once an admin approves it. Do not retry.", checked.warnings, pending_id=entry.id)

    async def archive(self, name: str) -> str:
        return await self.inner.archive(name)

    async def backup(self, keep: int = 5) -> str | None:
        return await self.inner.backup(keep)


def bot_library_dir(skills_root: Path | str, bot: str) -> Path:
    """`<skills_root>/<bot>/`, refusing bot names that would leave the folder."""
    if not bot or bot.startswith(".") or any(c in bot for c in "/\\\x00") or len(bot) > 100:
        raise SkillError(f"Invalid bot name {bot!r} for a skill library.")
    return Path(skills_root) / bot


def library_root(home: Path | str, bot: str) -> Path:
    """`<HERMES_HOME>/skills/<bot>/`."""
    return bot_library_dir(Path(home) / "skills", bot)


__all__ = [
    "ACTIONS", "ARCHIVE_DIR", "BACKUP_DIR", "ChangeResult", "DEFAULT_CATEGORY", "FileSkillLibrary", "GatedLibrary",
    "PENDING_DIR", "PendingChange", "PendingQueue", "REPORT_DIR", "SKILL_FILE", "SkillChange", "SkillLibrary",
    "USAGE_FILE", "atomic_write_text", "bot_library_dir", "library_root", "scan_or_raise",
]
