"""Each change to a skill's text, kept beside the library as `<library>/.history/<name>/<seq>.json`.

A patch the agent or the background review makes is judged later, by an admin reading what it changed: the
text before and after each write is kept (the newest `KEEP_REVISIONS` per skill), written by the library in
the same locked step as the change itself. Being a file of the library folder, it lives wherever the library
does: on disk, or in the database through `skills.database`, which keeps every file of the folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write_text
from hermes_engine.confine import is_real_dir, own_dir
from hermes_engine.skills.model import NAME_RE, SkillError

log = logging.getLogger(__name__)

HISTORY_DIR = ".history"
KEEP_REVISIONS = 20


@dataclass(frozen=True)
class Revision:
    """One write: which file of the skill (`SKILL.md` or a supporting file), by whom, and its text before
    (empty for a new skill or file) and after."""

    seq: int
    at: str
    action: str
    author: str
    file: str
    before: str
    after: str

    @property
    def at_time(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.at)
        except ValueError:
            return None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Revision:
        return cls(int(data["seq"]), str(data.get("at", "")), str(data.get("action", "")),
                   str(data.get("author", "")), str(data.get("file", "")), str(data.get("before", "")),
                   str(data.get("after", "")))


def record(library_root: Path, name: str, *, action: str, author: str, file: str, before: str,
           after: str) -> None:
    """Keep one write (called by the library under its lock, after the write landed); the oldest beyond
    `KEEP_REVISIONS` go. A failure to keep it is logged, never undoes the change."""
    if before == after or not NAME_RE.match(name):
        return
    try:
        folder = own_dir(own_dir(library_root, HISTORY_DIR, error=SkillError), name, error=SkillError)
        seqs = sorted(_seq(p) for p in folder.glob("*.json"))
        seq = (seqs[-1] if seqs else 0) + 1
        revision = Revision(seq, datetime.now(UTC).isoformat(timespec="seconds"), action, author, file, before,
                            after)
        atomic_write_text(folder / f"{seq:06d}.json", json.dumps(asdict(revision), ensure_ascii=False))
        for old in seqs[:max(0, len(seqs) + 1 - KEEP_REVISIONS)]:
            with contextlib.suppress(FileNotFoundError):
                (folder / f"{old:06d}.json").unlink()
    except (OSError, SkillError):
        log.warning("skill %s: could not keep the history of this change", name, exc_info=True)


def revisions(library_root: Path, name: str) -> list[Revision]:
    """A skill's kept writes, newest first (nothing for a name that is no skill's)."""
    if not NAME_RE.match(name):
        return []
    folder = Path(library_root) / HISTORY_DIR / name
    if not is_real_dir(Path(library_root) / HISTORY_DIR) or not is_real_dir(folder):
        return []
    found = []
    for path in folder.glob("*.json"):
        if path.is_symlink():
            continue
        try:
            found.append(Revision.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            log.warning("unreadable skill history %s: %s", path, exc)
    return sorted(found, key=lambda r: -r.seq)


def _seq(path: Path) -> int:
    return int(path.stem) if path.stem.isdigit() else 0


__all__ = ["HISTORY_DIR", "KEEP_REVISIONS", "Revision", "record", "revisions"]
