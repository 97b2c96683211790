"""Which skill library a bot has, and the one import path for the library's parts.

One library per bot profile, at `<HERMES_HOME>/skills/<bot>/`:

    <category>/<name>/SKILL.md          hand-written and agent-written side by side (also nested deeper,
                                        see `skills.folders`)
    <category>/<name>/references/…      optional supporting files (also templates/, scripts/, assets/)
    .archive/  .backups/  .reports/  .pending/  .usage.json   (curator, approval queue, usage)
    .history/<name>/…                   each write to a skill, its text before and after (`skills.history`)

The parts live apart: the storage contract in `skills.contract`, reading the folders in `skills.folders`,
transactional writes, archive and backups in `skills.files`, the approval queue in `skills.approvals`,
the rule that nothing follows a symlink in `hermes_engine.confine`.
Callers import them from here so that seam can move without touching them.
"""

from __future__ import annotations

from pathlib import Path

from hermes_engine.atomic import atomic_write_text
from hermes_engine.skills.approvals import GatedLibrary, PendingChange, PendingQueue
from hermes_engine.skills.contract import (
    ACTIONS,
    ARCHIVE_DIR,
    BACKUP_DIR,
    PENDING_DIR,
    REPORT_DIR,
    SKILL_FILE,
    USAGE_FILE,
    Action,
    ChangeResult,
    SkillChange,
    SkillLibrary,
)
from hermes_engine.skills.files import FileSkillLibrary, scan_or_raise
from hermes_engine.skills.model import DEFAULT_CATEGORY, SkillError


def bot_library_dir(skills_root: Path | str, bot: str) -> Path:
    """`<skills_root>/<bot>/`, refusing bot names that would leave the folder."""
    if not bot or bot.startswith(".") or any(c in bot for c in "/\\\x00") or len(bot) > 100:
        raise SkillError(f"Invalid bot name {bot!r} for a skill library.")
    return Path(skills_root) / bot


def library_root(home: Path | str, bot: str) -> Path:
    """`<HERMES_HOME>/skills/<bot>/`."""
    return bot_library_dir(Path(home) / "skills", bot)


__all__ = [
    "ACTIONS", "ARCHIVE_DIR", "Action", "BACKUP_DIR", "ChangeResult", "DEFAULT_CATEGORY", "FileSkillLibrary",
    "GatedLibrary", "PENDING_DIR", "PendingChange", "PendingQueue", "REPORT_DIR", "SKILL_FILE", "SkillChange",
    "SkillLibrary", "USAGE_FILE", "atomic_write_text", "bot_library_dir", "library_root", "scan_or_raise",
]
