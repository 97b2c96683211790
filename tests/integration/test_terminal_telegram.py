"""Approval buttons in Telegram: the real python-telegram-bot against the fake Bot API. A dangerous command
shows inline buttons in the chat; a stranger's press changes nothing; the admin's press runs it; the
message then says who decided and its buttons are gone. A second press, a press after expiry and a press
after a restart are answered that the request has ended, and change nothing."""

from __future__ import annotations

import asyncio
import copy
import os
from pathlib import Path

import pytest
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import ChatMessage, FakeTelegram, FakeUser

from adapters.telegram import PLATFORM
from adapters.telegram.adapter import TelegramAdapter
from hermes_engine.agent.loop import INTERRUPTED_RESULT
from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.workspace.feature import WorkspaceFeature

ADMIN = FakeUser(42, "Alice", "alice")
STRANGER = FakeUser(77, "Mallory", "mallory")
GROUP = -100555
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
COMMAND = "mkdir -p cache && rm -rf cache && echo purged | tee -a runs"
ENDED = "This request has ended."

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def respond(request):
    if request.turn_tool_results:
        return Reply(text="done: " + request.turn_tool_results[0].splitlines()[0])
    return Reply(tool_calls=[("terminal", {"command": COMMAND})])


class Life:
    """One gateway process as the runner assembles it (adapter attached before the gateway starts, so a
    replayed turn answers in Telegram), whose dangerous commands need alice's approval."""

    def __init__(self, telegram: FakeTelegram, home: Path, approval_timeout: float) -> None:
        self.telegram, self.home = telegram, home
        self.profile = make_profile(toolsets=["core", "terminal"], access={"admins": ["42"], "allowed_users": ["77"]},
                                    platforms={"telegram": FAST},
                                    workspace={"approve": ["dangerous"], "approval_timeout_seconds": approval_timeout})
        router = ApprovalRouter()
        self.feature = WorkspaceFeature(home, self.profile.name, self.profile.workspace, admins=["42"],
                                        asker=router, toolsets=self.profile.toolsets)
        self.router = router
        self.e = Engine(home, self.profile, [self.feature])
        self.adapter: TelegramAdapter | None = None

    async def start(self) -> Life:
        from hermes_gateway.wiring import build_gateway
        from storage.store import SqlStore

        e = self.e
        e.store = SqlStore(e.settings.db_url)
        await e.store.init()
        e.gateway = build_gateway(e.settings, self.profile, e.store, features=[self.feature])
        self.adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
        e.gateway.attach(self.adapter)
        self.router.add("telegram", self.adapter.approval_asker())
        await self.adapter.start()
        await e.gateway.start()
        await asyncio.wait_for(self.adapter.ready.wait(), 5)
        return self

    async def end(self) -> None:
        """The runner's order: stop receiving, stop the gateway (cut turns stay in the inbox), close."""
        if self.adapter is None:
            return
        adapter, self.adapter = self.adapter, None
        await adapter.stop_receiving()
        assert self.e.gateway is not None and self.e.store is not None
        await self.e.gateway.stop()
        await adapter.stop()
        await self.e.store.close()

    async def ask(self) -> ChatMessage:
        """alice asks in the group; returns the bot's question with its buttons."""
        self.telegram.user_says(GROUP, ADMIN, f"@{self.telegram.bot.username} purge the cache", chat_type="supergroup")
        return await self.telegram.wait_for(
            lambda: next((m for m in self.telegram.chat(GROUP).bot_messages if m.buttons), None), 10)

    def runs(self) -> list[str]:
        """What the command left in the workspace: one line per time it ran."""
        return [line for p in (self.home / "workspaces").glob("*/runs") for line in p.read_text().splitlines()]


def button(question: ChatMessage, label: str) -> str:
    return dict(question.buttons)[label]


@pytest.fixture
async def gateway_life(telegram, fake_llm, tmp_path, monkeypatch):
    """`await gateway_life(approval_timeout=...)`: a started `Life`; call it again for the next process."""
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    fake_llm.responder = respond
    lives: list[Life] = []

    async def start(approval_timeout: float = 300.0) -> Life:
        lives.append(await Life(telegram, tmp_path, approval_timeout).start())
        return lives[-1]

    yield start
    for life in lives:
        await life.end()


