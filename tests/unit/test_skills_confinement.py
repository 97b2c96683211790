"""Confinement: no skill tool reads, writes or deletes outside its skill's folder, and the library's own
bookkeeping never follows a symlink planted in its place. The library never follows symlinks at all."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from postgres import STATE_BACKENDS
from skills_kit import call, skill_md, skill_tools, snapshot, write_skill
from state_backends import skill_library

from hermes_engine.skills.approvals import GatedLibrary
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.history import revisions
from hermes_engine.skills.model import SkillError
from hermes_engine.skills.report import CuratorReport, save_report
from hermes_engine.skills.usage import UsageLog


@pytest.fixture(params=STATE_BACKENDS)
async def library(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FileSkillLibrary]:
    """On each backend: folders, or the database (SQLite, PostgreSQL) through the replica's copy."""
    async with skill_library(request.param, tmp_path) as made:
        await made.list_skills()
        yield made


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("the person's own file\n", encoding="utf-8")
    return folder


@pytest.fixture
async def skill(library: FileSkillLibrary) -> Path:
    await library.apply(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    return library.root / "db" / "pg-dump"


def outside_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


async def test_write_file_through_a_symlinked_folder_in_a_skill_writes_nothing_outside(library, skill, outside):
    (skill / "references").mkdir()
    (skill / "references" / "escape").symlink_to(outside, target_is_directory=True)
    before = outside_files(outside)

    result = await call(skill_tools(), library, "skill_manage", action="write_file", name="pg-dump",
                        file_path="references/escape/owned.md", file_content="written through a link\n")

    assert result.is_error and "symlink" in result.content and "nothing was" in result.content
    assert outside_files(outside) == before


async def test_write_file_onto_a_symlinked_file_is_refused_and_the_link_target_kept(library, skill, outside):
    (skill / "scripts").mkdir()
    (skill / "scripts" / "run.sh").symlink_to(outside / "keep.txt")

    result = await call(skill_tools(), library, "skill_manage", action="write_file", name="pg-dump",
                        file_path="scripts/run.sh", file_content="echo replaced\n")

    assert result.is_error and "symlink" in result.content
    assert (skill / "scripts" / "run.sh").is_symlink()
    assert (outside / "keep.txt").read_text(encoding="utf-8") == "the person's own file\n"


async def test_remove_file_through_a_symlink_never_deletes_outside_the_library(library, skill, outside):
    (skill / "references").mkdir()
    (skill / "references" / "escape").symlink_to(outside, target_is_directory=True)

    result = await call(skill_tools(), library, "skill_manage", action="remove_file", name="pg-dump",
                        file_path="references/escape/keep.txt")

    assert result.is_error and "symlink" in result.content
    assert (outside / "keep.txt").is_file()


async def test_patch_and_skill_view_never_read_a_file_outside_through_a_symlink(library, skill, outside):
    (outside / "secret.md").write_text("password: hunter2 old text\n", encoding="utf-8")
    (skill / "references").mkdir()
    (skill / "references" / "notes.md").symlink_to(outside / "secret.md")
    tools = skill_tools()

    viewed = await call(tools, library, "skill_view", name="pg-dump", file_path="references/notes.md")
    patched = await call(tools, library, "skill_manage", action="patch", name="pg-dump",
                         file_path="references/notes.md", old_string="old text", new_string="new text")
    listed = await call(tools, library, "skill_view", name="pg-dump")

    assert viewed.is_error and "hunter2" not in viewed.content and "symlink" in viewed.content
    assert patched.is_error and "hunter2" not in patched.content and "symlink" in patched.content
    assert (outside / "secret.md").read_text(encoding="utf-8") == "password: hunter2 old text\n"
    assert "references/notes.md" not in listed.content  # a link is not offered as one of the skill's files


async def test_symlinked_skill_and_category_folders_are_skipped_and_named_in_problems(library, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    write_skill(elsewhere / "pack" / "linked-skill", skill_md("linked-skill"))
    write_skill(elsewhere / "lone-skill", skill_md("lone-skill"))
    write_skill(elsewhere / "md-target", skill_md("md-link"))
    (library.root / "pack").symlink_to(elsewhere / "pack", target_is_directory=True)  # a symlinked category
    (library.root / "ops").mkdir()
    (library.root / "ops" / "lone-skill").symlink_to(elsewhere / "lone-skill", target_is_directory=True)
    (library.root / "ops" / "md-link").mkdir()
    (library.root / "ops" / "md-link" / "SKILL.md").symlink_to(elsewhere / "md-target" / "SKILL.md")
    write_skill(library.root / "ops" / "real-one", skill_md("real-one"))
    tools = skill_tools()

    assert [s.name for s in await library.list_skills()] == ["real-one"]
    assert set(library.problems) == {"pack", "ops/lone-skill", "ops/md-link"}
    assert all("symlink" in why for why in library.problems.values())
    wrote = await call(tools, library, "skill_manage", action="write_file", name="lone-skill",
                       file_path="references/x.md", file_content="x")
    assert wrote.is_error and not (elsewhere / "lone-skill" / "references").exists()
    deleted = await call(tools, library, "skill_manage", action="delete", name="linked-skill")
    assert deleted.is_error and (elsewhere / "pack" / "linked-skill" / "SKILL.md").is_file()


async def test_create_never_writes_into_a_symlinked_category_folder(library, outside):
    (library.root / "ops").symlink_to(outside, target_is_directory=True)

    result = await call(skill_tools(), library, "skill_manage", action="create", name="new-one",
                        content=skill_md("new-one"), category="ops")

    assert result.is_error and "symlink" in result.content
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("folder", [".locks", ".tmp"])
async def test_writes_never_lock_or_stage_through_a_planted_symlink(library, outside, folder):
    (library.root / folder).symlink_to(outside, target_is_directory=True)
    tools = skill_tools()

    result = await call(tools, library, "skill_manage", action="create", name="new-one", content=skill_md("new-one"))

    assert result.is_error and "symlink" in result.content and "nothing was changed" in result.content
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert await library.get("new-one") is None

    (library.root / folder).unlink()  # once a person removes the planted link, writes work again
    again = await call(tools, library, "skill_manage", action="create", name="new-one", content=skill_md("new-one"))
    assert not again.is_error, again.content
    UsageLog.for_library(library.root).record_view("new-one")
    for lock in (library.root / ".locks" / "library.lock", library.root / ".usage.json.lock"):
        assert lock.is_file() and not lock.is_symlink() and not lock.parent.is_symlink()
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600, lock


async def test_archive_never_moves_a_skill_into_a_planted_symlink(library, skill, outside):
    (library.root / ".archive").symlink_to(outside, target_is_directory=True)

    with pytest.raises(SkillError, match="symlink"):
        await library.archive("pg-dump")

    assert (skill / "SKILL.md").is_file() and sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


async def test_the_approval_queue_never_writes_through_a_planted_symlink(library, outside):
    (library.root / ".pending").symlink_to(outside, target_is_directory=True)
    gated = GatedLibrary(library)

    result = await call(skill_tools(), gated, "skill_manage", action="create", name="queued",
                        content=skill_md("queued"))

    assert result.is_error and "symlink" in result.content
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert gated.queue.list() == []


async def test_backups_and_reports_never_prune_files_through_a_planted_symlink(library, skill, tmp_path):
    old_backups, old_reports = tmp_path / "old-backups", tmp_path / "old-reports"
    old_backups.mkdir()
    old_reports.mkdir()
    for i in range(1, 8):
        (old_backups / f"{i:06d}-20240101T000000Z.tar.gz").write_bytes(b"someone else's archive")
        (old_reports / f"{i:06d}-20240101T000000Z.json").write_text("{}", encoding="utf-8")
    (library.root / ".backups").symlink_to(old_backups, target_is_directory=True)
    (library.root / ".reports").symlink_to(old_reports, target_is_directory=True)

    with pytest.raises(SkillError, match="symlink"):
        await library.backup(keep=2)
    with pytest.raises(SkillError, match="symlink"):
        save_report(library.root, CuratorReport(bot="default", started_at="now"), datetime.now(UTC))

    assert len(list(old_backups.iterdir())) == 7 and len(list(old_reports.iterdir())) == 7


def test_stale_staging_cleanup_never_follows_a_planted_symlink(tmp_path, outside):
    root = tmp_path / "lib"
    root.mkdir()
    (outside / "project").mkdir()
    two_hours_ago = time.time() - 7200
    os.utime(outside / "project", (two_hours_ago, two_hours_ago))
    (root / ".tmp").symlink_to(outside, target_is_directory=True)

    FileSkillLibrary(root)  # cleans staging folders a crashed writer left behind

    assert (outside / "project").is_dir() and (outside / "keep.txt").is_file()


async def test_a_real_skill_file_can_still_be_written_viewed_patched_and_removed(library, skill):
    tools = skill_tools()
    before = snapshot(library.root, skip=(".locks", ".history"))
    wrote = await call(tools, library, "skill_manage", action="write_file", name="pg-dump",
                       file_path="scripts/dump.sh", file_content="pg_dump -Fc \"$DB\" > db.dump\n")
    patched = await call(tools, library, "skill_manage", action="patch", name="pg-dump", file_path="scripts/dump.sh",
                         old_string="-Fc", new_string="-Fc --no-owner")
    viewed = await call(tools, library, "skill_view", name="pg-dump", file_path="scripts/dump.sh")
    removed = await call(tools, library, "skill_manage", action="remove_file", name="pg-dump",
                         file_path="scripts/dump.sh")

    assert not any(r.is_error for r in (wrote, patched, viewed, removed))
    assert viewed.content == "pg_dump -Fc --no-owner \"$DB\" > db.dump\n"
    assert snapshot(library.root, skip=(".locks", ".history")) == before  # only the kept history of the writes
    assert [r.action for r in revisions(library.root, "pg-dump")][:3] == ["remove_file", "patch", "write_file"]
