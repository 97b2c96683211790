"""Workspace tools in turns nobody types in: a goal continuation and a kanban worker act for the person who
set the goal or made the card, with that person's access and in the workspace of the conversation it came
from, where their dangerous commands are asked about; the background review never gets them."""

from __future__ import annotations

import asyncio

from engine_harness import goal_script, is_judge, make_profile, verdict
from fakes.fake_llm import Reply

from hermes_engine.kanban.worker import WORKER_SYSTEM
from hermes_engine.workspace.folders import WorkspaceFolders

ADMIN = "admin1"


def profile(**overrides):
    base = dict(toolsets=["core", "terminal", "files", "kanban"], access={"admins": [ADMIN]},
                workspace={"approve": []}, review={"memory_every_turns": 0, "skill_every_iterations": 0},
                kanban={"tick_seconds": 0.2, "lease_seconds": 5.0})
    return make_profile(**{**base, **overrides})


def goal_worker(request, n):
    if not request.turn_tool_results:
        return Reply(tool_calls=[("terminal", {"command": "echo from-the-goal > made; cat made"})])
    return Reply(text="ran: " + request.turn_tool_results[-1])


async def test_an_admins_goal_runs_commands_in_the_conversations_workspace(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.responder, _ = goal_script([verdict("done", "ran it")], worker=goal_worker)
    await e.say("/goal make the file", user=ADMIN)
    await e.idle(30)
    ran = [r for r in fake_llm.requests if not is_judge(r) and r.turn_tool_results]
    assert ran[0].turn_tool_results[0] == "from-the-goal\n[exit code 0]"
    made = list((e.home / "workspaces").glob("*/made"))
    assert [p.read_text() for p in made] == ["from-the-goal\n"]


async def test_a_goal_set_by_someone_who_is_not_an_admin_cannot_run_commands(engine, fake_llm):
    e = await engine(profile=profile())
    fake_llm.responder, _ = goal_script([verdict("done", "tried")], worker=goal_worker)
    await e.say("/goal make the file", user="someone")
    await e.idle(30)
    ran = [r for r in fake_llm.requests if not is_judge(r) and r.turn_tool_results]
    assert "only an admin" in ran[0].turn_tool_results[0]
    assert not list((e.home / "workspaces").glob("*/made"))


def is_worker(request) -> bool:
    return request.system.startswith(WORKER_SYSTEM.splitlines()[0])


async def kanban_run(e, fake_llm, user: str) -> str:
    """`user` asks for a card; its worker runs a command; returns what the worker's command returned."""
    seen: list[str] = []

    def respond(request):
        if is_worker(request):
            if not request.turn_tool_results:
                return Reply(tool_calls=[("terminal", {"command": "echo from-the-card > card; cat card"})])
            seen.append(request.turn_tool_results[0])
            return Reply(text="card work finished")
        if not request.turn_tool_results:
            return Reply(tool_calls=[("kanban", {"tasks": ["make the card file"]})])
        return Reply(text="queued")

    fake_llm.responder = respond
    before = len(e.outlet.delivered)
    assert e.gateway is not None
    await e.gateway.handle(e.message("put it on the board", user=user))
    while "queued" not in e.outlet.texts[before:]:  # the card's start notice may come before the answer
        await e.outlet.wait_for(len(e.outlet.delivered) + 1, 30)
    while not seen:
        await e.outlet.wait_for(len(e.outlet.delivered) + 1, 30)
    await asyncio.sleep(0)
    return seen[0]


async def test_an_admins_kanban_card_runs_commands_in_a_workspace_of_its_own(engine, fake_llm):
    e = await engine(profile=profile())
    assert await kanban_run(e, fake_llm, ADMIN) == "from-the-card\n[exit code 0]"
    made = list((e.home / "workspaces").glob("*/card"))
    card = WorkspaceFolders.of(e.home).name("testbot", "card-1")
    assert [(p.parent.name, p.read_text()) for p in made] == [(card, "from-the-card\n")]


async def test_a_strangers_kanban_card_cannot_run_commands(engine, fake_llm):
    e = await engine(profile=profile())
    assert "only an admin" in await kanban_run(e, fake_llm, "someone")
    assert not list((e.home / "workspaces").glob("*/card"))


async def test_the_background_review_never_runs_commands(engine, fake_llm):
    e = await engine(profile=profile(review={"memory_every_turns": 1, "skill_every_iterations": 0}))
    review_results: list[str] = []

    def respond(request):
        if "[Background review" in request.last_user_text:
            if request.turn_tool_results:
                review_results.extend(request.turn_tool_results)
                return Reply(text="Nothing to save.")
            return Reply(tool_calls=[("terminal", {"command": "echo from-the-review > review"}),
                                     ("write_file", {"path": "review2", "content": "x"})])
        return Reply(text="hello")

    fake_llm.responder = respond
    assert await e.say("hi", user=ADMIN) == "hello"
    await e.idle(30)
    assert len(review_results) == 2 and all("not available during a review" in r for r in review_results)
    assert not list((e.home / "workspaces").glob("*/review*"))


class Asker:
    """Shows nothing and answers nothing: records what was asked, where (and where answers go)."""

    def __init__(self) -> None:
        self.asked: list = []
        self.answers: list = []

    def take_presses(self, answers) -> None:
        return None  # the test answers through what `ask` was given

    async def ask(self, request, answers) -> None:
        self.asked.append(request)
        self.answers.append(answers)

    async def settled(self, request, decision, note) -> None:
        return None


async def test_a_dangerous_command_in_a_goal_is_asked_about_in_its_conversation_and_expiry_denies(
        engine, fake_llm, tmp_path):
    from hermes_engine.config import GoalSettings
    from hermes_engine.loops.goals import GoalFeature
    from hermes_engine.workspace.feature import WorkspaceFeature

    p = profile(workspace={"approve": ["dangerous"], "approval_timeout_seconds": 0.5})
    asker = Asker()
    features = [WorkspaceFeature(tmp_path, p.name, p.workspace, admins=p.access.admins, asker=asker,
                                 toolsets=p.toolsets), GoalFeature(GoalSettings())]
    e = await engine(profile=p, features=features)

    def worker(request, n):
        if not request.turn_tool_results:
            return Reply(tool_calls=[("terminal", {"command": "mkdir -p b && rm -rf b && echo cleaned"})])
        return Reply(text="tried: " + request.turn_tool_results[-1])

    fake_llm.responder, _ = goal_script([verdict("done", "tried")], worker=worker)
    await e.say("/goal clean up", user=ADMIN, chat="c7")
    await e.idle(30)
    [request] = asker.asked
    assert request.target.chat_id == "c7" and request.risk == "dangerous"
    ran = [r for r in fake_llm.requests if not is_judge(r) and r.turn_tool_results]
    assert "nobody approved it in time" in ran[0].turn_tool_results[0]


async def until(condition, timeout: float = 30.0) -> None:
    """Wait for `condition()`; the timeout only guards against a hang."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.02)


async def test_a_dangerous_command_in_a_kanban_card_is_asked_about_in_the_cards_conversation(engine, fake_llm,
                                                                                           tmp_path):
    from hermes_engine.kanban.feature import KanbanFeature
    from hermes_engine.ports.approval import Decision
    from hermes_engine.workspace.feature import WorkspaceFeature

    p = profile(workspace={"approve": ["dangerous"]})
    asker = Asker()
    features = [WorkspaceFeature(tmp_path, p.name, p.workspace, admins=p.access.admins, asker=asker,
                                 toolsets=p.toolsets), KanbanFeature(p.kanban)]
    e = await engine(profile=p, features=features)
    seen: list[str] = []

    def respond(request):
        if is_worker(request):
            if not request.turn_tool_results:
                return Reply(tool_calls=[("terminal", {"command": "mkdir -p b && rm -rf b && echo carded > card"})])
            seen.append(request.turn_tool_results[0])
            return Reply(text="card work finished")
        if not request.turn_tool_results:
            return Reply(tool_calls=[("kanban", {"tasks": ["clean up the build folder"]})])
        return Reply(text="queued")

    fake_llm.responder = respond
    assert e.gateway is not None
    await e.gateway.handle(e.message("put it on the board", user=ADMIN, chat="c8"))
    await until(lambda: asker.asked)
    [request] = asker.asked
    assert request.target.chat_id == "c8" and request.risk == "dangerous" and "rm -rf b" in request.command
    assert request.session_key.endswith(":c8")  # the conversation's session: a new message there denies it
    assert not list((e.home / "workspaces").glob("*/card"))  # nothing ran before the answer

    assert asker.answers[0].answer(request.id, ADMIN, Decision.ONCE) is True
    await until(lambda: seen)
    assert seen == ["[exit code 0]"]
    made = list((e.home / "workspaces").glob("*/card"))
    card = WorkspaceFolders.of(tmp_path).name("testbot", "card-1")
    assert [(path.parent.name, path.read_text()) for path in made] == [(card, "carded\n")]  # the card's own
