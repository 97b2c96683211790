"""Daily usage limits through the real engine and store against the fake LLM: a person (or the whole bot)
over a limit hears when it resets and costs no model call; admins are never refused; the counts are in
the database, so a restart keeps them. What runs on a person's behalf counts against them too: their goal's
turns (as turns) and its judge, a background review and a sub-agent (as tokens); accounts joined by /link
share one count."""

from __future__ import annotations

from datetime import UTC, datetime

from engine_harness import goal_script, is_judge, make_profile, verdict
from fakes.fake_llm import Reply

from hermes_engine.config import GoalSettings
from hermes_engine.loops.delegation import SUBAGENT_SYSTEM
from hermes_engine.loops.goals import GoalFeature
from hermes_engine.ports.storage import UsageCount
from hermes_gateway.metrics import PrometheusMetrics


def limited(**limits: int) -> dict[str, object]:
    return {"limits": limits}


async def test_a_person_over_the_turn_limit_is_told_when_it_resets_and_the_model_is_not_called(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    metrics = PrometheusMetrics()
    e = await engine(profile=make_profile(**limited(turns_per_day=2)), metrics=metrics)
    assert await e.say("one") == "answer"
    assert await e.say("two") == "answer"
    calls = len(fake_llm.requests)

    refused = await e.say("three")
    await e.idle()
    assert "daily limit of 2 turns" in refused and "midnight UTC" in refused
    assert len(fake_llm.requests) == calls
    assert await e.say("hi", user="u2") == "answer"  # another person has their own count
    assert metrics.registry.get_sample_value("hermes_usage_limit_refusals_total",
                                            {"bot": "testbot", "limit": "person_turns"}) == 1


async def test_a_person_over_the_token_limit_is_refused_from_the_next_turn(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="long answer", usage={"input": 900, "output": 200})
    e = await engine(profile=make_profile(**limited(tokens_per_day=1000)))
    assert await e.say("tell me everything") == "long answer"  # 1100 tokens: this turn crosses the limit
    await e.idle()
    calls = len(fake_llm.requests)

    refused = await e.say("and more")
    assert "daily limit of 1000 tokens" in refused and "resets at midnight UTC" in refused
    assert len(fake_llm.requests) == calls


async def test_the_bot_total_limits_everyone_together(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    e = await engine(profile=make_profile(**limited(total_turns_per_day=2)))
    assert await e.say("one", user="u1") == "answer"
    assert await e.say("two", user="u2") == "answer"
    calls = len(fake_llm.requests)
    assert "as many messages as I may today" in await e.say("three", user="u3")
    assert len(fake_llm.requests) == calls


async def test_the_bot_total_of_tokens_limits_everyone_together(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage={"input": 900, "output": 200})
    e = await engine(profile=make_profile(**limited(total_tokens_per_day=2000)))
    assert await e.say("one", user="u1") == "answer"
    assert await e.say("two", user="u2") == "answer"  # 2,200 tokens spent by two people
    await e.idle()
    calls = len(fake_llm.requests)
    assert "all the tokens I may use today" in await e.say("three", user="u3")
    assert len(fake_llm.requests) == calls


async def test_admins_are_never_refused(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    e = await engine(profile=make_profile(access={"admins": ["boss"]}, **limited(turns_per_day=1)))
    for text in ("one", "two", "three"):
        assert await e.say(text, user="boss") == "answer"


async def test_counts_survive_a_restart_on_the_same_database(engine, fake_llm, tmp_path):
    fake_llm.responder = lambda request: Reply(text="answer")
    profile = make_profile(**limited(turns_per_day=1))
    first = await engine(profile=profile, home=tmp_path)
    assert await first.say("one") == "answer"
    await first.idle()
    await first.stop()
    calls = len(fake_llm.requests)

    second = await engine(profile=profile, home=tmp_path)
    assert "daily limit of 1 turn." in await second.say("two")
    assert len(fake_llm.requests) == calls


async def test_status_shows_a_person_their_use_today_and_their_limit(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage={"input": 40, "output": 2})
    e = await engine(profile=make_profile(**limited(turns_per_day=5, tokens_per_day=9000)))
    assert await e.say("one") == "answer"
    await e.idle()
    status = await e.say("/status")
    assert "Today: 1 of 5 turns, 42 of 9000 tokens." in status and "midnight UTC" in status


async def test_without_limits_nothing_is_refused_or_shown(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    e = await engine()
    for text in ("one", "two", "three"):
        assert await e.say(text) == "answer"
    assert "Today:" not in await e.say("/status")


async def used_today(e, user: str = "u1") -> UsageCount:
    await e.idle()  # tokens are counted off the turn's path
    person = await e.gateway.person_of(e.platform, "acct", user)
    return await e.store.usage_of("testbot", person, datetime.now(UTC).date())


async def test_a_goal_gets_only_the_turns_left_to_its_person_today_then_pauses_saying_why(engine, fake_llm):
    e = await engine(profile=make_profile(**limited(turns_per_day=3)),
                     features=[GoalFeature(GoalSettings(max_turns=10))])
    fake_llm.responder, state = goal_script([verdict("continue")])
    await e.say("/goal count to ten, one turn at a time")
    await e.idle()

    assert state["worker"] == 3 and state["judge"] == 3
    paused = [t for t in e.outlet.texts if "Goal paused" in t]
    assert len(paused) == 1
    assert "daily limit of 3 turns" in paused[0] and "resets at midnight UTC" in paused[0]
    assert "/goal resume" in paused[0]
    assert "Status: paused" in await e.say("/goal status")
    assert (await used_today(e)).turns == 3
    calls = len(fake_llm.requests)
    assert "daily limit of 3 turns" in await e.say("and one more question")
    assert len(fake_llm.requests) == calls


async def test_an_admins_goal_is_not_held_to_the_turn_limit(engine, fake_llm):
    e = await engine(profile=make_profile(access={"admins": ["boss"]}, **limited(turns_per_day=3)),
                     features=[GoalFeature(GoalSettings(max_turns=5))])
    fake_llm.responder, state = goal_script([verdict("continue")])
    await e.say("/goal count to five", user="boss")
    await e.idle()
    assert state["worker"] == 5
    assert "the budget of 5 turns is spent" in e.outlet.texts[-1]
    assert (await used_today(e, "boss")).turns == 5  # counted all the same


async def test_a_goals_judge_calls_count_their_tokens_against_the_person(engine, fake_llm):
    def respond(request):
        if is_judge(request):
            return Reply(text=verdict("done"), usage={"input": 500, "output": 7})
        return Reply(text="did it", usage={"input": 100, "output": 3})

    fake_llm.responder = respond
    e = await engine(profile=make_profile(**limited(tokens_per_day=100_000)),
                     features=[GoalFeature(GoalSettings(max_turns=5))])
    await e.say("/goal do the one thing")
    await e.idle()
    assert e.outlet.texts[-1].startswith("✅ Goal done")
    assert await used_today(e) == UsageCount(turns=1, tokens=103 + 507)


async def test_a_background_reviews_tokens_count_against_the_person_whose_turn_it_follows(engine, fake_llm):
    def respond(request):
        if "[Background review" in request.last_user_text:
            return Reply(text="Nothing to save.", usage={"input": 1000, "output": 4})
        return Reply(text="answer", usage={"input": 100, "output": 5})

    fake_llm.responder = respond
    e = await engine(profile=make_profile(review={"memory_every_turns": 1, "skill_every_iterations": 0},
                                          **limited(tokens_per_day=100_000)))
    assert await e.say("hello") == "answer"
    assert await used_today(e) == UsageCount(turns=1, tokens=105 + 1004)
    assert any("[Background review" in r.last_user_text for r in fake_llm.requests)


async def test_a_sub_agents_tokens_count_against_the_person_who_asked(engine, fake_llm):
    def respond(request):
        if request.system.startswith(SUBAGENT_SYSTEM.splitlines()[0]):
            return Reply(text="42", usage={"input": 2000, "output": 2})
        if not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[("delegate_task", {"goal": "Find the answer."})],
                         usage={"input": 100, "output": 10})
        return Reply(text="It is 42.", usage={"input": 200, "output": 5})

    fake_llm.responder = respond
    e = await engine(profile=make_profile(toolsets=["core", "delegate"], **limited(tokens_per_day=100_000)))
    assert await e.say("what is the answer?") == "It is 42."
    assert await used_today(e) == UsageCount(turns=1, tokens=110 + 205 + 2002)


async def test_after_link_the_days_turns_of_both_accounts_add_up_and_the_limit_holds(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer")
    e = await engine(profile=make_profile(**limited(turns_per_day=3)))
    assert await e.say("one", user="u1", chat="c1") == "answer"
    assert await e.say("two", user="u1", chat="c1") == "answer"
    assert await e.say("three", user="u2", chat="c2") == "answer"
    code = (await e.say("/link", user="u1", chat="c1")).split("code is ")[1].split(".")[0]
    assert (await e.say(f"/link {code}", user="u2", chat="c2")).startswith("Linked")
    calls = len(fake_llm.requests)

    assert "daily limit of 3 turns" in await e.say("four", user="u2", chat="c2")
    assert "daily limit of 3 turns" in await e.say("four", user="u1", chat="c1")
    assert len(fake_llm.requests) == calls
    assert "Today: 3 of 3 turns" in await e.say("/status", user="u2", chat="c2")
