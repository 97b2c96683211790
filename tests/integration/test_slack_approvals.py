"""Approval buttons in Slack: the real slack-bolt app and slack-sdk client against the fake Slack. A dangerous
command shows Block Kit buttons in the thread it was asked in; a stranger's press is answered privately
and changes nothing; a forged press is refused; an approver's press decides, and the message then says
who decided (or that the request expired) and its buttons are gone. A press on a question whose process was
killed is answered privately that the request has ended."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from approval_kit import left_by_a_killed_process
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_slack import FakeSlack
from slack_kit import ServedSlack, serve_slack, slack_environment

from adapters.slack.approvals import ENDED, NOT_AN_APPROVER
from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.workspace.feature import WorkspaceFeature

ADMIN, STRANGER = "UALICE", "UBOB"
CHANNEL = "CGENERAL"
COMMAND = "mkdir -p cache && rm -rf cache && echo purged"


def respond(request):
    if request.turn_tool_results:
        return Reply(text="done: " + request.turn_tool_results[0].splitlines()[0])
    return Reply(tool_calls=[("terminal", {"command": COMMAND})])


class Bot:
    def __init__(self, fake: FakeSlack, feature: WorkspaceFeature, engine) -> None:
        self.fake, self.feature, self.engine = fake, feature, engine

    async def ask(self):
        """Alice asks in the channel; returns (her message, the bot's question with buttons in its thread)."""
        asked = await self.fake.say(ADMIN, CHANNEL, f"<@{self.fake.bot_user}> purge the cache")
        await self.fake.wait_for(lambda: self.question(asked.ts) is not None)
        return asked, self.question(asked.ts)

    def question(self, thread_ts: str):
        return next((m for m in self.fake.bot_messages(CHANNEL, thread_ts) if m.buttons()), None)

    async def reply_containing(self, text: str, thread_ts: str) -> None:
        await self.fake.wait_for(lambda: any(text in m.visible for m in self.fake.bot_messages(CHANNEL, thread_ts)),
                                 15)


@pytest.fixture
async def slack_terminal(engine, fake_llm, tmp_path, monkeypatch):
    served: list[ServedSlack] = []
    async with FakeSlack() as fake:
        async def make(*, socket_mode: bool = False, approval_timeout: float = 300) -> Bot:
            slack_environment(monkeypatch, fake, socket_mode=socket_mode)
            profile = make_profile(toolsets=["core", "terminal"],
                                   access={"admins": [ADMIN], "allowed_users": [STRANGER]},
                                   workspace={"approve": ["dangerous"], "approval_timeout_seconds": approval_timeout})
            router = ApprovalRouter()
            feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=[ADMIN], asker=router,
                                       toolsets=profile.toolsets)
            e = await engine(profile=profile, features=[feature], platform="slack")
            served.append(await serve_slack(e, events_from=None if socket_mode else fake,
                                            before_start=lambda a: router.add("slack", a.approval_asker())))
            if socket_mode:
                await fake.wait_for_socket()
            fake_llm.responder = respond
            return Bot(fake, feature, e)

        yield make
        for replica in served:
            await replica.close()


async def test_a_dangerous_command_waits_for_an_approvers_press_in_slack_and_then_runs(slack_terminal):
    bot = await slack_terminal()
    fake = bot.fake
    asked, question = await bot.ask()
    assert question.thread_ts == asked.ts  # in the thread of the message that asked
    assert question.visible.startswith("Run this command? (dangerous: deletes many files)")
    assert [b["text"]["text"] for b in question.buttons()] == ["Approve once", "Approve for this session", "Deny"]

    stranger = await fake.press(STRANGER, question, "Approve once")
    assert stranger.status == 200
    await fake.wait_for(lambda: len(fake.ephemerals) == 1)
    private = fake.ephemerals[0]
    assert (private["user"], private["channel"], private["text"]) == (STRANGER, CHANNEL, NOT_AN_APPROVER)
    assert private.get("thread_ts") == asked.ts
    assert bot.feature.approvals.pending() and question.buttons() and question.edits == []

    assert (await fake.press(ADMIN, question, "Approve once")).status == 200
    await bot.reply_containing("done: purged", asked.ts)
    assert question.visible.endswith("→ approved by UALICE") and question.buttons() == []
    assert question.blocks[-1]["elements"][0]["text"] == "→ approved by <@UALICE>"  # shown as her name
    assert len(fake.ephemerals) == 1  # the approver's press needed no private answer


