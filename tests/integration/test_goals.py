"""/goal through the engine: the judge decides after every turn; budget, garbage, repeats, restart."""

from __future__ import annotations

import asyncio

from engine_harness import goal_script as scripted
from engine_harness import is_judge, make_profile, verdict
from fakes.fake_llm import Reply

from hermes_engine.config import GoalSettings
from hermes_engine.loops.goals import CONTINUE_PREFIX, GoalFeature, parse_verdict


async def goal_engine(engine, max_turns: int = 20):
    return await engine(features=[GoalFeature(GoalSettings(max_turns=max_turns))])


async def test_continue_continue_done_takes_exactly_three_worker_turns(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, state = scripted([verdict("continue"), verdict("continue"), verdict("done", "all set")])
    await e.say("/goal write the checklist")
    await e.idle()
    assert state["worker"] == 3
    worker_inputs = [r.last_user_text for r in fake_llm.requests if not is_judge(r)]
    assert worker_inputs[0] == "write the checklist"
    assert all(t.startswith(CONTINUE_PREFIX) for t in worker_inputs[1:])
    assert e.outlet.texts[-1].startswith("✅ Goal done: write the checklist")
    status = await e.say("/goal status")
    assert "Status: done" in status and "Turns used: 3" in status and "3. done: all set" in status


async def test_continuation_keeps_the_cached_prefix(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, _ = scripted([verdict("continue"), verdict("done")])
    await e.say("/goal tidy up")
    await e.idle()
    worker = [r for r in fake_llm.requests if not is_judge(r)]
    first, second = worker[0].messages, worker[1].messages
    assert second[: len(first)] == first  # the second request extends the first: the prefix stays cached


async def test_judge_that_always_continues_stops_at_the_budget_with_a_summary(engine, fake_llm):
    e = await goal_engine(engine, max_turns=20)
    fake_llm.responder, state = scripted([verdict("continue", "made progress")])
    await e.say("/goal never ending")
    await e.idle(timeout=60)
    assert state["worker"] == 20
    assert "⏸ Goal paused: the budget of 20 turns is spent" in e.outlet.texts[-1]
    assert "Progress so far" in e.outlet.texts[-1]


async def test_judge_prose_is_retried_once_then_counts_as_continue_and_three_in_a_row_pause(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, state = scripted(["I think it went well, keep going!"])
    await e.say("/goal judge speaks prose")
    await e.idle()
    assert state["worker"] == 3 and state["judge"] == 6  # each garbage answer retried once
    assert "was not a verdict" in e.outlet.texts[-1]


async def test_same_answer_three_turns_in_a_row_pauses_the_goal(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, state = scripted([verdict("continue")], worker=lambda r, n: Reply(text="same answer"))
    await e.say("/goal spin")
    await e.idle()
    assert state["worker"] == 3
    assert "going in circles" in e.outlet.texts[-1]


async def test_blocked_posts_the_reason_and_waits(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, state = scripted([verdict("blocked", "I need the database password")])
    await e.say("/goal migrate the db")
    await e.idle()
    assert state["worker"] == 1
    assert "I need the database password" in e.outlet.texts[-1]
    assert "blocked" in await e.say("/goal status")


async def test_empty_goal_shows_usage_and_second_goal_asks_to_clear_first(engine, fake_llm):
    e = await goal_engine(engine)
    assert (await e.say("/goal")).startswith("Usage: /goal")
    fake_llm.responder, _ = scripted([verdict("continue")], worker=lambda r, n: Reply(text=f"s{n}", delay=0.05))
    await e.say("/goal first goal")
    answer = await e.say("/goal second goal")
    assert "already running" in answer and "/goal clear" in answer
    await e.say("/goal clear")
    await e.idle()


async def test_a_person_message_during_a_goal_is_answered_and_the_goal_goes_on(engine, fake_llm):
    e = await goal_engine(engine)

    def worker(request, n):
        if request.last_user_text == "quick question":
            return Reply(text="quick answer")
        return Reply(text=f"goal step {n}", delay=0.02)

    fake_llm.responder, state = scripted([verdict("continue"), verdict("continue"), verdict("done")], worker)
    await e.say("/goal long job")
    await e.gateway.handle(e.message("quick question"))
    await e.idle()
    assert "quick answer" in e.outlet.texts
    assert e.outlet.texts[-1].startswith("✅ Goal done")


async def test_pause_and_resume(engine, fake_llm):
    e = await goal_engine(engine)
    fake_llm.responder, state = scripted([verdict("continue")], worker=lambda r, n: Reply(text=f"s{n}", delay=0.05))
    await e.say("/goal slow work")
    for _ in range(1000):  # paused while its first turn runs
        if state["worker"]:
            break
        await asyncio.sleep(0.01)
    await e.say("/goal pause")
    await e.idle()
    paused_at = state["worker"]
    assert "Status: paused" in await e.say("/goal status")
    fake_llm.responder, state2 = scripted([verdict("done")])
    assert "Resuming" in await e.say("/goal resume")
    await e.idle()
    assert state2["worker"] == 1 and paused_at >= 1


async def test_active_goal_resumes_after_a_restart(engine, fake_llm, tmp_path):
    first = await goal_engine(engine)
    fake_llm.responder, state = scripted([verdict("continue")], worker=lambda r, n: Reply(text=f"s{n}"))
    # Set the goal, then stop the gateway right after the first turn's judge asked to continue.
    await first.say("/goal survive a restart")
    for _ in range(200):
        goal = await first.store.active_goal(next(iter(first.gateway.sessions)), "testbot")
        if goal and goal.turns_used >= 1:
            break
        await asyncio.sleep(0.01)
    await first.stop()
    fake_llm.requests.clear()
    fake_llm.responder, state = scripted([verdict("done", "finished after restart")])
    second = await engine(features=[GoalFeature(GoalSettings())], profile=make_profile())
    await second.idle()
    assert second.outlet.texts[-1].startswith("✅ Goal done: survive a restart")
    goals = await second.store.list_goals(bot="testbot")
    assert goals[0].status == "done"
    stored = await second.store.load_messages(goals[0].session_id)
    turn_events = [m.meta["event_id"] for m in stored if m.role == "user"]
    assert len(turn_events) == len(set(turn_events)) == goals[0].turns_used  # no goal turn ran twice


def test_parse_verdict_accepts_one_json_line_and_rejects_prose():
    assert parse_verdict('{"verdict": "done", "reason": "ok"}') == {"verdict": "done", "reason": "ok"}
    assert parse_verdict('Sure! {"verdict":"blocked","reason":"no key"}')["verdict"] == "blocked"
    assert parse_verdict("The goal looks done to me.") is None
    assert parse_verdict('{"verdict": "maybe"}') is None
