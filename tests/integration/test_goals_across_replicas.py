"""/goal with two replicas on one database: a goal whose replica died between two turns goes on elsewhere.

Once a goal's turn is answered its inbox event is done, so the inbox takeover has nothing to find: only the
watch for active goals with a free lease (`GoalFeature.resume_orphans`, run every third of a lease) does."""

from __future__ import annotations

import asyncio

from engine_harness import is_judge, verdict
from fakes.fake_llm import Reply

from hermes_engine.config import GoalSettings
from hermes_engine.loops.goals import CONTINUE_PREFIX, GoalFeature
from hermes_engine.ports.leases import goal_lease
from hermes_engine.providers.continuation import CONTINUE


async def settled_goal(replica):
    """The bot's one goal once it is no longer active and the replica is idle (a hang guard of 20 s)."""
    for _ in range(1000):
        [goal] = await replica.store.list_goals(bot="testbot")
        if goal.status != "active":
            break
        await asyncio.sleep(0.02)
    await replica.idle()
    return goal


async def start_replica(engine, monkeypatch, name: str):
    monkeypatch.setenv("HERMES_REPLICA_ID", name)
    return await engine(features=[GoalFeature(GoalSettings())])


async def test_a_goal_whose_replica_died_between_turns_is_resumed_by_another_once(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")
    judged_on_a = asyncio.Event()
    worker_turns: list[str] = []

    def respond(request) -> Reply:
        if is_judge(request):
            if not judged_on_a.is_set():  # replica a dies while it waits for this verdict
                judged_on_a.set()
                return Reply(text=verdict("continue"), delay=60)
            return Reply(text=verdict("done", "finished on replica b"))
        worker_turns.append(request.last_user_text)
        return Reply(text=f"worked step {len(worker_turns)}")

    fake_llm.responder = respond
    a = await start_replica(engine, monkeypatch, "replica-a")
    await a.gateway.handle(a.message("/goal ship the release"))
    await asyncio.wait_for(judged_on_a.wait(), 10)  # turn 1 answered, a judges it under the goal's lease
    [goal] = await a.store.list_goals(bot="testbot")
    assert goal.status == "active" and goal.turns_used == 1
    assert await a.store.pending_inbound() == []  # nothing left for the inbox takeover
    b = await start_replica(engine, monkeypatch, "replica-b")  # its look at start finds the goal's lease held

    async def dies_without_giving_back(name: str) -> None:
        return None

    a.gateway.leases.give_back = dies_without_giving_back  # type: ignore[method-assign]
    await a.gateway.stop()
    assert not await b.store.acquire_lease(goal_lease(goal.id), "replica-b", 1.5)  # still a's until it expires

    goal = await settled_goal(b)
    assert goal.status == "done" and goal.turns_used == 2
    assert worker_turns == ["ship the release", f"{CONTINUE_PREFIX} ship the release"]  # none ran twice
    assert b.outlet.texts == ["worked step 2", "✅ Goal done: ship the release\nfinished on replica b"]


class DiesRightAfterAnswering(GoalFeature):
    """A replica killed between delivering a goal turn's answer (its inbox event done) and counting it."""

    def __init__(self, died: asyncio.Event) -> None:
        super().__init__(GoalSettings())
        self.died = died

    async def on_turn_end(self, outcome) -> None:
        self.died.set()


async def test_a_goal_turn_answered_but_never_judged_is_judged_on_its_stored_answer_by_another(
        engine, fake_llm, monkeypatch):
    judged: list[str] = []
    worker_turns: list[str] = []

    def respond(request) -> Reply:
        if is_judge(request):
            judged.append(request.last_user_text)
            return Reply(text=verdict("continue" if len(judged) == 1 else "done", "ok"),
                         usage={"input": 1, "output": 1})
        worker_turns.append(request.last_user_text)
        return Reply(text=f"worked step {len(worker_turns)}", usage={"input": 100, "output": 10})

    fake_llm.responder = respond
    died = asyncio.Event()
    monkeypatch.setenv("HERMES_REPLICA_ID", "replica-a")
    a = await engine(features=[DiesRightAfterAnswering(died)])
    await a.gateway.handle(a.message("/goal ship the release"))
    await asyncio.wait_for(died.wait(), 10)
    await a.gateway.stop()
    [goal] = await a.store.list_goals(bot="testbot")
    assert (goal.status, goal.turns_used, await a.store.pending_inbound()) == ("active", 0, [])

    b = await start_replica(engine, monkeypatch, "replica-b")
    goal = await settled_goal(b)
    assert (goal.status, goal.turns_used) == ("done", 2)
    assert goal.tokens_used == 2 * 110 + 2 * 2  # the recovered turn's tokens read from what its session stored
    assert "worked step 1" in judged[0]  # the first turn judged on what it answered, not run again
    assert worker_turns == ["ship the release", f"{CONTINUE_PREFIX} ship the release"]


class JudgesNotTheTurn(GoalFeature):
    """A replica whose judge of one goal turn never ran (it died, or the store failed at the turn's end):
    only the watch (`resume_orphans`) finds that turn."""

    def __init__(self, skipped_turn: int) -> None:
        super().__init__(GoalSettings())
        self.skipped_turn, self.seen = skipped_turn, 0

    async def on_turn_end(self, outcome) -> None:
        if outcome.purpose == "goal":
            self.seen += 1
            if self.seen == self.skipped_turn:
                return
        await super().on_turn_end(outcome)


def goal_and_chat(judged: list[str], verdicts: list[str], first_verdict_after: float = 0.0):
    def respond(request) -> Reply:
        if is_judge(request):
            judged.append(request.last_user_text)
            return Reply(text=verdict(verdicts[min(len(judged), len(verdicts)) - 1], "ok"),
                         usage={"input": 1, "output": 1}, delay=first_verdict_after if len(judged) == 1 else 0)
        if "ship the release" in request.last_user_text:
            return Reply(text=f"GOAL STEP {len(judged) + 1}", usage={"input": 100, "output": 10})
        return Reply(text="CHAT ANSWER", usage={"input": 5000, "output": 500})
    return respond


async def test_an_unjudged_goal_turn_is_judged_on_its_own_answer_not_on_the_chat_after_it(engine, fake_llm):
    judged: list[str] = []
    fake_llm.responder = goal_and_chat(judged, ["blocked"])
    feature = JudgesNotTheTurn(skipped_turn=1)
    e = await engine(features=[feature])
    await e.gateway.handle(e.message("/goal ship the release"))
    await e.outlet.wait_for(2)
    await e.idle()
    assert await e.say("what's the weather?") == "CHAT ANSWER"  # the person talks on meanwhile
    await feature.resume_orphans()  # the watch's next round
    await e.idle()
    [goal] = await e.store.list_goals(bot="testbot")
    assert "GOAL STEP 1" in judged[0] and "CHAT ANSWER" not in judged[0]
    assert (goal.status, goal.turns_used, goal.tokens_used) == ("blocked", 1, 110 + 2)


async def test_an_unjudged_goal_turn_after_a_new_session_is_found_in_the_session_it_ran_in(engine, fake_llm):
    judged: list[str] = []
    fake_llm.responder = goal_and_chat(judged, ["continue", "blocked"], first_verdict_after=0.5)
    feature = JudgesNotTheTurn(skipped_turn=2)
    e = await engine(features=[feature])
    await e.gateway.handle(e.message("/goal ship the release"))
    await e.outlet.wait_for(2)
    await e.gateway.handle(e.message("/new"))  # while turn 1 is judged: turn 2 runs in the new session
    await e.idle()
    for _ in range(500):  # turn 2 is queued by the judge of turn 1; its own judge never runs
        if feature.seen == 2:
            break
        await asyncio.sleep(0.01)
    await e.idle()
    await feature.resume_orphans()
    await e.idle()
    [goal] = await e.store.list_goals(bot="testbot")
    assert goal.session_id != (await e.store.active_session(goal.session_key, "testbot")).id
    assert "GOAL STEP 2" in judged[-1]
    assert (goal.turns_used, goal.tokens_used) == (2, 2 * 110 + 2 * 2)


async def test_an_unjudged_goal_turn_whose_answer_the_output_limit_cut_is_judged_on_the_whole_answer(
        engine, fake_llm):
    judged: list[str] = []

    def respond(request) -> Reply:
        if is_judge(request):
            judged.append(request.last_user_text)
            return Reply(text=verdict("blocked", "ok"), usage={"input": 1, "output": 1})
        if request.last_user_text == CONTINUE:
            return Reply(text="dle of the release notes.", usage={"input": 100, "output": 10})
        return Reply(text="GOAL STEP 1 wrote the first half, cut in the mid", at_limit=True,
                     usage={"input": 100, "output": 10})

    fake_llm.responder = respond
    feature = JudgesNotTheTurn(skipped_turn=1)
    e = await engine(features=[feature])
    await e.gateway.handle(e.message("/goal ship the release"))
    await e.outlet.wait_for(2)
    await e.idle()
    await feature.resume_orphans()
    await e.idle()
    [goal] = await e.store.list_goals(bot="testbot")
    assert "GOAL STEP 1 wrote the first half, cut in the middle of the release notes." in judged[0]
    assert (goal.status, goal.tokens_used) == ("blocked", 2 * 110 + 2)  # both parts' tokens count
