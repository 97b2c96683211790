"""Approval buttons in Telegram: the real python-telegram-bot against the fake Bot API. A dangerous command
shows inline buttons in the chat; a stranger's press changes nothing; the admin's press runs it; the
message then says who decided and its buttons are gone."""

from __future__ import annotations

import asyncio
import os

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeUser

from adapters.telegram import PLATFORM
from hermes_engine.workspace.approvals import ApprovalRouter
from hermes_engine.workspace.feature import WorkspaceFeature

ADMIN = FakeUser(42, "Alice", "alice")
STRANGER = FakeUser(77, "Mallory", "mallory")
GROUP = -100555
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def results(request) -> list[str]:
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [m["content"] for m in messages[last_user + 1:] if m["role"] == "tool"]


async def test_a_dangerous_command_runs_after_the_admin_presses_approve(engine, telegram, fake_llm, tmp_path):
    profile = make_profile(toolsets=["core", "terminal"], access={"admins": ["42"], "allowed_users": ["77"]},
                           platforms={"telegram": FAST}, workspace={"approve": ["dangerous"]})
    router = ApprovalRouter()
    feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=["42"], asker=router,
                               toolsets=profile.toolsets)
    e = await engine(profile=profile, features=[feature])
    options = PLATFORM.parse_options(FAST)
    adapter = PLATFORM.build(e.gateway, e.settings, options, None, os.environ)
    e.gateway.attach(adapter)
    router.add("telegram", adapter.approval_asker())
    await adapter.start()
    try:
        await asyncio.wait_for(adapter.ready.wait(), 5)

        def respond(request):
            if results(request):
                return Reply(text="done: " + results(request)[0].splitlines()[0])
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p cache && rm -rf cache && echo purged"})])

        fake_llm.responder = respond
        telegram.user_says(GROUP, ADMIN, f"@{telegram.bot.username} purge the cache", chat_type="supergroup")
        question = await telegram.wait_for(
            lambda: next((m for m in telegram.chat(GROUP).bot_messages if m.buttons), None), 10)
        assert question.text.startswith("Run this command? (dangerous: deletes many files)")
        labels = [label for label, _ in question.buttons]
        assert labels == ["Approve once", "For this session", "Deny"]
        once = question.buttons[0][1]

        telegram.press(GROUP, STRANGER, question.message_id, once)
        await telegram.wait_for(lambda: len(telegram.callback_answers) == 1, 10)
        assert telegram.callback_answers[0][1] == "Only an approver can answer this."
        assert feature.approvals.pending()  # still waiting

        telegram.press(GROUP, ADMIN, question.message_id, once)
        await telegram.wait_for(lambda: len(telegram.callback_answers) == 2, 10)
        assert telegram.callback_answers[1][1] == "Done."
        await telegram.wait_for_text(GROUP, "done: purged", 15)
        await e.idle()
        assert question.text.endswith("→ approved by 42") and question.buttons == []
    finally:
        await adapter.stop()
