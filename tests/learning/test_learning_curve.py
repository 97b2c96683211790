"""The learning loops pay off: with the background review and the skill hints on, later tasks of a family
take fewer tool calls than the first; with them off, or with either one missing, they do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from environment import FAMILIES
from learning_curve import TaskRow, profile, run_tasks

from hermes_engine.config import Settings
from hermes_engine.skills.feature import SkillsFeature
from hermes_gateway.wiring import build_features

pytestmark = pytest.mark.learning


def by_family(rows: list[TaskRow]) -> dict[str, list[int]]:
    return {f.name: [r.tool_calls for r in sorted(rows, key=lambda r: r.step) if r.family == f.name]
            for f in FAMILIES}


async def test_with_the_loops_on_later_tasks_of_a_family_take_fewer_tool_calls(engine, fake_llm, tmp_path: Path):
    e = await engine(profile=profile(True), home=tmp_path / "on")
    rows = await run_tasks(e, fake_llm, "on")
    for family, calls in by_family(rows).items():
        assert calls[-1] < calls[0], (family, calls)
        assert all(c < calls[0] for c in calls[1:]), (family, calls)  # saved in time for the second task
    skill_of = {f.name: f.skill_name for f in FAMILIES}
    later = [r for r in rows if r.step > 1]
    assert all(r.hinted.split()[0] == skill_of[r.family] for r in later)  # the right skill was hinted first
    assert all(r.skill_views == 1 for r in later)  # …so the model loaded only that one
    assert rows[-1].skills_after == len(FAMILIES)

    # The usage log's estimate agrees with the suite's: the exploring task's calls minus a following task's.
    skills = next(f for f in e.gateway.features if f.name == "skills")
    usages = skills.usage_for().all()
    for family in FAMILIES:
        calls = by_family(rows)[family.name]
        usage = usages[family.skill_name]
        assert (usage.turns, usage.successes, usage.baseline_calls) == (len(calls) - 1, len(calls) - 1, calls[0])
        assert usage.calls_saved_per_use == calls[0] - sum(calls[1:]) / len(calls[1:])
        assert usage.last_used is not None
    status = await e.say("/status", chat="status")
    assert f"Skills: {len(FAMILIES)} saved, {len(FAMILIES)} used" in status
    for family in FAMILIES:
        usage = usages[family.skill_name]
        assert f"- {family.skill_name}: 4 uses, 4 ok, last used " in status
        assert f"{usage.calls_saved_per_use:.1f} tool calls saved per use" in status


async def test_with_the_loops_off_every_task_explores_as_the_first_did(engine, fake_llm, tmp_path: Path):
    e = await engine(profile=profile(False), home=tmp_path / "off")
    rows = await run_tasks(e, fake_llm, "off")
    for family, calls in by_family(rows).items():
        assert calls[-1] >= calls[0], (family, calls)
    assert rows[-1].skills_after == 0 and all(r.review_calls == 0 for r in rows)


async def test_without_hints_the_saved_skills_go_unused(engine, fake_llm, tmp_path: Path):
    settings_profile = profile(True)
    home = tmp_path / "nohints"
    features = [SkillsFeature(home / "skills", bot=settings_profile.name, curator_interval_seconds=None,
                              hint_limit=0) if f.name == "skills" else f
                for f in build_features(Settings(home=home), settings_profile)]
    e = await engine(profile=settings_profile, features=features, home=home)
    rows = await run_tasks(e, fake_llm, "on")
    assert rows[-1].skills_after == len(FAMILIES)  # the review saved them…
    for family, calls in by_family(rows).items():
        assert calls[-1] >= calls[0], (family, calls)  # …but nothing pointed the model at them