async def test_a_dangerous_command_runs_after_the_admin_presses_approve(gateway_life, telegram):
    life = await gateway_life()
    question = await life.ask()
    assert question.text.startswith("Run this command? (dangerous: deletes many files)")
    assert [label for label, _ in question.buttons] == ["Approve once", "For this session", "Deny"]
    once = button(question, "Approve once")

    telegram.press(GROUP, STRANGER, question.message_id, once)
    await telegram.wait_for(lambda: len(telegram.callback_answers) == 1, 10)
    assert telegram.callback_answers[0][1] == "Only an approver can answer this."
    assert life.feature.approvals.pending()  # still waiting

    telegram.press(GROUP, ADMIN, question.message_id, once)
    await telegram.wait_for(lambda: len(telegram.callback_answers) == 2, 10)
    assert telegram.callback_answers[1][1] == "Done."
    await telegram.wait_for_text(GROUP, "done: purged", 15)
    await life.e.idle()
    assert question.text.endswith("→ approved by 42") and question.buttons == []


async def test_a_button_pressed_twice_decides_once_and_the_second_press_is_answered_that_it_ended(
        gateway_life, telegram, fake_llm):
    life = await gateway_life()
    question = await life.ask()
    telegram.press(GROUP, ADMIN, question.message_id, button(question, "Approve once"))
    telegram.press(GROUP, ADMIN, question.message_id, button(question, "Deny"))  # a second tap, same view

    await telegram.wait_for(lambda: len(telegram.callback_answers) == 2, 10)
    assert [text for _, text in telegram.callback_answers] == ["Done.", ENDED]
    await telegram.wait_for_text(GROUP, "done: purged", 15)
    await life.e.idle()
    assert question.text.endswith("→ approved by 42") and question.buttons == []
    assert life.runs() == ["purged"]  # ran once; the Deny changed nothing
    assert sum(1 for m in telegram.chat(GROUP).bot_messages if m.text.startswith("Run this command?")) == 1


async def test_an_expired_request_is_denied_and_a_late_press_is_answered_that_it_ended(gateway_life, telegram,
                                                                                       fake_llm):
    life = await gateway_life(approval_timeout=1.0)
    question = await life.ask()
    as_first_shown = copy.deepcopy(question)  # a client that has not refreshed yet
    await telegram.wait_for(lambda: not question.buttons, 15, "the question never lost its buttons")
    assert question.text.endswith("→ nobody approved it in time")
    await life.e.idle(30)
    assert "nobody approved it in time" in fake_llm.requests[-1].turn_tool_results[0]
    await telegram.wait_for(lambda: any(t.startswith("done: Error: Denied: the command was not run")
                                        for t in telegram.chat(GROUP).bot_texts), 15)

    telegram.press(GROUP, ADMIN, question.message_id, button(as_first_shown, "Approve once"), shown=as_first_shown)
    await telegram.wait_for(lambda: telegram.callback_answers, 10)
    assert [text for _, text in telegram.callback_answers] == [ENDED]
    await life.e.idle()
    assert question.text.endswith("→ nobody approved it in time") and life.runs() == []


async def test_after_a_restart_the_old_question_says_it_ended_and_its_button_runs_nothing(gateway_life, telegram,
                                                                                          fake_llm):
    first = await gateway_life()
    question = await first.ask()
    as_first_shown = copy.deepcopy(question)
    await first.end()  # stopped while the request waits
    assert question.text.endswith("→ the turn stopped before anyone answered") and question.buttons == []

    second = await gateway_life()  # the cut turn is answered again, its command marked interrupted
    await telegram.wait_for_text(GROUP, "done: Error: " + INTERRUPTED_RESULT, 15)
    telegram.press(GROUP, ADMIN, question.message_id, button(as_first_shown, "Approve once"), shown=as_first_shown)
    await telegram.wait_for(lambda: telegram.callback_answers, 10)
    assert [text for _, text in telegram.callback_answers] == [ENDED]
    await second.e.idle()
    assert not second.feature.approvals.pending() and second.runs() == []
    assert sum(1 for m in telegram.chat(GROUP).bot_messages if m.text.startswith("Run this command?")) == 1


async def test_an_approval_question_that_meets_a_rate_limit_is_shown_after_the_wait_and_the_command_runs(
        gateway_life, telegram):
    life = await gateway_life()
    telegram.rate_limit(GROUP, retry_after=1, methods=("sendMessage",))  # the chat's next message meets a 429
    question = await life.ask()
    assert question.text.startswith("Run this command?")
    telegram.press(GROUP, ADMIN, question.message_id, button(question, "Approve once"))
    await telegram.wait_for_text(GROUP, "done: purged", 15)
    await life.e.idle()
    assert life.runs() == ["purged"]
    assert telegram.chat(GROUP).violations == []  # nothing was sent to the chat before the wait was over
