"""Each write to a skill is kept with its text before and after, by the library in the same locked step,
so an admin can read what a patch changed; only the newest `KEEP_REVISIONS` stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from skills_kit import skill_md

from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.history import HISTORY_DIR, KEEP_REVISIONS, revisions
from hermes_engine.skills.model import SkillError


def test_a_patch_is_kept_with_the_text_before_and_after(tmp_path: Path) -> None:
    library = FileSkillLibrary(tmp_path / "lib")
    library.apply_sync(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    before = library.get_sync("pg-dump").text
    library.apply_sync(SkillChange("patch", "pg-dump", old_string="## Steps", new_string="## Steps\n0. Breathe."),
                       author="review")
    patch, create = revisions(library.root, "pg-dump")
    assert (patch.action, patch.author, patch.file, patch.before) == ("patch", "review", "SKILL.md", before)
    assert patch.after == library.get_sync("pg-dump").text and "0. Breathe." in patch.after
    assert (create.action, create.before, create.after) == ("create", "", before)


def test_a_refused_write_leaves_no_history(tmp_path: Path) -> None:
    library = FileSkillLibrary(tmp_path / "lib")
    library.apply_sync(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    with pytest.raises(SkillError):
        library.apply_sync(SkillChange("patch", "pg-dump", old_string="not there", new_string="x"))
    library.apply_sync(SkillChange("patch", "pg-dump", old_string="## Steps", new_string="## Steps\n0. x"), commit=False)
    assert [r.action for r in revisions(library.root, "pg-dump")] == ["create"]


def test_only_the_newest_revisions_are_kept(tmp_path: Path) -> None:
    library = FileSkillLibrary(tmp_path / "lib")
    library.apply_sync(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    for n in range(KEEP_REVISIONS + 3):
        library.apply_sync(SkillChange("write_file", "pg-dump", file_path="references/notes.md", file_content=f"note {n}\n"))
    kept = revisions(library.root, "pg-dump")
    assert len(kept) == KEEP_REVISIONS == len(list((library.root / HISTORY_DIR / "pg-dump").glob("*.json")))
    assert kept[0].after == f"note {KEEP_REVISIONS + 2}\n" and kept[0].seq == KEEP_REVISIONS + 4


def test_the_history_is_not_taken_for_a_skill(tmp_path: Path) -> None:
    library = FileSkillLibrary(tmp_path / "lib")
    library.apply_sync(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    assert [s.name for s in library.list_sync()] == ["pg-dump"]
    assert revisions(library.root, "../etc") == []
