"""Confinement: a path stays inside its folder and never passes through a symlink. The skill library (every
path the skill tools touch stays inside its skill's folder, its bookkeeping folders inside the library) and
the workspace (every file tool path inside the conversation's folder) both ask here.

A skill library holds hand-installed skill packs, so a symlink inside it may point anywhere: following one
would let `write_file` write, `remove_file` delete and `patch`/`skill_view` read outside the library. The
rule is therefore the simplest one that cannot be argued with: the library never follows a symlink. A
symlinked skill or category folder is skipped when the library is read (and named in its problems), a
path inside a skill that passes through a symlink is refused, and a bookkeeping folder (`.tmp`, `.locks`,
`.archive`, `.pending`, `.backups`, `.reports`) that is a symlink is refused before anything is written,
moved or deleted in it. Checks run just before each access, under the library's write lock.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def lstat_or_none(path: Path | str) -> os.stat_result | None:
    """The entry itself (a symlink is not followed), or None when nothing is there."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def is_regular_file(path: Path) -> bool:
    """A regular file, not a symlink to one."""
    st = lstat_or_none(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_real_dir(path: Path) -> bool:
    """A folder, not a symlink to one."""
    st = lstat_or_none(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def inside(folder: Path, rel: PurePosixPath, *, owner: str, error: type[Exception]) -> Path:
    """`folder/rel`, refused (as `error`) when the folder or any existing part of `rel` is a symlink.

    `rel` is already validated (relative, no `..`); parts that do not exist yet are created later as real
    folders by the writer, so only the existing prefix can lead elsewhere. The workspace tools share this
    rule: `owner` names who refuses, `error` is what the owner's callers understand."""
    if not is_real_dir(folder):
        raise error(f"The folder {folder.name} is a symlink or missing; {owner} never follow symlinks.")
    current = folder
    for part in rel.parts:
        current = current / part
        st = lstat_or_none(current)
        if st is None:
            break
        if stat.S_ISLNK(st.st_mode):
            where = current.relative_to(folder).as_posix()
            raise error(f"{rel.as_posix()} goes through a symlink ({where}); {owner} never follow symlinks, "
                        f"so nothing was read, written or removed. A person can replace the link with a "
                        f"real file.")
    return folder / rel


def read_text(path: Path, errors: str = "strict") -> str:
    """A file's text (a byte-order mark dropped), opened without following a symlink planted since the
    path was checked."""
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode("utf-8-sig", errors=errors)


def own_dir(root: Path, name: str, *, error: type[Exception]) -> Path:
    """`root/name`, a bookkeeping folder (of the skill library), created when missing; refused (as `error`)
    when something other than a real folder (a planted symlink) sits in its place."""
    path = root / name
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    if not is_real_dir(path):
        raise error(f"{path} is a symlink or not a folder; the skill library never follows symlinks, so "
                    f"nothing was changed. Replace it with a real folder.")
    return path


__all__ = ["inside", "is_real_dir", "is_regular_file", "lstat_or_none", "own_dir", "read_text"]
