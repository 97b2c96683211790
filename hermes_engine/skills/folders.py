"""The read side of a skill library kept as folders: find, parse and cache every SKILL.md under one root.

Hand-written skills sit beside agent-written ones and may be broken; reading must never fail because of
one bad file, so unreadable skills are skipped, logged, and listed in `problems` for the curator's report.
Parsed skills are cached by (mtime, size), because the prompt index and the hints read the whole library on
every session and most of it never changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from dataclasses import replace
from pathlib import Path

from hermes_engine.skills.contract import SKILL_FILE
from hermes_engine.skills.model import (
    SUPPORT_DIRS,
    Skill,
    SkillError,
    parse_skill,
    validate_category,
    validate_file_path,
    validate_name,
)

log = logging.getLogger(__name__)


class SkillFolders:
    """Reading one library folder: `<root>/<category>/<name>/SKILL.md` (or `<root>/<name>/SKILL.md`)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._cache: dict[Path, tuple[tuple[int, int], Skill | None, str | None]] = {}
        self._cache_lock = threading.Lock()
        self.problems: dict[str, str] = {}  # unreadable hand-written skills: relative path -> reason

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

    # The async side reads in a worker thread: the hints ask for the revision on every message.
    async def list_skills(self, category: str | None = None) -> list[Skill]:
        return await asyncio.to_thread(self.list_sync, category)

    async def get(self, name: str) -> Skill | None:
        return await asyncio.to_thread(self.get_sync, name)

    async def read_file(self, name: str, file_path: str) -> str:
        return await asyncio.to_thread(self.read_file_sync, name, file_path)

    async def revision(self) -> str:
        return await asyncio.to_thread(self.revision_sync)


__all__ = ["SkillFolders"]
