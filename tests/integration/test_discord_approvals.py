"""Approval buttons in Discord: the real discord.py against the fake Discord. A dangerous command shows a
message with buttons in the conversation's thread; a stranger's press is answered only to them and changes
nothing; an approver's press runs it (or denies it); the message then says how it ended and its buttons
are gone, expiry included. A press on a question whose process was killed is answered that it has ended."""

from __future__ import annotations

import os

import pytest
from approval_kit import left_by_a_killed_process
from discord_kit import FAST, discord_environment
from engine_harness import make_profile
from fakes.fake_discord import FakeDiscord, FakeMessage
from fakes.fake_llm import Reply

from adapters.discord import PLATFORM
from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.workspace.feature import WorkspaceFeature

LABELS = ["Approve once", "For this session", "Deny"]


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch):
    async with FakeDiscord() as fake:
        discord_environment(monkeypatch, fake)
        yield fake


@pytest.fixture
async def guarded(engine, fake_discord: FakeDiscord, fake_llm, tmp_path):
    """`await guarded(timeout=...)` → the workspace feature of a started Discord bot whose dangerous
    commands need the approval of alice (the admin); the fake LLM runs one and reports its output."""
    adapters = []

    async def make(timeout: float = 300.0, *, engine_out: list | None = None) -> WorkspaceFeature:
        admin = fake_discord.user("alice")["id"]
        profile = make_profile(toolsets=["core", "terminal"], access={"admins": [admin]},
                               workspace={"approve": ["dangerous"], "approval_timeout_seconds": timeout})
        router = ApprovalRouter()
        feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=[admin], asker=router,
                                   toolsets=profile.toolsets)
        e = await engine(profile=profile, features=[feature])
        if engine_out is not None:
            engine_out.append(e)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
        e.gateway.attach(adapter)
        router.add("discord", adapter.approval_asker())
        adapters.append(adapter)
        await adapter.start()

        def respond(request):
            messages = request.messages
            last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
            results = [m["content"] for m in messages[last_user + 1:] if m["role"] == "tool"]
            if results:
                return Reply(text="result: " + results[0].splitlines()[0])
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p cache && rm -rf cache && echo purged"})])

        fake_llm.responder = respond
        return feature

    yield make
    for adapter in adapters:
        await adapter.stop()


async def ask_to_purge(fake: FakeDiscord) -> tuple[str, FakeMessage]:
    """alice asks in the channel; the question appears in the thread of her message: (thread id, question)."""
    asked = await fake.user_says(fake.channel_id, "alice", "purge the cache", mentions_bot=True)
    thread = await fake.wait_for(lambda: fake.thread_of(asked), what="a thread on the message")
    question = await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(thread["id"]) if m.buttons), None), 15, "the question")
    return thread["id"], question


def button(question: FakeMessage, label: str) -> str:
    return dict(question.buttons)[label]


async def test_a_dangerous_command_waits_for_an_approvers_press_then_runs(guarded, fake_discord):
    feature = await guarded()
    thread, question = await ask_to_purge(fake_discord)
    assert question.content.startswith("Run this command? (dangerous: deletes many files)")
    assert [label for label, _ in question.buttons] == LABELS
    assert feature.approvals.pending()

    pressed = await fake_discord.press("alice", question, button(question, "Approve once"))
    await fake_discord.wait_for(lambda: pressed.callback_type is not None, what="the press answered")
    assert (pressed.callback_type, pressed.reply, pressed.ephemeral) == (4, "Done.", True)
    alice = fake_discord.user("alice")["id"]
    await fake_discord.wait_for(lambda: any(m.content == "result: purged" for m in fake_discord.bot_messages(thread)),
                                15, "the command's output")
    await fake_discord.wait_for(lambda: not question.buttons, what="the buttons removed")
    assert question.content.endswith(f"→ approved by {alice}")
    assert fake_discord.unknown_routes == []


async def test_a_strangers_press_changes_nothing_and_is_answered_only_to_them(guarded, fake_discord):
    feature = await guarded()
    _, question = await ask_to_purge(fake_discord)
    before = question.content

    pressed = await fake_discord.press("mallory", question, button(question, "Approve once"))
    await fake_discord.wait_for(lambda: pressed.callback_type is not None, what="the press answered")
    assert (pressed.callback_type, pressed.reply, pressed.ephemeral) == (4, "Only an approver can answer this.", True)
    assert feature.approvals.pending()  # still waiting
    assert question.content == before and [label for label, _ in question.buttons] == LABELS

    denied = await fake_discord.press("alice", question, button(question, "Deny"))
    await fake_discord.wait_for(lambda: not question.buttons, what="the buttons removed")
    assert denied.reply == "Done."
    assert question.content.endswith(f"→ denied by {fake_discord.user('alice')['id']}")
    assert not feature.approvals.pending()


async def test_an_unanswered_request_expires_and_says_so(guarded, fake_discord):
    feature = await guarded(timeout=0.5)
    _, question = await ask_to_purge(fake_discord)
    await fake_discord.wait_for(lambda: not question.buttons, 15, "the buttons removed")
    assert question.content.endswith("→ nobody approved it in time")
    assert not feature.approvals.pending()
    with pytest.raises(ValueError, match="shows no button"):
        await fake_discord.press("alice", question, "approve:gone:once")


async def test_a_press_on_a_question_that_already_ended_is_answered_so(guarded, fake_discord):
    await guarded()
    _, question = await ask_to_purge(fake_discord)
    stale = FakeMessage(question.id, question.channel_id, question.author, question.history,
                        guild_id=question.guild_id, components=question.components)  # as shown before it ended
    await fake_discord.press("alice", question, button(question, "Deny"))
    await fake_discord.wait_for(lambda: not question.buttons, what="the buttons removed")

    again = await fake_discord.press("alice", stale, button(stale, "Approve once"))
    await fake_discord.wait_for(lambda: again.callback_type is not None, what="the press answered")
    assert (again.reply, again.ephemeral) == ("This request has ended.", True)


async def test_a_press_on_a_question_whose_process_was_killed_is_answered_that_it_ended(guarded, fake_discord):
    engines: list = []
    gate = (await guarded(engine_out=engines)).approvals
    e, alice = engines[0], fake_discord.user("alice")["id"]
    target = ReplyTarget("discord", fake_discord.guild_id, fake_discord.channel_id)
    request = await left_by_a_killed_process(e.store, e.gateway.bot, target, alice)
    assert gate.asker is not None
    await gate.asker.ask(request, gate)  # the question the killed process had shown
    question = next(m for m in fake_discord.bot_messages(fake_discord.channel_id) if m.buttons)

    pressed = await fake_discord.press("alice", question, button(question, "Approve once"))
    await fake_discord.wait_for(lambda: pressed.callback_type is not None, what="the press answered")
    assert (pressed.reply, pressed.ephemeral) == ("This request has ended.", True)
    assert (await e.store.get_approval(request.id)).state == "ended"  # for every replica from now on
