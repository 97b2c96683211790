"""The read side of a skill library kept as folders: find, parse and cache every SKILL.md under one root.

Hand-written skills sit beside agent-written ones and may be broken; reading must never fail because of
one bad file, so unreadable skills (and symlinked folders, which are never followed) are skipped, logged,
and listed in `problems` for the curator's report.
Parsed skills are cached by (mtime, size), because the prompt index and the hints read the whole library on
every session and most of it never changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import threading
from dataclasses import replace
from pathlib import Path

from hermes_engine.confine import inside, is_real_dir, is_regular_file, lstat_or_none, read_text
from hermes_engine.policy import security
from hermes_engine.skills.contract import SKILL_FILE
from hermes_engine.skills.model import (
    SUPPORT_DIRS,
    Skill,
    SkillBlocked,
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
        self._cache: dict[str, tuple[tuple[int, int], Skill | None, str | None]] = {}
        self._cache_lock = threading.Lock()
        self.problems: dict[str, str] = {}  # skipped skills: relative path -> reason (for the curator's report)

    def _walk(self) -> tuple[list[tuple[str, str, str | None]], dict[str, str]]:
        """(folder, relative path, category from layout) for every skill folder, in a stable depth-first
        order by name, and what was skipped. Plain strings and `os.scandir`: this runs on every lookup."""
        found: list[tuple[str, str, str | None]] = []
        skipped: dict[str, str] = {}

        def visit(folder: str, prefix: str, depth: int, top: str | None, in_skill: bool) -> None:
            try:
                with os.scandir(folder) as it:
                    entries = [e for e in it if not e.name.startswith(".")]
            except OSError:
                return
            entries.sort(key=lambda e: e.name)
            for entry in entries:
                if in_skill and entry.name in SUPPORT_DIRS:
                    continue
                rel = prefix + entry.name
                if entry.is_symlink():
                    if entry.is_dir():
                        skipped[rel] = _SYMLINK
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                marker = lstat_or_none(entry.path + os.sep + SKILL_FILE)
                is_skill = marker is not None and stat.S_ISREG(marker.st_mode)
                if is_skill:
                    found.append((entry.path, rel, top))
                elif marker is not None and stat.S_ISLNK(marker.st_mode):
                    skipped[rel] = f"{SKILL_FILE} is {_SYMLINK}"
                if depth < MAX_DEPTH:
                    visit(entry.path, rel + "/", depth + 1, top or entry.name, is_skill)

        if self.root.is_dir():  # the root itself may be a link (a data folder on another volume)
            visit(str(self.root), "", 1, None, False)
        return found, skipped

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

    def _with_files(self, skill: Skill) -> Skill:
        return replace(skill, files=self._support_files(self._folder(skill)))

    def _load_one(self, folder: str, category: str | None) -> tuple[Skill | None, str | None]:
        """The parsed skill (without its file listing) or why it could not be read; cached by (mtime, size)."""
        path = folder + os.sep + SKILL_FILE
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None, None
        key = (st.st_mtime_ns, st.st_size)
        with self._cache_lock:
            cached = self._cache.get(path)
        if cached and cached[0] == key:
            return cached[1], cached[2]
        skill, problem = None, None
        try:
            text = read_text(Path(path))
            if blocked := security.blocked_on_load(text, kind="skill"):  # scanned on load as on write
                raise SkillBlocked(f"blocked by the security scan: {security.placeholder(blocked)}", blocked)
            skill = parse_skill(text, category=category, path=Path(folder), updated_at=st.st_mtime)
        except (SkillError, UnicodeDecodeError, OSError) as exc:
            problem = str(exc)
            log.warning("skipping unreadable skill %s: %s", path, problem)
        with self._cache_lock:
            self._cache[path] = (key, skill, problem)
        return skill, problem

    def _load_all(self, *, files: bool = True) -> dict[str, Skill]:
        """Every readable skill by its declared name; `files=False` skips listing supporting files (lookups)."""
        dirs, problems = self._walk()
        loaded: list[tuple[bool, int, str, Skill]] = []
        for order, (folder, rel, category) in enumerate(dirs):
            skill, problem = self._load_one(folder, category)
            if skill is not None:
                loaded.append((skill.name != rel.rsplit("/", 1)[-1], order, rel, skill))
            elif problem:
                problems[rel] = problem
        skills: dict[str, Skill] = {}
        where: dict[str, str] = {}
        for _, _, rel, skill in sorted(loaded, key=lambda t: t[:2]):  # the folder bearing the name, then walk order
            if skill.name in skills:
                problems[rel] = (f"its front matter declares the name '{skill.name}', which {where[skill.name]} "
                                 f"already has; rename one of them")
                continue
            skills[skill.name] = self._with_files(skill) if files else skill
            where[skill.name] = rel
        self.problems = problems
        return skills

    @staticmethod
    def _folder(skill: Skill) -> Path:
        assert skill.path is not None
        return skill.path

    def _find(self, name: str, *, files: bool = False) -> Skill | None:
        validate_name(name)
        skill = self._load_all(files=False).get(name)
        return self._with_files(skill) if skill is not None and files else skill

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
            return self._find(name, files=True)
        except SkillError:
            return None

    def read_file_sync(self, name: str, file_path: str) -> str:
        skill = self._require(name)
        rel = validate_file_path(file_path)
        target = inside(self._folder(skill), rel, owner="skills", error=SkillError)
        if not is_regular_file(target):
            listing = ", ".join(self._support_files(self._folder(skill))) or "none"
            raise SkillError(f"Skill '{name}' has no file {rel.as_posix()}. Its files: {listing}.")
        return security.scan_on_load(read_text(target, errors="replace"), kind="skill")

    def revision_sync(self) -> str:
        digest = hashlib.sha1()
        for folder, rel, _ in self._walk()[0]:
            try:
                st = os.stat(folder + os.sep + SKILL_FILE)
            except FileNotFoundError:
                continue
            digest.update(f"{rel}:{st.st_mtime_ns}:{st.st_size}\n".encode())
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


__all__ = ["MAX_DEPTH", "SkillFolders"]
