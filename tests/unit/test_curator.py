"""The skill curator: ages, archives (never deletes), asks before touching user skills, merges overlaps."""

from __future__ import annotations

import json
import os
import tarfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_engine.errors import ProviderError
from hermes_engine.ports.models import Completed, ModelRequest, ModelResponse, Provider, StreamEvent, TextDelta
from hermes_engine.skills.approvals import PendingQueue
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.curator import Curator, latest_report
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.usage import UsageLog

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def skill_md(name: str, description: str, *, pitfalls: list[str], tags: str = "[docker]") -> str:
    bullets = "\n".join(f"- {p}" for p in pitfalls)
    return (f"---\nname: {name}\ndescription: {description}\nversion: 1.0.0\ntags: {tags}\n---\n\n"
            f"## When to use\nWhen {description.lower()}\n\n## Steps\n1. Do the thing for {name}\n\n"
            f"## Pitfalls\n{bullets}\n")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class ScriptedProvider:
    """A Provider that answers each call with the next scripted text (and records the requests)."""

    spec = "fake:curator"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        text = self.answers.pop(0) if self.answers else '{"groups": []}'
        yield TextDelta(text[:5])
        yield Completed(ModelResponse(text=text, model=self.spec))

    async def aclose(self) -> None:
        return None


class FailingProvider(ScriptedProvider):
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise ProviderError("503 from upstream", status=503)
        yield  # pragma: no cover


def set_age(library: FileSkillLibrary, name: str, days: float) -> None:
    """Pretend SKILL.md was last touched `days` before NOW."""
    skill = library.get_sync(name)
    stamp = (NOW - timedelta(days=days)).timestamp()
    os.utime(skill.path / "SKILL.md", (stamp, stamp))


@pytest.fixture
def library(tmp_path: Path) -> FileSkillLibrary:
    return FileSkillLibrary(tmp_path / "skills" / "bot")


def add(library: FileSkillLibrary, name: str, *, author: str = "agent", days: float = 0, category: str = "devops",
        description: str | None = None, pitfalls: list[str] | None = None) -> None:
    library.apply_sync(SkillChange("create", name, category=category,
                                   content=skill_md(name, description or f"Handle {name.replace('-', ' ')}",
                                                    pitfalls=pitfalls or [f"Pitfall of {name}"])),
                       author=author)
    set_age(library, name, days)


def curator(library: FileSkillLibrary, provider: Provider | None = None, *, llm: bool = False,
            clock: Clock | None = None) -> Curator:
    return Curator(library, UsageLog.for_library(library.root), provider, llm_pass=llm, clock=clock or Clock(NOW))


def tree(library: FileSkillLibrary) -> set[str]:
    return {p.parent.relative_to(library.root).as_posix() for p in library.root.rglob("SKILL.md")}


async def test_unused_agent_skills_go_stale_then_archived_never_deleted(library):
    add(library, "fresh-one", days=3)
    add(library, "idle-two-weeks", days=15)
    add(library, "idle-a-month", days=31)
    report = await curator(library).run()

    assert [s["name"] for s in report.stale] == ["idle-two-weeks"]
    assert [a["name"] for a in report.archived] == ["idle-a-month"]
    assert await library.get("idle-a-month") is None
    assert (library.root / ".archive" / "devops" / "idle-a-month" / "SKILL.md").is_file()  # moved, not deleted
    usage = UsageLog.for_library(library.root)
    assert usage.get("idle-two-weeks").status == "stale"
    assert usage.get("idle-a-month").status == "archived"
    assert await library.get("fresh-one") is not None


async def test_age_follows_the_injected_clock_and_recent_use(library):
    add(library, "used-lately", days=40)
    UsageLog.for_library(library.root).record_turn({"used-lately": 1}, at=NOW - timedelta(days=2))
    add(library, "was-stale", days=20)
    first = await curator(library).run()
    assert first.archived == [] and [s["name"] for s in first.stale] == ["was-stale"]

    UsageLog.for_library(library.root).record_turn({"was-stale": 1}, at=NOW)
    later = await curator(library, clock=Clock(NOW + timedelta(days=1))).run()
    assert later.reactivated == ["was-stale"] or "was-stale" not in [s["name"] for s in later.stale]
    assert UsageLog.for_library(library.root).get("was-stale").status == "active"

    much_later = await curator(library, clock=Clock(NOW + timedelta(days=45))).run()
    assert {a["name"] for a in much_later.archived} == {"used-lately", "was-stale"}


