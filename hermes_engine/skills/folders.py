"""The read side of a skill library kept as folders: find, parse and cache every SKILL.md under one root.

Hand-written skills sit beside agent-written ones and may be broken; reading must never fail because of
one bad file, so unreadable skills (and symlinked folders, which are never followed) are skipped, logged,
and listed in `problems` for the curator's report.
Parsed skills are cached by (mtime, size), because the prompt index and the hints read the whole library on
every session and most of it never changes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path

from hermes_engine.skills.confine import inside, is_real_dir, is_regular_file, read_text
from hermes_engine.skills.contract import SKILL_FILE
from hermes_engine.skills.model import (
    SUPPORT_DIRS,
    Skill,
    SkillError,
    parse_skill,
    validate_file_path,
    validate_name,
)

log = logging.getLogger(__name__)


MAX_DEPTH = 4  # <root>/a/b/c/<name>/SKILL.md: Hermes Agent's bundled skills sit up to three folders deep
_SYMLINK = "a symlink; the skill library never follows symlinks, so it is skipped"


class SkillFolders:
    """Reading one library folder. Every folder holding a `SKILL.md` is a skill, at any depth up to
    `MAX_DEPTH`: `<root>/<name>/`, `<root>/<category>/<name>/`, `<root>/<category>/<group>/<name>/`, and a
    skill may hold further skills in its own subfolders (its support folders excepted). The category is the
    top folder (as in Hermes Agent); a skill straight under the root takes it from its front matter.

    A skill is known by the `name` its front matter declares, which may differ from its folder. When two
    skills declare one name, the one whose folder bears that name wins, then the first by path; the other
    is skipped and named in `problems`."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._cache: dict[Path, tuple[tuple[int, int], Skill | None, str | None]] = {}
        self._cache_lock = threading.Lock()
        self.problems: dict[str, str] = {}  # skipped skills: relative path -> reason (for the curator's report)

    def _rel(self, folder: Path) -> str:
        return folder.relative_to(self.root).as_posix()

    def _walk(self) -> tuple[list[tuple[Path, str | None]], dict[str, str]]:
        """(folder, category from layout) for every skill folder in a stable order, and what was skipped."""
        found: list[tuple[Path, str | None]] = []
        skipped: dict[str, str] = {}

        def visit(folder: Path, parts: tuple[str, ...], in_skill: bool) -> None:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                return
            for entry in entries:
                if entry.name.startswith(".") or (in_skill and entry.name in SUPPORT_DIRS):
                    continue
                rel = (*parts, entry.name)
                if entry.is_symlink():
                    if entry.is_dir():
                        skipped["/".join(rel)] = _SYMLINK
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                is_skill = is_regular_file(path / SKILL_FILE)
                if is_skill:
                    found.append((path, rel[0] if len(rel) > 1 else None))
                elif (path / SKILL_FILE).is_symlink():
                    skipped["/".join(rel)] = f"{SKILL_FILE} is {_SYMLINK}"
                if len(rel) < MAX_DEPTH:
                    visit(path, rel, is_skill)

        if self.root.is_dir():  # the root itself may be a link (a data folder on another volume)
            visit(self.root, (), False)
        return found, skipped

    def _skill_dirs(self) -> list[tuple[Path, str | None]]:
        return self._walk()[0]

    @staticmethod
    def _support_files(folder: Path) -> tuple[str, ...]:
        """Supporting files, relative to the skill folder; hidden files and symlinks are not listed."""
        files: list[str] = []
        for sub in SUPPORT_DIRS:
            base = folder / sub
            if not is_real_dir(base):
                continue
            for dirpath, dirnames, filenames in os.walk(base):  # os.walk never descends into symlinked folders
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for file_name in sorted(filenames):
                    path = Path(dirpath) / file_name
                    if not file_name.startswith(".") and is_regular_file(path):
                        files.append(path.relative_to(folder).as_posix())
        return tuple(files)

    def _load_one(self, folder: Path, category: str | None) -> tuple[Skill | None, str | None]:
        path = folder / SKILL_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return None, None
        key = (st.st_mtime_ns, st.st_size)
        with self._cache_lock:
            cached = self._cache.get(path)
        if cached and cached[0] == key:
            skill, problem = cached[1], cached[2]
        else:
            skill, problem = None, None
            try:
                skill = parse_skill(read_text(path), category=category, path=folder, updated_at=st.st_mtime)
            except (SkillError, UnicodeDecodeError, OSError) as exc:
                problem = str(exc)
                log.warning("skipping unreadable skill %s: %s", path, problem)
            with self._cache_lock:
                self._cache[path] = (key, skill, problem)
        if skill is None:
            return None, problem
        return replace(skill, files=self._support_files(folder)), None

    def _load_all(self) -> dict[str, Skill]:
        dirs, problems = self._walk()
        loaded: list[Skill] = []
        for folder, category in dirs:
            skill, problem = self._load_one(folder, category)
            if skill is not None:
                loaded.append(skill)
            elif problem:
                problems[self._rel(folder)] = problem
        skills: dict[str, Skill] = {}
        for skill in sorted(loaded, key=lambda s: (s.name != self._folder(s).name, self._rel(self._folder(s)))):
            kept = skills.get(skill.name)
            if kept is not None:
                problems[self._rel(self._folder(skill))] = (
                    f"its front matter declares the name '{skill.name}', which {self._rel(self._folder(kept))} "
                    f"already has; rename one of them")
                continue
            skills[skill.name] = skill
        self.problems = problems
        return skills

    @staticmethod
    def _folder(skill: Skill) -> Path:
        assert skill.path is not None
        return skill.path

    def _find(self, name: str) -> Skill | None:
        validate_name(name)
        return self._load_all().get(name)

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
        target = inside(self._folder(skill), rel)
        if not is_regular_file(target):
            listing = ", ".join(skill.files) or "none"
            raise SkillError(f"Skill '{name}' has no file {rel.as_posix()}. Its files: {listing}.")
        return read_text(target, errors="replace")

    def revision_sync(self) -> str:
        digest = hashlib.sha1()
        for folder, _ in self._skill_dirs():
            try:
                st = (folder / SKILL_FILE).stat()
            except FileNotFoundError:
                continue
            digest.update(f"{self._rel(folder)}:{st.st_mtime_ns}:{st.st_size}\n".encode())
        return digest.hexdigest()

    async def list_skills(self, category: str | None = None) -> list[Skill]:
        return self.list_sync(category)

    async def get(self, name: str) -> Skill | None:
        return self.get_sync(name)

    async def read_file(self, name: str, file_path: str) -> str:
        return self.read_file_sync(name, file_path)

    async def revision(self) -> str:
        return self.revision_sync()


__all__ = ["MAX_DEPTH", "SkillFolders"]
