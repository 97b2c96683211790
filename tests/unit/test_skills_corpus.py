"""A regression corpus of real-world-style skills (tests/data/skill_corpus/): vendor CLIs, API clients that
send their own key to their own host, ML tooling notes, HTML comments, scripts/ folders, nested categories,
a declared name that differs from its folder, a Windows file with a byte-order mark and CRLF line endings.

Every skill must load under its declared name and accept a one-line patch that changes that line only
(the person's front matter stays as written). The corpus was written without sight of the security scan's
rules; the one skill it refuses does so by design (`REFUSED_BY_DESIGN`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.model import Skill

CORPUS = Path(__file__).resolve().parent.parent / "data" / "skill_corpus"
SKILL_DIRS = sorted(p.parent.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("SKILL.md"))

# Injection phrases quoted in plain prose are high severity wherever they stand; quoted in code they are
# low and an admin's approval accepts them (README, Security).
REFUSED_BY_DESIGN = {"security/prompt-injection-triage": "injection phrases quoted in plain prose"}

EXPECTED = {  # a few skills whose placement is the point of the corpus: folder -> (name, category)
    "mlops/models/whisper": ("speech-to-text-whisper", "mlops"),
    "mlops/training/lora-sft-recipe": ("lora-sft-recipe", "mlops"),
    "research": ("research", "science"),
    "research/arxiv-lookup": ("arxiv-lookup", "research"),
    "devops/terraform-plan-review/terraform-state-surgery": ("terraform-state-surgery", "devops"),
    "pdf-text-extract": ("pdf-text-extract", "documents"),
    "windows/winget-dev-setup": ("winget-dev-setup", "windows"),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> FileSkillLibrary:
    root = tmp_path_factory.mktemp("corpus") / "default"
    shutil.copytree(CORPUS, root)
    return FileSkillLibrary(root)


def by_folder(library: FileSkillLibrary) -> dict[str, Skill]:
    return {s.path.relative_to(library.root).as_posix(): s for s in library.list_sync() if s.path is not None}


def test_every_corpus_skill_loads_under_its_declared_name_and_category(library):
    assert len(SKILL_DIRS) >= 20 and set(REFUSED_BY_DESIGN) <= set(SKILL_DIRS)
    loaded = by_folder(library)
    assert set(library.problems) == set(REFUSED_BY_DESIGN)
    assert all("blocked by the security scan" in problem for problem in library.problems.values())
    assert sorted(loaded) == [folder for folder in SKILL_DIRS if folder not in REFUSED_BY_DESIGN]
    assert {folder: (loaded[folder].name, loaded[folder].category) for folder in EXPECTED} == EXPECTED
    assert loaded["productivity/ical-agenda"].files == ("references/schema.sql", "scripts/agenda.py")
    assert loaded["devops/terraform-plan-review"].files == ("scripts/plan-summary.sh",)


def one_line(skill: Skill) -> str:
    """The last line of the body that occurs once in the whole file: what a small fix would touch."""
    lines = [line for line in skill.body.splitlines() if line.strip() and not line.lstrip().startswith("```")]
    return next(line for line in reversed(lines) if skill.text.count(line) == 1)


@pytest.mark.parametrize("folder", [folder for folder in SKILL_DIRS if folder not in REFUSED_BY_DESIGN])
def test_every_corpus_skill_accepts_a_one_line_patch(library, folder):
    skill = by_folder(library).get(folder)
    assert skill is not None, library.problems.get(folder)
    line = one_line(skill)

    result = library.apply_sync(SkillChange("patch", skill.name, old_string=line, new_string=line + " (checked)"))

    assert result.message == f"Patched SKILL.md of skill '{skill.name}'."
    after = library.get_sync(skill.name)
    assert after is not None and after.text == skill.text.replace(line, line + " (checked)")
    assert not (library.root / folder / "SKILL.md").read_bytes().startswith(b"\xef\xbb\xbf")