async def test_user_skill_is_never_archived_without_approval(library):
    add(library, "my-own-notes", author="user", days=90)
    report = await curator(library).run()
    assert report.archived == [] and await library.get("my-own-notes") is not None
    [ask] = report.needs_approval
    assert ask["name"] == "my-own-notes" and ask["action"] == "archive" and ask["pending_id"]
    assert "my-own-notes" in (library.root / report.files["markdown"]).read_text()

    again = await curator(library).run()  # no duplicate request on the next run
    assert len(PendingQueue(library.root).list()) == 1 and again.needs_approval[0]["pending_id"] == ask["pending_id"]

    result = await PendingQueue(library.root).approve(ask["pending_id"], library)  # what /skills approve does
    assert "Archived" in result.message and await library.get("my-own-notes") is None
    assert (library.root / ".archive" / "devops" / "my-own-notes").is_dir()


async def test_skill_whose_recent_uses_mostly_failed_is_flagged(library):
    add(library, "shaky-deploy")
    add(library, "solid-deploy")
    usage = UsageLog.for_library(library.root)
    for failed in (True, True, False, True):
        usage.record_turn({"shaky-deploy": 1}, failed=failed, at=NOW)
    for _ in range(4):
        usage.record_turn({"solid-deploy": 1}, at=NOW)
    usage.record_correction(["solid-deploy"], at=NOW)
    report = await curator(library).run()
    assert [f["name"] for f in report.flagged] == ["shaky-deploy"]
    assert report.flagged[0]["bad"] == 3 and report.flagged[0]["uses"] == 4


def merge_answer(name: str, pitfalls: list[str]) -> str:
    content = skill_md(name, "Build, cache and slim Docker images", pitfalls=pitfalls)
    return json.dumps({"name": name, "content": content})


async def test_llm_merges_overlapping_agent_skills_keeping_every_pitfall(library):
    add(library, "docker-build-cache", pitfalls=["COPY . . early breaks the cache", "Pin the base image"])
    add(library, "docker-layer-caching", pitfalls=["Order layers from stable to volatile", "Pin the base image"])
    add(library, "postgres-backup", category="db", pitfalls=["Test restores"])
    add(library, "hand-written-docker", author="user", pitfalls=["Mine"])
    provider = ScriptedProvider(
        json.dumps({"groups": [{"skills": ["docker-build-cache", "docker-layer-caching"], "reason": "same topic"}]}),
        merge_answer("docker-image-builds", ["COPY . . early breaks the cache", "Pin the base image"]),
    )
    report = await curator(library, provider, llm=True).run()

    assert [r.purpose for r in provider.requests] == ["curator", "curator"]
    assert "hand-written-docker" not in provider.requests[0].messages[0].content  # only agent skills are offered
    [merge] = report.merges
    assert merge["into"] == "docker-image-builds" and merge["restored_pitfalls"] == 1
    umbrella = await library.get("docker-image-builds")
    assert umbrella.created_by == "agent" and umbrella.category == "devops"
    assert set(umbrella.pitfalls) >= {"COPY . . early breaks the cache", "Pin the base image",
                                     "Order layers from stable to volatile"}
    assert await library.get("docker-build-cache") is None and await library.get("docker-layer-caching") is None
    assert {"devops/docker-build-cache", "devops/docker-layer-caching"} <= set(library.archived())
    assert UsageLog.for_library(library.root).get("docker-build-cache").__dict__.get("status") == "archived"
    assert await library.get("postgres-backup") is not None and await library.get("hand-written-docker") is not None


