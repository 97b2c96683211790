"""Two gateways (replicas) of one bot on one database: a turn waits for approval on replica A while the
button press reaches replica B (as a Telegram webhook, a Slack request or the elected Discord connection
may bring it there). B takes it through the database, A's command runs once, and A, which showed the
question, updates it; a stranger's press through B changes nothing, and a press after the end is told so."""

from __future__ import annotations

import asyncio

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import BACKENDS, empty_database

from hermes_engine.approvals.gate import ApprovalRouter
from hermes_engine.ports.approval import Decision, Pressed
from hermes_engine.workspace.feature import WorkspaceFeature

ADMIN = "admin1"
COMMAND = "mkdir -p b && rm -rf b && echo ran >> ran.txt && echo cleaned"


class Screen:
    """A platform's asker on one replica: records what it showed and how it was settled; `answers` is where
    its presses go (the gate's, wired through the router), also on questions it did not show."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue = asyncio.Queue()
        self.settled_as: list[tuple[Decision, str]] = []
        self.answers = None

    async def ask(self, request, answers) -> None:
        self.asked.put_nowait(request)

    async def settled(self, request, decision, note) -> None:
        self.settled_as.append((decision, note))

    def take_presses(self, answers) -> None:
        self.answers = answers


def respond(request):
    if request.turn_tool_results:
        return Reply(text="result: " + request.turn_tool_results[0])
    if request.last_user_text == "clean":
        return Reply(tool_calls=[("terminal", {"command": COMMAND})])
    return Reply(text="ok")


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path):
    async with empty_database(request.param, str(tmp_path / "hermes.db")) as found:
        yield found


async def replica(engine, monkeypatch, tmp_path, database, name: str):
    """A started replica with the terminal, its approvals shown by a `Screen` behind the router."""
    monkeypatch.setenv("HERMES_REPLICA_ID", name)
    profile = make_profile(toolsets=["core", "terminal"], access={"admins": [ADMIN]},
                           workspace={"approve": ["dangerous"]})
    router, screen = ApprovalRouter(), Screen()
    router.add("test", screen)
    feature = WorkspaceFeature(tmp_path, profile.name, profile.workspace, admins=[ADMIN], asker=router,
                               toolsets=profile.toolsets)
    e = await engine(profile=profile, features=[feature], database=database)
    return e, feature, screen


async def test_a_press_taken_by_another_replica_runs_the_waiting_command_once(
        database, engine, fake_llm, monkeypatch, tmp_path):
    fake_llm.responder = respond
    a, a_feature, a_screen = await replica(engine, monkeypatch, tmp_path, database, "replica-a")
    b, b_feature, b_screen = await replica(engine, monkeypatch, tmp_path, database, "replica-b")
    assert b_screen.answers is not None  # the router handed B's asker the gate's way to take presses

    await a.gateway.handle(a.message("clean", user=ADMIN))
    request = await asyncio.wait_for(a_screen.asked.get(), 20)
    assert b_feature.approvals.pending() == []  # B never asked: only the database knows the request

    assert await b_screen.answers.press(request.id, "stranger", Decision.ONCE) is Pressed.NOT_AN_APPROVER
    assert (await a.store.get_approval(request.id)).state == "pending"
    assert await b_screen.answers.press(request.id, ADMIN, Decision.ONCE) is Pressed.TAKEN

    delivered = await a.outlet.wait_for(1, 30)
    assert delivered[0].text == "result: cleaned\n[exit code 0]"
    await a.idle(30)
    assert a_screen.settled_as == [(Decision.ONCE, f"approved by {ADMIN}")]  # A updates the question it showed
    assert b_screen.settled_as == [] and b.outlet.texts == []
    ran = list((a.home / "workspaces").glob("*/ran.txt"))
    assert [p.read_text() for p in ran] == ["ran\n"]  # once

    assert await b_screen.answers.press(request.id, ADMIN, Decision.DENY) is Pressed.ENDED
    assert a_feature.approvals.answer(request.id, ADMIN, Decision.DENY) is False


async def test_a_request_that_ended_on_its_replica_takes_no_press_elsewhere(
        database, engine, fake_llm, monkeypatch, tmp_path):
    fake_llm.responder = respond
    a, _, a_screen = await replica(engine, monkeypatch, tmp_path, database, "replica-a")
    _, _, b_screen = await replica(engine, monkeypatch, tmp_path, database, "replica-b")

    await a.gateway.handle(a.message("clean", user=ADMIN))
    request = await asyncio.wait_for(a_screen.asked.get(), 20)
    await a.gateway.handle(a.message("never mind", user=ADMIN))  # supersedes the request on A
    await a.idle(30)
    assert a_screen.settled_as[0][0] is Decision.DENY
    assert await b_screen.answers.press(request.id, ADMIN, Decision.ONCE) is Pressed.ENDED
    assert await b_screen.answers.press("unknown", ADMIN, Decision.ONCE) is Pressed.ENDED
    assert not list((a.home / "workspaces").glob("*/ran.txt"))
