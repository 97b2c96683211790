"""The `operations` form of the memory tool (all or nothing, one scan), and the background review as a guest:
it may add, while rewriting or removing an entry is staged for the person and made or dropped with /memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from postgres import STATE_BACKENDS
from state_backends import memory_store
from test_memory import ALICE, EVIL

from hermes_engine.config import MemorySettings
from hermes_engine.memory import MemoryFeature, MemoryOwner, memory_tool
from hermes_engine.policy.security import ORDINARY, ScanMode
from hermes_engine.ports.commands import CommandContext
from hermes_engine.ports.conversation import ToolCall
from hermes_engine.ports.inbound import ChatKind, InboundMessage
from hermes_engine.ports.services import Services
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import ToolRegistry


@pytest.fixture(params=STATE_BACKENDS)
async def feature(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryFeature]:
    """On each backend: files under the home, or the database (SQLite, PostgreSQL)."""
    async with memory_store(request.param, tmp_path / "memories") as store:
        yield MemoryFeature(store, MemorySettings(memory_chars=120))


def alice() -> MemoryOwner:
    return MemoryOwner.person(ALICE)


async def call(feature: MemoryFeature, *, in_review: bool = False, chat_kind: str = "dm",
               shared_scope: str | None = None, **arguments) -> ToolResult:
    ctx = ToolContext(bot="t", session_id=1, session_key="k", person_id=ALICE, chat_kind=chat_kind,
                      shared_scope=shared_scope, services=Services(feature.services()), in_review=in_review)
    return await ToolRegistry([memory_tool]).call(ToolCall(id="c1", name="memory", arguments=json.dumps(arguments)),
                                                  ctx)


async def memory_command(feature: MemoryFeature, args: str) -> str:
    msg = InboundMessage(platform="console", account="t", chat_kind=ChatKind.DM, chat_id="c", user_id="u",
                         text=f"/memory {args}".strip(), message_id="m1")
    reply = await feature.handle_command(CommandContext(host=None, session=None,  # type: ignore[arg-type]
                                                        message=msg, person_id=ALICE, args=msg.args))
    return reply or ""


async def entries(feature: MemoryFeature, target: str = "memory") -> list[str]:
    return await feature.store.read(alice(), target)


# --- operations ----------------------------------------------------------------------------------------------


async def test_operations_consolidate_a_full_document_in_one_call(feature):
    for fact in ("Stale fact one about builds", "Stale fact two about builds", "Uses Postgres 16 in prod"):
        await feature.book.add(alice(), "memory", fact)
    lone = await call(feature, action="add", target="memory", content="Builds now run on Buildkite, in a large pool")
    assert lone.is_error and "is full" in lone.content
    result = await call(feature, target="memory", operations=[
        {"action": "remove", "old_text": "Stale fact one"},
        {"action": "replace", "old_text": "Stale fact two", "content": "Builds run on Buildkite"},
        {"action": "add", "content": "Deploys on Fridays"},
    ])
    assert not result.is_error, result.content
    assert "Applied 3 operations" in result.content and '"Stale fact two about builds"' in result.content
    assert await entries(feature) == ["Builds run on Buildkite", "Uses Postgres 16 in prod", "Deploys on Fridays"]


@pytest.mark.parametrize("bad", [
    {"action": "remove", "old_text": "no such entry"},
    {"action": "add", "content": EVIL},
    {"action": "frobnicate", "content": "x"},
    {"action": "add", "content": "y" * 200},
])
async def test_operations_apply_all_or_nothing(feature, bad):
    await feature.book.add(alice(), "memory", "Keeps this entry")
    before = await entries(feature)
    result = await call(feature, target="memory", operations=[
        {"action": "add", "content": "A legit new fact"},
        {"action": "remove", "old_text": "Keeps this"},
        bad,
    ])
    assert result.is_error and "nothing was" in result.content.lower()
    assert await entries(feature) == before


async def test_operations_are_scanned_once_as_a_whole(feature, monkeypatch):
    import hermes_engine.memory.book as book_module

    scanned: list[str] = []
    real = book_module.scan_text

    def counting(text: str, kind: str = "memory", mode: ScanMode = ORDINARY):
        scanned.append(text)
        return real(text, kind=kind, mode=mode)

    monkeypatch.setattr(book_module, "scan_text", counting)
    result = await call(feature, target="memory", operations=[
        {"action": "add", "content": "First fact"}, {"action": "add", "content": "Second fact"}])
    assert not result.is_error
    assert scanned[0] == "First fact\n\nSecond fact"
    assert all(text in ("First fact", "Second fact") for text in scanned[1:])  # the rest renders the result


async def test_a_duplicate_add_inside_operations_is_not_a_failure(feature):
    await feature.book.add(alice(), "memory", "Already here")
    result = await call(feature, target="memory", operations=[
        {"action": "add", "content": "Already here"}, {"action": "add", "content": "Brand new"}])
    assert not result.is_error and "1 already there" in result.content
    assert await entries(feature) == ["Already here", "Brand new"]


async def test_action_and_operations_together_or_neither_is_a_clear_error(feature):
    both = await call(feature, action="add", target="memory", content="x",
                      operations=[{"action": "add", "content": "y"}])
    neither = await call(feature, target="memory")
    assert both.is_error and "not both" in both.content
    assert neither.is_error and "operations" in neither.content
    assert await entries(feature) == []


# --- the review is a guest -----------------------------------------------------------------------------------


async def test_the_review_adds_on_its_own_and_only_a_live_turn_removes(feature):
    added = await call(feature, in_review=True, action="add", target="user", content="Learning Rust")
    assert not added.is_error and await entries(feature, "user") == ["Learning Rust"]
    staged = await call(feature, in_review=True, action="remove", target="user", old_text="Rust")
    assert "Staged for the person" in staged.content and await entries(feature, "user") == ["Learning Rust"]
    live = await call(feature, action="remove", target="user", old_text="Rust")
    assert not live.is_error and await entries(feature, "user") == []


@pytest.mark.parametrize("arguments", [
    {"action": "remove", "target": "memory", "old_text": "never deploy"},
    {"action": "replace", "target": "memory", "old_text": "never deploy", "content": "Deploy any day"},
    {"target": "memory", "operations": [{"action": "add", "content": "Fork note"},
                                        {"action": "remove", "old_text": "never deploy"}]},
])
async def test_the_review_stages_rewrites_and_removals_instead_of_making_them(feature, arguments):
    await feature.book.add(alice(), "memory", "Person said: never deploy on Fridays")
    before = await entries(feature)
    result = await call(feature, in_review=True, **arguments)
    assert not result.is_error and "Staged for the person" in result.content
    assert await entries(feature) == before  # nothing applied, not even the batch's add
    assert len(await feature.pending.waiting(alice())) == 1


async def test_a_review_proposal_that_would_fail_is_refused_not_staged(feature):
    result = await call(feature, in_review=True, action="remove", target="memory", old_text="nothing like this")
    assert result.is_error and await feature.pending.waiting(alice()) == []


async def test_the_review_may_not_rewrite_shared_memory(feature):
    scope = "telegram:bot:group:-1"
    await feature.book.add(MemoryOwner.shared(scope), "memory", "Standup at 10")
    result = await call(feature, in_review=True, chat_kind="group", shared_scope=scope, action="remove",
                        target="shared", old_text="Standup")
    assert result.is_error and "may only add" in result.content
    assert await feature.store.read(MemoryOwner.shared(scope), "memory") == ["Standup at 10"]


async def test_the_person_sees_applies_and_drops_proposals_with_memory_commands(feature):
    await feature.book.add(alice(), "memory", "Person said: never deploy on Fridays")
    await feature.book.add(alice(), "memory", "Prefers tabs")
    await call(feature, in_review=True, action="replace", target="memory", old_text="tabs", content="Prefers spaces")
    await call(feature, in_review=True, action="remove", target="memory", old_text="never deploy")

    assert "2 change(s) proposed by the background review" in await memory_command(feature, "")
    listing = await memory_command(feature, "pending")
    assert '1. MEMORY.md: rewrite "Prefers tabs" as "Prefers spaces"' in listing
    assert '2. MEMORY.md: remove "Person said: never deploy on Fridays"' in listing

    assert "Dropped change 2" in await memory_command(feature, "drop 2")
    assert "Applied change 1" in await memory_command(feature, "apply 1")
    assert await entries(feature) == ["Person said: never deploy on Fridays", "Prefers spaces"]
    assert await memory_command(feature, "pending") == "No changes are waiting for you."
    assert "no proposed change 1" in await memory_command(feature, "apply 1")


async def test_a_proposal_never_lands_on_an_entry_that_changed_since(feature):
    await feature.book.add(alice(), "memory", "Prefers tabs")
    await call(feature, in_review=True, action="remove", target="memory", old_text="tabs")
    await feature.book.replace(alice(), "memory", "tabs", "Prefers tabs, width 4")  # the person edits it
    reply = await memory_command(feature, "apply 1")
    assert "could not be applied" in reply and "/memory drop 1" in reply
    assert await entries(feature) == ["Prefers tabs, width 4"]


class _People:
    """The host's store, as far as the memory feature asks it: who still exists."""

    def __init__(self, known: set[int]) -> None:
        self.known = known

    async def get_person(self, person_id: int) -> object | None:
        return object() if person_id in self.known else None


async def test_a_review_saves_nothing_for_a_person_who_was_forgotten(feature):
    from types import SimpleNamespace

    people = _People({ALICE})
    await feature.start(SimpleNamespace(store=people))  # type: ignore[arg-type]
    assert not (await call(feature, in_review=True, action="add", target="user", content="Likes tea")).is_error
    people.known.clear()  # forgotten while the review was still running
    late = await call(feature, in_review=True, action="add", target="user", content="Likes coffee")
    assert late.is_error and "asked to be forgotten" in late.content
    assert await entries(feature, "user") == ["Likes tea"]
