"""Skills laid out as Hermes Agent lays them out load and behave here: nested categories, declared names that
differ from their folder, skills inside skills, scripts/ and assets/ folders, SKILL.md up to 100,000
characters, `replace_all` on patch and `absorbed_into` on delete."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from skills_kit import call, skill_md, skill_tools, snapshot, write_skill

from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.curator import Curator
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.usage import UsageLog

MAX_SKILL_CHARS = 100_000  # Hermes Agent's limit


@pytest.fixture
def library(tmp_path: Path) -> FileSkillLibrary:
    return FileSkillLibrary(tmp_path / "skills" / "default")


async def test_skills_three_levels_deep_are_found_under_their_top_folder(library):
    write_skill(library.root / "mlops" / "inference" / "vllm-serve", skill_md("vllm-serve"))
    write_skill(library.root / "mlops" / "evaluation" / "harness" / "eval-run", skill_md("eval-run"))
    write_skill(library.root / "mlops" / "axolotl", skill_md("axolotl"))
    tools = skill_tools()

    skills = {s.name: s for s in await library.list_skills()}
    listing = await call(tools, library, "skills_list", category="mlops")
    patched = await call(tools, library, "skill_manage", action="patch", name="eval-run",
                         old_string="git rebase -i main", new_string="git rebase -i origin/main")

    assert sorted(skills) == ["axolotl", "eval-run", "vllm-serve"] and library.problems == {}
    assert {s.category for s in skills.values()} == {"mlops"}
    assert "- vllm-serve [mlops]" in listing.content and "- eval-run [mlops]" in listing.content
    assert not patched.is_error, patched.content
    on_disk = library.root / "mlops" / "evaluation" / "harness" / "eval-run" / "SKILL.md"
    assert "origin/main" in on_disk.read_text(encoding="utf-8")


async def test_a_root_skill_and_the_skills_inside_its_folder_are_both_kept(library):
    write_skill(library.root / "research", skill_md("research", category="science"))
    write_skill(library.root / "research" / "arxiv-search", skill_md("arxiv-search"))
    write_skill(library.root / "agents" / "hermes-ops", skill_md("hermes-ops"))
    write_skill(library.root / "agents" / "hermes-ops" / "self-restart", skill_md("self-restart"))
    (library.root / "research" / "references").mkdir()
    write_skill(library.root / "research" / "references" / "not-a-skill", skill_md("not-a-skill"))

    skills = {s.name: s for s in await library.list_skills()}

    assert sorted(skills) == ["arxiv-search", "hermes-ops", "research", "self-restart"]
    assert skills["research"].category == "science" and skills["arxiv-search"].category == "research"
    assert skills["self-restart"].category == "agents"
    assert skills["research"].files == ("references/not-a-skill/SKILL.md",)  # a support folder stays files


async def test_a_declared_name_that_differs_from_its_folder_is_the_skills_name(library):
    folder = write_skill(library.root / "mlops" / "whisper", skill_md("transcribe-audio"))
    tools = skill_tools()

    listing = await call(tools, library, "skills_list")
    viewed = await call(tools, library, "skill_view", name="transcribe-audio")
    by_folder = await call(tools, library, "skill_view", name="whisper")
    patched = await call(tools, library, "skill_manage", action="patch", name="transcribe-audio",
                         old_string="mark commits as squash", new_string="mark the rest as squash")
    renamed = await call(tools, library, "skill_manage", action="patch", name="transcribe-audio",
                         old_string="name: transcribe-audio", new_string="name: whisper")

    assert "- transcribe-audio [mlops]" in listing.content and "whisper" not in listing.content
    assert not viewed.is_error and "name: transcribe-audio" in viewed.content
    assert by_folder.is_error
    assert not patched.is_error and "mark the rest" in (folder / "SKILL.md").read_text(encoding="utf-8")
    assert renamed.is_error and "does not match" in renamed.content
    before = snapshot(library.root)
    taken = await call(tools, library, "skill_manage", action="create", name="whisper", content=skill_md("whisper"),
                       category="mlops")
    assert taken.is_error and "already exists" in taken.content and snapshot(library.root) == before


async def test_two_skills_declaring_one_name_keep_the_folder_that_bears_it_and_report_the_other(library):
    write_skill(library.root / "a-tools" / "fmt-json", skill_md("pretty-json", "Declared only."))
    write_skill(library.root / "z-tools" / "pretty-json", skill_md("pretty-json", "Folder and name agree."))
    write_skill(library.root / "b-tools" / "fmt", skill_md("shared-name", "First by path."))
    write_skill(library.root / "c-tools" / "fmt", skill_md("shared-name", "Second by path."))

    skills = {s.name: s for s in await library.list_skills()}

    assert skills["pretty-json"].description == "Folder and name agree."
    assert skills["shared-name"].description == "First by path."
    assert set(library.problems) == {"a-tools/fmt-json", "c-tools/fmt"}
    assert "z-tools/pretty-json" in library.problems["a-tools/fmt-json"]
    assert "already has" in library.problems["c-tools/fmt"]


async def test_skill_view_lists_and_reads_scripts_and_assets(library):
    folder = write_skill(library.root / "productivity" / "agenda", skill_md("agenda"))
    (folder / "scripts").mkdir()
    (folder / "scripts" / "agenda.py").write_text("print('today')\n", encoding="utf-8")
    (folder / "scripts" / "second-brain").write_text("#!/bin/sh\necho ok\n", encoding="utf-8")
    (folder / "assets").mkdir()
    (folder / "assets" / "palette.json").write_text('{"accent": "#0af"}\n', encoding="utf-8")
    (folder / "references").mkdir()
    (folder / "references" / "schema.sql").write_text("create table events (id int);\n", encoding="utf-8")
    (folder / "SKILL.zh.md").write_text("translated\n", encoding="utf-8")
    tools = skill_tools()

    viewed = await call(tools, library, "skill_view", name="agenda")
    script = await call(tools, library, "skill_view", name="agenda", file_path="scripts/agenda.py")
    wrote = await call(tools, library, "skill_manage", action="write_file", name="agenda",
                       file_path="scripts/weekly.py", file_content="print('week')\n")

    listed = ("[files: references/schema.sql, scripts/agenda.py, scripts/second-brain, assets/palette.json — "
              "read with skill_view(name, file_path)]")
    assert listed in viewed.content
    assert script.content == "print('today')\n"
    assert not wrote.is_error and (folder / "scripts" / "weekly.py").is_file()


async def test_a_skill_of_up_to_100000_characters_loads_and_takes_a_patch(library):
    table = "".join(f"| E{i:05d} | retry after backoff, then report code E{i:05d} |\n" for i in range(1, 1500))
    text = skill_md("error-codes", steps="1. Look the code up below.\n\n" + table)
    text += "\n" + "Codes above E01499 are reserved. " * ((MAX_SKILL_CHARS - len(text) - 1) // 33)
    text += "." * (MAX_SKILL_CHARS - len(text))
    assert len(text.encode()) > 64 * 1024 and len(text) == MAX_SKILL_CHARS
    write_skill(library.root / "api" / "error-codes", text)
    tools = skill_tools()

    assert [s.name for s in await library.list_skills()] == ["error-codes"] and library.problems == {}
    patched = await call(tools, library, "skill_manage", action="patch", name="error-codes",
                         old_string="| E01499 | retry after", new_string="| E01499 | retry with")
    too_long = await call(tools, library, "skill_manage", action="patch", name="error-codes",
                          old_string="1. Look the code up below.", new_string="1. Look the code up in the table.")

    assert not patched.is_error, patched.content
    assert too_long.is_error and "100,000" in too_long.content and "references/" in too_long.content


async def test_patch_replace_all_changes_every_occurrence(library):
    await library.apply(SkillChange("create", "rename-flag", content=skill_md(
        "rename-flag", steps="1. run tool --old-flag\n2. check tool --old-flag output\n3. done")))
    tools = skill_tools()

    once = await call(tools, library, "skill_manage", action="patch", name="rename-flag", old_string="--old-flag",
                      new_string="--new-flag")
    every = await call(tools, library, "skill_manage", action="patch", name="rename-flag", old_string="--old-flag",
                       new_string="--new-flag", replace_all=True)

    assert once.is_error and "replace_all" in once.content
    assert not every.is_error and "2 occurrences" in every.content
    text = (await library.get("rename-flag")).text
    assert "--old-flag" not in text and text.count("--new-flag") == 2


async def test_delete_with_absorbed_into_records_where_the_skill_went(library):
    for name in ("docker-cache", "docker-layers", "other"):
        await library.apply(SkillChange("create", name, content=skill_md(name), category="devops"))
    tools = skill_tools()
    before = snapshot(library.root)

    ghost = await call(tools, library, "skill_manage", action="delete", name="docker-layers", absorbed_into="ghost")
    itself = await call(tools, library, "skill_manage", action="delete", name="docker-layers",
                        absorbed_into="docker-layers")
    assert ghost.is_error and "does not exist" in ghost.content and "Nothing was deleted" in ghost.content
    assert itself.is_error and "cannot equal" in itself.content
    assert snapshot(library.root) == before

    merged = await call(tools, library, "skill_manage", action="delete", name="docker-layers",
                        absorbed_into="docker-cache")
    pruned = await call(tools, library, "skill_manage", action="delete", name="other", absorbed_into="  ")

    assert merged.content == "Deleted skill 'docker-layers' (absorbed into 'docker-cache')."
    assert pruned.content == "Deleted skill 'other'."
    usage = UsageLog.for_library(library.root)
    assert usage.get("docker-layers").absorbed_into == "docker-cache"
    assert usage.get("docker-layers").status == "deleted" and usage.get("other").absorbed_into is None
    assert [s.name for s in await library.list_skills()] == ["docker-cache"]


async def test_a_skill_holding_other_skills_is_neither_deleted_nor_archived_with_them(library):
    write_skill(library.root / "agents" / "hermes-ops", skill_md("hermes-ops", created_by="agent"))
    write_skill(library.root / "agents" / "hermes-ops" / "self-restart", skill_md("self-restart"))
    month_ago = time.time() - 40 * 86400
    os.utime(library.root / "agents" / "hermes-ops" / "SKILL.md", (month_ago, month_ago))
    before = snapshot(library.root)

    deleted = await call(skill_tools(), library, "skill_manage", action="delete", name="hermes-ops")
    report = await Curator(library, llm_pass=False).run()

    assert deleted.is_error and "holds other skills in its folder (self-restart)" in deleted.content
    assert report.archived == [] and report.skipped[0]["what"] == "archive hermes-ops"
    assert "self-restart" in report.skipped[0]["reason"]
    assert {k: v for k, v in snapshot(library.root).items() if k.split("/")[0] in ("agents",)} == before
    assert sorted(s.name for s in await library.list_skills()) == ["hermes-ops", "self-restart"]
