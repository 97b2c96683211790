"""Slack over HTTP with two replicas of one bot on one database: Slack may post a button press to any
replica. The question shown by replica A is pressed and the press is posted to replica B: B takes it
through the database (a stranger is answered privately there and nothing changes), A's waiting command
runs, and A updates the question it showed to say who decided."""

from __future__ import annotations

from dataclasses import replace

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_slack import FakeSlack
from slack_kit import ServedSlack, serve_slack, slack_environment

from adapters.slack.approvals import ENDED, NOT_AN_APPROVER
from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.workspace.feature import WorkspaceFeature

ADMIN, STRANGER = "UALICE", "UBOB"
CHANNEL = "CGENERAL"
COMMAND = "mkdir -p cache && rm -rf cache && echo purged >> purged.txt && echo purged"


def respond(request):
    if request.turn_tool_results:
        return Reply(text="done: " + request.turn_tool_results[0].splitlines()[0])
    return Reply(tool_calls=[("terminal", {"command": COMMAND})])


@pytest.fixture
async def replicas(engine, fake_llm, tmp_path, monkeypatch):
    """`await replicas(name)`: a started replica (gateway, Slack adapter on its own HTTP site); returns
    (its events URL, its workspace feature)."""
    served: list[ServedSlack] = []
    async with FakeSlack() as fake:
        slack_environment(monkeypatch, fake)
        fake_llm.responder = respond

        async def make(name: str) -> tuple[str, WorkspaceFeature]:
            monkeypatch.setenv("HERMES_REPLICA_ID", name)
            profile = make_profile(toolsets=["core", "terminal"],
                                   access={"admins": [ADMIN], "allowed_users": [STRANGER]},
                                   workspace={"approve": ["dangerous"]})
            router = ApprovalRouter()
            feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=[ADMIN], asker=router,
                                       toolsets=profile.toolsets)
            e = await engine(profile=profile, features=[feature], platform="slack")
            served.append(await serve_slack(e, before_start=lambda a: router.add("slack", a.approval_asker())))
            return served[-1].events_url, feature

        yield fake, make
        for replica in served:
            await replica.close()


async def test_a_press_posted_to_the_replica_that_did_not_ask_decides_and_the_asker_updates_the_question(
        replicas, tmp_path):
    fake, make = replicas
    a_url, a_feature = await make("replica-a")
    b_url, b_feature = await make("replica-b")

    fake.events_url = a_url  # the message reaches replica A, whose turn asks
    asked = await fake.say(ADMIN, CHANNEL, f"<@{fake.bot_user}> purge the cache")

    def question():
        return next((m for m in fake.bot_messages(CHANNEL, asked.ts) if m.buttons()), None)

    await fake.wait_for(lambda: question() is not None, 20)
    shown = question()
    as_first_shown = replace(shown, blocks=list(shown.blocks))  # a client that has not refreshed yet
    assert a_feature.approvals.pending() and not b_feature.approvals.pending()

    fake.events_url = b_url  # every press reaches replica B
    assert (await fake.press(STRANGER, shown, "Approve once")).status == 200
    await fake.wait_for(lambda: len(fake.ephemerals) == 1, 15)
    assert (fake.ephemerals[0]["user"], fake.ephemerals[0]["text"]) == (STRANGER, NOT_AN_APPROVER)
    assert a_feature.approvals.pending() and shown.buttons()

    assert (await fake.press(ADMIN, shown, "Approve once")).status == 200
    await fake.wait_for(lambda: any("done: purged" in m.visible for m in fake.bot_messages(CHANNEL, asked.ts)), 20)
    assert shown.visible.endswith("→ approved by UALICE") and shown.buttons() == []  # updated by replica A
    assert [p.read_text() for p in (tmp_path / "workspaces").glob("*/purged.txt")] == ["purged\n"]
    assert len(fake.ephemerals) == 1  # the approver's press needed no private answer

    await fake.press(ADMIN, as_first_shown, "Deny")  # a second press, on B, after the decision
    await fake.wait_for(lambda: len(fake.ephemerals) == 2, 15)
    assert (fake.ephemerals[1]["user"], fake.ephemerals[1]["text"]) == (ADMIN, ENDED)