@pytest.mark.parametrize("answers", [
    ("Sure! Here are the groups: docker-build-cache and docker-layer-caching",),
    ('{"groups": "docker-build-cache"}',),
    (json.dumps({"groups": [{"skills": ["docker-build-cache", "no-such-skill"]}]}),),
    (json.dumps({"groups": [{"skills": ["docker-build-cache", "docker-layer-caching"]}]}), "not json at all"),
    (json.dumps({"groups": [{"skills": ["docker-build-cache", "docker-layer-caching"]}]}),
     json.dumps({"name": "Bad Name!", "content": "x"})),
    (json.dumps({"groups": [{"skills": ["docker-build-cache", "docker-layer-caching"]}]}),
     json.dumps({"name": "merged", "content": "---\nname: merged\n---\nno description"})),
])
async def test_garbage_from_the_model_means_no_merge(library, answers):
    add(library, "docker-build-cache")
    add(library, "docker-layer-caching")
    before = tree(library)
    report = await curator(library, ScriptedProvider(*answers), llm=True).run()
    assert report.status == "ok" and report.merges == [] and report.skipped
    assert tree(library) == before


async def test_provider_failure_skips_the_llm_pass(library):
    add(library, "a-skill")
    add(library, "b-skill")
    report = await curator(library, FailingProvider(), llm=True).run()
    assert report.status == "ok" and report.llm.startswith("skipped") and "503" in report.llm


async def test_interrupted_run_leaves_the_library_intact_with_a_backup(library, monkeypatch):
    for i in range(4):
        add(library, f"old-skill-{i}", days=60)
    before = tree(library)
    calls = {"n": 0}
    real_archive = library.archive

    async def flaky_archive(name: str) -> str:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk vanished")
        return await real_archive(name)

    monkeypatch.setattr(library, "archive", flaky_archive)
    with pytest.raises(OSError):
        await curator(library).run()

    backups = library.backups()
    assert len(backups) == 1
    with tarfile.open(backups[0]) as tar:
        assert {n for n in tar.getnames() if n.endswith("SKILL.md")} == {f"devops/old-skill-{i}/SKILL.md"
                                                                         for i in range(4)}
    live = [s.name for s in library.list_sync()]
    archived = library.archived()
    assert len(live) + len(archived) == 4 and len(archived) == 2  # every skill is somewhere, whole
    assert len(before) == 4 and library.problems == {}
    failed = latest_report(library.root)
    assert failed.status == "failed" and "disk vanished" in failed.error


async def test_keeps_only_the_last_five_backups(library):
    add(library, "keep-me")
    c = curator(library)
    for _ in range(7):
        await c.run()
    names = [p.name for p in library.backups()]
    assert len(names) == 5 and names[0].startswith("000003-") and names[-1].startswith("000007-")


async def test_dry_run_changes_nothing_and_still_reports(library):
    add(library, "ancient", days=100)
    add(library, "mine", author="user", days=100)
    before = tree(library)
    report = await curator(library).run(dry_run=True)
    assert tree(library) == before and library.backups() == []
    assert [a["name"] for a in report.archived] == ["ancient"] and report.dry_run
    assert PendingQueue(library.root).list() == []
    assert UsageLog.for_library(library.root).get("ancient").status == "active"


async def test_every_run_writes_json_and_markdown_reports(library):
    add(library, "x-skill", days=20)
    c = curator(library)
    report = await c.run()
    data = json.loads((library.root / report.files["json"]).read_text())
    assert data["stale"][0]["name"] == "x-skill" and data["backup"].startswith(".backups/")
    markdown = (library.root / report.files["markdown"]).read_text()
    assert markdown.startswith("# Skill curator report") and "x-skill" in markdown
    assert c.latest_report().to_dict() == report.to_dict()
    second = await c.run(dry_run=True)
    assert latest_report(library.root).files == second.files


async def test_a_merged_skill_names_every_tool_its_sources_named(library):
    for name, tools in (("docker-build-cache", "[terminal, write_file]"), ("docker-layer-caching", "[terminal, patch]")):
        library.apply_sync(SkillChange("create", name, category="devops", content=skill_md(
            name, f"Handle {name}", pitfalls=[f"Pitfall of {name}"], tags=f"[docker]\ntools: {tools}")),
            author="agent")
        set_age(library, name, 0)
    provider = ScriptedProvider(
        json.dumps({"groups": [{"skills": ["docker-build-cache", "docker-layer-caching"], "reason": "same"}]}),
        merge_answer("docker-image-builds", ["Pitfall of docker-build-cache", "Pitfall of docker-layer-caching"]),
    )  # the model's umbrella names no tools
    await curator(library, provider, llm=True).run()
    umbrella = await library.get("docker-image-builds")
    assert umbrella.tools == ("terminal", "write_file", "patch")
