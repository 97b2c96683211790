"""The background review is a guest in the skill library: it creates skills and improves the agent's own,
while deleting, removing files and touching a hand-written skill wait for an admin. A skill the person asked
for is theirs (`created_by: user`), and only the person's conversation can say so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from postgres import STATE_BACKENDS
from skills_kit import call, skill_md, skill_tools, snapshot, write_skill
from state_backends import skill_library

from hermes_engine.skills.approvals import PendingQueue
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.usage import UsageLog

HAND = "git-squash"  # written by a person, straight into the library
OWN = "docker-prune"  # written by the agent


@pytest.fixture(params=STATE_BACKENDS)
async def library(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FileSkillLibrary]:
    """On each backend: folders, or the database (SQLite, PostgreSQL), where a hand-written skill written
    into the replica's copy after its first read travels to the database like any change."""
    async with skill_library(request.param, tmp_path) as lib:
        await lib.list_skills()
        write_skill(lib.root / "git" / HAND, skill_md(HAND))
        await lib.apply(SkillChange("create", OWN, content=skill_md(OWN, "Free disk space held by docker."),
                                    category="devops"))
        yield lib


def review(library: FileSkillLibrary, **arguments: object):
    return call(skill_tools(), library, "skill_manage", in_review=True, **arguments)


async def test_the_review_improves_the_agents_own_skills_at_once_but_not_a_hand_written_one(library):
    pitfall = {"old_string": "- Never rewrite shared history",
               "new_string": "- Never rewrite shared history\n- Prune volumes only when asked"}
    created = await review(library, action="create", name="new-lesson", content=skill_md("new-lesson"))
    patched = await review(library, action="patch", name=OWN, **pitfall)
    filed = await review(library, action="write_file", name=OWN, file_path="references/flags.md",
                         file_content="--filter until=24h\n")
    assert [r.is_error for r in (created, patched, filed)] == [False, False, False], created.content
    assert (await library.get("new-lesson")).created_by == "agent"
    assert "Prune volumes only when asked" in (await library.get(OWN)).text
    assert (await library.get(OWN)).files == ("references/flags.md",)
    assert PendingQueue(library.root).list() == []

    same_on_hand = await review(library, action="patch", name=HAND, **pitfall)
    assert "Queued for admin approval" in same_on_hand.content
    assert "Prune volumes" not in (await library.get(HAND)).text


@pytest.mark.parametrize("arguments", [
    {"action": "patch", "name": HAND, "old_string": "git rebase -i main", "new_string": "git rebase -i origin/main"},
    {"action": "edit", "name": HAND, "content": skill_md(HAND, "Squash commits (rewritten).")},
    {"action": "write_file", "name": HAND, "file_path": "references/notes.md", "file_content": "note\n"},
    {"action": "delete", "name": HAND},
    {"action": "delete", "name": OWN},
    {"action": "remove_file", "name": OWN, "file_path": "references/flags.md"},
], ids=["patch-hand-written", "edit-hand-written", "file-into-hand-written", "delete-hand-written",
        "delete-own", "remove-file"])
async def test_the_review_stages_deletes_and_changes_to_hand_written_skills_for_an_admin(library, arguments):
    await library.apply(SkillChange("write_file", OWN, file_path="references/flags.md", file_content="-a\n"))
    before = snapshot(library.root)

    result = await review(library, **arguments)

    assert not result.is_error, result.content
    assert "Queued for admin approval" in result.content and "/skills pending" in result.content
    assert "background review" in result.content
    assert snapshot(library.root, skip=(".locks", ".pending")) == before  # nothing applied
    [entry] = PendingQueue(library.root).list()
    assert entry.change.action == arguments["action"] and entry.requested_by["in_review"] is True
    assert "background review" in entry.describe()


async def test_an_admin_approval_applies_what_the_review_staged_and_a_refused_write_is_not_queued(library):
    await review(library, action="patch", name=HAND, old_string="git rebase -i main",
                 new_string="git rebase -i origin/main")
    await review(library, action="delete", name=OWN, absorbed_into=HAND)
    refused = await review(library, action="delete", name="no-such-skill")
    assert refused.is_error and "No skill named" in refused.content
    queue = PendingQueue(library.root)
    assert len(queue.list()) == 2

    for entry in queue.list():
        await queue.approve(entry.id, library)

    hand = await library.get(HAND)
    assert "git rebase -i origin/main" in hand.text and hand.created_by == "user"
    assert await library.get(OWN) is None
    assert UsageLog.for_library(library.root).get(OWN).absorbed_into == HAND
    assert queue.list() == []


async def test_a_skill_the_person_asked_for_is_stored_as_theirs(library):
    tools = skill_tools()
    asked = await call(tools, library, "skill_manage", action="create", name="weekly-report",
                       content=skill_md("weekly-report"), requested_by_person=True)
    own = await call(tools, library, "skill_manage", action="create", name="agent-idea", content=skill_md("agent-idea"))

    assert not asked.is_error and not own.is_error
    assert (await library.get("weekly-report")).created_by == "user"
    assert "created_by: user" in (library.root / "general" / "weekly-report" / "SKILL.md").read_text(encoding="utf-8")
    assert (await library.get("agent-idea")).created_by == "agent"


async def test_the_review_cannot_say_that_the_person_asked_for_a_skill(library):
    before = snapshot(library.root)
    result = await review(library, action="create", name="weekly-report", content=skill_md("weekly-report"),
                          requested_by_person=True)
    assert result.is_error and "only a person in the conversation" in result.content
    assert snapshot(library.root) == before and PendingQueue(library.root).list() == []
