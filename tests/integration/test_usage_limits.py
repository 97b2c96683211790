"""Daily usage limits through the real engine and store against the fake LLM: a person (or the whole bot)
over a limit hears when it resets and costs no model call; admins are never refused; the counts are in
the database, so a restart keeps them."""

from __future__ import annotations

from engine_harness import make_profile
from fakes.fake_llm import Reply

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
