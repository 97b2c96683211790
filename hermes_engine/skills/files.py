"""Writing a skill library kept as folders: every change is one transaction, plus archive and backups.

A change is built, validated and scanned in full before anything touches the library, then lands with an
atomic replace or rename, so a refused or crashed write leaves nothing behind. Writers hold one lock per
library (a thread lock shared in the process plus `flock` across processes, re-entrant within a thread),
so the gateway, the CLI and the curator can all patch one skill at once and every patch lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write, atomic_write_text
from hermes_engine.confine import inside, is_real_dir, is_regular_file, own_dir, read_text
from hermes_engine.filelock import FileLock
from hermes_engine.policy import security
from hermes_engine.skills.contract import (
    ACTIONS,
    ARCHIVE_DIR,
    BACKUP_DIR,
    REPORT_DIR,
    SKILL_FILE,
    ChangeResult,
    SkillChange,
)
from hermes_engine.skills.folders import SkillFolders
from hermes_engine.skills.history import record as record_history
from hermes_engine.skills.model import (
    MAX_FILE_BYTES,
    SUPPORT_DIRS,
    Skill,
    SkillBlocked,
    SkillError,
    check_size,
    check_skill_length,
    parse_skill,
    validate_category,
    validate_file_path,
    validate_name,
    with_meta,
)
from hermes_engine.skills.usage import UsageLog, utcnow

log = logging.getLogger(__name__)

_TMP_DIR = ".tmp"
_LOCK_DIR = ".locks"
LOCK_FILE = f"{_LOCK_DIR}/library.lock"


def scan_or_raise(text: str, what: str, mode: security.ScanMode = security.ORDINARY) -> None:
    """Run the shared security scanner over text the agent wants to save, as the change asks (`mode`)."""
    findings = security.scan_text(text, kind="skill", mode=mode)
    if findings:
        raise SkillBlocked(f"Blocked by the security scan in {what}: {security.explain(findings)} "
                           f"Nothing was written; remove that content and try again.", findings)


def _now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class FileSkillLibrary(SkillFolders):
    """Skills as folders under `root` (one bot's library): the folder implementation of `SkillLibrary`."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.root / LOCK_FILE)
        self._clean_staging()

    def __repr__(self) -> str:
        return f"FileSkillLibrary({str(self.root)!r})"

    def _clean_staging(self, older_than: float = 3600.0) -> None:
        """Remove staging folders a crashed writer left behind (never touches live skills, and never a folder
        a symlink planted in place of the staging folder points to)."""
        staging = self.root / _TMP_DIR
        if not is_real_dir(staging):
            return
        for entry in staging.iterdir():
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > older_than:
                    shutil.rmtree(entry, ignore_errors=True)

    # ---------------------------------------------------------------- writing
    async def apply(self, change: SkillChange, *, author: str = "agent",
                    requested_by: dict[str, Any] | None = None) -> ChangeResult:
        return await asyncio.to_thread(self.apply_sync, change, author=author, commit=True)

    async def check(self, change: SkillChange, *, author: str = "agent") -> ChangeResult:
        return await asyncio.to_thread(self.apply_sync, change, author=author, commit=False)

    def apply_sync(self, change: SkillChange, *, author: str = "agent", commit: bool = True) -> ChangeResult:
        handlers: dict[str, Callable[[SkillChange, str, bool], ChangeResult]] = {
            "create": self._do_create, "patch": self._do_patch, "edit": self._do_edit, "delete": self._do_delete,
            "write_file": self._do_write_file, "remove_file": self._do_remove_file, "archive": self._do_archive,
        }
        handler = handlers.get(change.action)
        if handler is None:
            raise SkillError(f"Unknown action '{change.action}'. Use one of: {', '.join(ACTIONS)}.")
        validate_name(change.name)
        with self._locked():
            return handler(change, author, commit)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        own_dir(self.root, _LOCK_DIR, error=SkillError)  # the lock file is never created through a planted symlink
        with self._lock.hold():
            yield

    def _staging(self) -> Path:
        tmp = own_dir(self.root, _TMP_DIR, error=SkillError) / secrets.token_hex(6)
        tmp.mkdir()
        return tmp

    def _finalize_text(self, text: str, name: str, category: str | None, created_by: str,
                       mode: security.ScanMode) -> tuple[Skill, str]:
        """Validate SKILL.md text and pin the fields the library owns: `created_by`, and `category` unless the
        folder layout decides it (None). The front matter is rewritten only when one of them would read
        differently, so patching a hand-written skill keeps its front matter as the person wrote it."""
        parsed = parse_skill(text, folder_name=name)  # clear errors first, on the model's own text
        if not parsed.body.strip():
            raise SkillError("SKILL.md has nothing after its front matter: write the skill itself below it "
                             "(## When to use, ## Steps, ## Pitfalls). Nothing was written.")
        pins: dict[str, str] = {}
        if parsed.created_by != created_by:
            pins["created_by"] = created_by
        if category is not None and parsed.category != category:
            pins["category"] = category
        if pins:
            text = with_meta(text, **pins)
        check_skill_length(text)
        skill = parse_skill(text, folder_name=name, category=category)
        scan_or_raise(text, "SKILL.md", mode)
        return skill, text

    def _own_category(self, skill: Skill) -> str | None:
        """The category a skill's front matter must hold: only a skill straight under the root has no folder
        to give it one."""
        return skill.category if skill.path is not None and skill.path.parent == self.root else None

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
        target = self.root / category / name
        if os.path.lexists(target) or os.path.islink(target.parent):
            raise SkillError(f"A folder {category}/{name} already exists (or its category folder is a symlink); "
                             f"choose another name or category.")
        if name in SUPPORT_DIRS and is_regular_file(target.parent / SKILL_FILE):
            raise SkillError(f"'{name}' is a support folder of the skill in {category}/; choose another name.")
        parse_skill(change.content, folder_name=name)  # clear errors first, on the model's own text
        content = with_meta(change.content, category=category, created_by=author)  # a new skill says both
        skill, text = self._finalize_text(content, name, category, author, change.scan_mode)
        if commit:
            staging = self._staging()
            try:
                folder = staging / name
                atomic_write_text(folder / SKILL_FILE, text)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(folder, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            record_history(self.root, name, action="create", author=author, file=SKILL_FILE, before="", after=text)
        return ChangeResult("create", name, f"Created skill '{name}' in category '{category}'.",
                            self._warnings(skill))

    def _do_edit(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        if change.content is None:
            raise SkillError("edit needs content: the full new SKILL.md. For small changes prefer patch.")
        new_skill, text = self._finalize_text(change.content, skill.name, self._own_category(skill),
                                              skill.created_by, change.scan_mode)
        if commit:
            assert skill.path is not None
            atomic_write_text(skill.path / SKILL_FILE, text)
            record_history(self.root, skill.name, action="edit", author=author, file=SKILL_FILE, before=skill.text,
                           after=text)
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
            target = inside(skill.path, rel, owner="skills", error=SkillError)
            if not is_regular_file(target):
                raise SkillError(f"Skill '{skill.name}' has no file {rel.as_posix()}.")
            label = rel.as_posix()
            current = read_text(target)
        else:
            target, label, current = skill.path / SKILL_FILE, SKILL_FILE, skill.text
        count = current.count(change.old_string)
        if count == 0:
            raise SkillError(f"old_string was not found in {label} of '{skill.name}'. Call skill_view to read "
                             f"the current text and copy the passage exactly (whitespace included).")
        if count > 1 and not change.replace_all:
            raise SkillError(f"old_string was found {count} times in {label} of '{skill.name}'; include more "
                             f"surrounding text so it matches exactly once, or set replace_all to change "
                             f"every occurrence.")
        updated = current.replace(change.old_string, change.new_string, -1 if change.replace_all else 1)
        warnings: list[str] = []
        if target.name == SKILL_FILE and not change.file_path:
            new_meta_skill = parse_skill(updated, folder_name=skill.name)  # the declared name stays
            if new_meta_skill.created_by != skill.created_by and "created_by" in new_meta_skill.meta:
                raise SkillError("created_by cannot be changed.")
            new_skill, updated = self._finalize_text(updated, skill.name, self._own_category(skill),
                                                     skill.created_by, change.scan_mode)
            warnings = self._warnings(new_skill)
        else:
            check_size(updated, MAX_FILE_BYTES, label)
            scan_or_raise(updated, label, change.scan_mode)
        if commit:
            atomic_write_text(target, updated)
            record_history(self.root, skill.name, action="patch", author=author, file=label, before=current,
                           after=updated)
        times = f" ({count} occurrences)" if count > 1 else ""
        return ChangeResult("patch", skill.name, f"Patched {label} of skill '{skill.name}'{times}.", warnings)

    def _do_delete(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        absorbed = (change.absorbed_into or "").strip()
        if absorbed:
            validate_name(absorbed, "absorbed_into skill name")
            if absorbed == skill.name:
                raise SkillError("absorbed_into cannot equal the skill being deleted; name the skill that now "
                                 "holds its content, or leave it empty.")
            if self._find(absorbed) is None:
                raise SkillError(f"absorbed_into names '{absorbed}', which does not exist; save the umbrella "
                                 f"skill first. Nothing was deleted.")
        self._refuse_if_nesting(skill, "deleted")
        if commit:
            assert skill.path is not None
            staging = self._staging()
            os.rename(skill.path, staging / skill.name)  # atomic: gone from the library in one step
            shutil.rmtree(staging, ignore_errors=True)
            self._prune_empty(skill.path.parent)
            if absorbed:
                self._note_absorbed(skill.name, absorbed)
        into = f" (absorbed into '{absorbed}')" if absorbed else ""
        return ChangeResult("delete", skill.name, f"Deleted skill '{skill.name}'{into}.")

    def _note_absorbed(self, name: str, into: str) -> None:
        """Where a merged skill's content went, kept in the usage file for the curator and its reports."""
        try:
            UsageLog.for_library(self.root).annotate(
                name, status="deleted", status_since=utcnow().isoformat(timespec="seconds"), absorbed_into=into)
        except OSError:
            log.warning("skill %s: could not record that it was absorbed into %s", name, into, exc_info=True)

    def _do_write_file(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        rel = validate_file_path(change.file_path)
        if change.file_content is None:
            raise SkillError("write_file needs file_content.")
        data = check_size(change.file_content, MAX_FILE_BYTES, rel.as_posix())
        scan_or_raise(change.file_content, rel.as_posix(), change.scan_mode)
        assert skill.path is not None
        target = inside(skill.path, rel, owner="skills", error=SkillError)
        if os.path.lexists(target) and not is_regular_file(target):
            raise SkillError(f"{rel.as_posix()} in skill '{skill.name}' exists and is not a file.")
        if commit:
            before = read_text(target, errors="replace") if is_regular_file(target) else ""
            atomic_write(target, data)
            record_history(self.root, skill.name, action="write_file", author=author, file=rel.as_posix(),
                           before=before, after=change.file_content)
        return ChangeResult("write_file", skill.name, f"Wrote {rel.as_posix()} in skill '{skill.name}'.")

    def _do_remove_file(self, change: SkillChange, author: str, commit: bool) -> ChangeResult:
        skill = self._require(change.name)
        rel = validate_file_path(change.file_path)
        assert skill.path is not None
        target = inside(skill.path, rel, owner="skills", error=SkillError)
        if not is_regular_file(target):
            listing = ", ".join(self._support_files(skill.path)) or "none"
            raise SkillError(f"Skill '{skill.name}' has no file {rel.as_posix()}. Its files: {listing}.")
        if commit:
            before = read_text(target, errors="replace")
            target.unlink()
            self._prune_empty(target.parent, stop=skill.path)
            record_history(self.root, skill.name, action="remove_file", author=author, file=rel.as_posix(),
                           before=before, after="")
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
    def _refuse_if_nesting(self, skill: Skill, fate: str) -> None:
        """A skill's folder may hold other skills (as in Hermes Agent's packs); moving the folder would take
        them along unasked."""
        assert skill.path is not None
        inner = sorted(s.name for s in self._load_all(files=False).values()
                       if s.path is not None and s.path != skill.path and s.path.is_relative_to(skill.path))
        if inner:
            raise SkillError(f"Skill '{skill.name}' holds other skills in its folder ({', '.join(inner)}), which "
                             f"would be {fate} with it; move them out first. Nothing was changed.")

    def _archive_locked(self, skill: Skill) -> str:
        self._refuse_if_nesting(skill, "archived")
        assert skill.path is not None
        base = own_dir(own_dir(self.root, ARCHIVE_DIR, error=SkillError), skill.category, error=SkillError)
        target = base / skill.name
        n = 1
        while target.exists():
            n += 1
            target = base / f"{skill.name}.{n}"
        os.rename(skill.path, target)
        self._prune_empty(skill.path.parent)
        return target.relative_to(self.root).as_posix()

    def archive_sync(self, name: str) -> str:
        with self._locked():
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
        with self._locked():
            backups = own_dir(self.root, BACKUP_DIR, error=SkillError)
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


__all__ = ["FileSkillLibrary", "LOCK_FILE", "scan_or_raise"]