async def test_presses_arrive_over_socket_mode_and_approve_for_the_session(slack_terminal):
    bot = await slack_terminal(socket_mode=True)
    asked, question = await bot.ask()
    await bot.fake.press(ADMIN, question, "Approve for this session")
    await bot.reply_containing("done: purged", asked.ts)
    assert question.visible.endswith("→ approved by UALICE") and question.buttons() == []


async def test_a_block_action_with_a_forged_signature_is_refused_and_deny_ends_it(slack_terminal, fake_llm):
    bot = await slack_terminal()
    fake = bot.fake
    asked, question = await bot.ask()

    forged = await fake.press(ADMIN, question, "Approve once", secret="not-the-signing-secret")
    assert forged.status == 401
    stale = await fake.press(ADMIN, question, "Approve once", timestamp=0)  # a replayed press
    assert stale.status == 401
    assert bot.feature.approvals.pending() and question.buttons() and question.edits == []

    await fake.press(ADMIN, question, "Deny")
    await bot.reply_containing("Denied: the command was not run", asked.ts)
    assert question.visible.endswith("→ denied by UALICE") and question.buttons() == []
    assert "purged" not in fake_llm.requests[-1].turn_tool_results[0]


async def test_an_expired_request_shows_as_expired_and_a_late_press_is_answered_privately(slack_terminal,
                                                                                          fake_llm):
    bot = await slack_terminal(approval_timeout=1.0)
    fake = bot.fake
    asked, question = await bot.ask()
    as_first_shown = replace(question, blocks=list(question.blocks))  # a client that has not refreshed yet
    await bot.reply_containing("Denied: the command was not run", asked.ts)
    assert question.visible.endswith("→ nobody approved it in time") and question.buttons() == []
    assert "nobody approved it in time" in fake_llm.requests[-1].turn_tool_results[0]

    await fake.press(ADMIN, as_first_shown, "Approve once")
    await fake.wait_for(lambda: len(fake.ephemerals) == 1)
    assert (fake.ephemerals[0]["user"], fake.ephemerals[0]["text"]) == (ADMIN, ENDED)
    assert question.visible.endswith("→ nobody approved it in time")


async def test_a_press_on_a_question_whose_process_was_killed_is_answered_privately_that_it_ended(slack_terminal):
    bot = await slack_terminal()
    fake, gate = bot.fake, bot.feature.approvals
    target = ReplyTarget("slack", fake.team, CHANNEL)
    request = await left_by_a_killed_process(bot.engine.store, bot.engine.gateway.bot, target, ADMIN)
    assert gate.asker is not None
    await gate.asker.ask(request, gate)  # the question the killed process had shown
    question = next(m for m in fake.bot_messages(CHANNEL) if m.buttons())

    await fake.press(ADMIN, question, "Approve once")
    await fake.wait_for(lambda: len(fake.ephemerals) == 1)
    assert (fake.ephemerals[0]["user"], fake.ephemerals[0]["text"]) == (ADMIN, ENDED)
    assert (await bot.engine.store.get_approval(request.id)).state == "ended"  # for every replica from now on


def test_the_slack_manifest_sends_button_presses_to_the_events_path():
    manifest = yaml.safe_load((Path(__file__).parents[2] / "bots/slack-channel-bot/manifest.yaml").read_text())
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert interactivity["request_url"] == manifest["settings"]["event_subscriptions"]["request_url"]
    assert "chat:write" in manifest["oauth_config"]["scopes"]["bot"]  # chat.update and chat.postEphemeral


async def test_an_approval_question_that_meets_a_rate_limit_waits_retry_after_and_is_shown(slack_terminal):
    bot = await slack_terminal()
    fake = bot.fake
    fake.fail("chat.postMessage", status=429, retry_after=1)  # the question is the bot's first post
    asked, question = await bot.ask()
    refused, shown = fake.calls_to("chat.postMessage")[:2]
    assert shown.at - refused.at >= 1.0, "asked again only after Retry-After"
    assert question.buttons() and bot.feature.approvals.pending()

    await fake.press(ADMIN, question, "Approve once")
    await bot.reply_containing("done: purged", asked.ts)
