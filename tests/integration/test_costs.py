"""Money in dollars through the real engine and store against the fake LLM reporting usage: `/status` says
what a person (and, for an admin, the bot) spent today and this month, `/usage` breaks it down by model and
says once which model has no known price, a per-person dollar limit refuses the next turn once crossed
(on SQLite and PostgreSQL), and the cost reaches `hermes_cost_usd_total`."""

from __future__ import annotations

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import BACKENDS, empty_database

from hermes_gateway.metrics import PrometheusMetrics

MINI = "openai:gpt-4.1-mini"  # $0.40 per million input tokens, $0.10 cached, $1.60 output
SONNET = "anthropic:claude-sonnet-4-5"  # $3 per million input tokens, $0.30 cache read, $15 output
# 100k uncached + 100k cached input and 10k output on gpt-4.1-mini: $0.04 + $0.01 + $0.016
TURN_USAGE = {"input": 100_000, "cache_read": 100_000, "output": 10_000}
TURN_COST = "$0.066"


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path):
    async with empty_database(request.param, str(tmp_path / "store.db")) as found:
        yield found


async def test_status_tells_a_person_what_they_spent_today_and_this_month_in_dollars(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI))
    assert await e.say("how much is this?") == "answer"
    await e.idle()

    status = await e.say("/status")
    assert f"Cost: {TURN_COST} today, {TURN_COST} this month." in status
    assert "Bot cost" not in status  # not an admin
    assert "Cost: $0.00 today" in await e.say("/status", user="u2", chat="c2")  # their own count


async def test_an_admin_sees_the_bots_cost_beside_their_own(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI, access={"admins": ["boss"]}))
    await e.say("one", user="u1", chat="c1")
    await e.say("two", user="u2", chat="c2")
    await e.idle()
    status = await e.say("/status", user="boss", chat="c3")
    assert "Cost: $0.00 today, $0.00 this month." in status
    assert "Bot cost: $0.132 today, $0.132 this month." in status


async def test_usage_breaks_the_cost_down_by_model_and_names_a_model_without_a_price_once(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI))
    await e.say("on the default model")
    assert (await e.say(f"/model {SONNET}")).startswith("This conversation now uses")
    await e.say("on sonnet")  # $0.30 + $0.03 + $0.15
    assert (await e.say("/model openai:gpt-unpriced")).startswith("This conversation now uses")
    await e.say("on a model the table does not know")
    await e.idle()

    report = await e.say("/usage")
    today, month, note = report.split("\n\n")[1:]
    assert today.splitlines() == [
        "Today (UTC): $0.546",
        f"- {SONNET}: $0.48 (100000 in, 100000 cached in, 0 cache write, 10000 out)",
        f"- {MINI}: {TURN_COST} (100000 in, 100000 cached in, 0 cache write, 10000 out)",
        "- openai:gpt-unpriced: no known price (100000 in, 100000 cached in, 0 cache write, 10000 out)"]
    assert month.splitlines()[0] == "This month (UTC): $0.546"
    assert note.startswith("No known price for openai:gpt-unpriced: its tokens are counted, not its cost")
    assert report.count("No known price") == 1


async def test_only_an_admin_sees_the_whole_bots_usage(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI, access={"admins": ["boss"]}))
    await e.say("one")
    await e.idle()
    assert "Only an admin" in await e.say("/usage bot")
    whole = await e.say("/usage bot", user="boss", chat="c2")
    assert whole.startswith("The whole bot's model use") and f"- {MINI}: {TURN_COST}" in whole


async def test_a_person_over_their_dollar_limit_is_refused_from_the_next_turn(engine, fake_llm, database):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI, limits={"cost_per_day": 0.1}), database=database)
    assert await e.say("one") == "answer"  # $0.066: under the limit
    await e.idle()
    assert await e.say("two") == "answer"  # $0.132 once it ends: this turn crosses the limit
    await e.idle()
    calls = len(fake_llm.requests)

    refused = await e.say("three")
    assert "You have reached your daily limit of $0.10 of model use." in refused
    assert "resets at midnight UTC" in refused
    assert len(fake_llm.requests) == calls
    assert await e.say("hi", user="u2", chat="c2") == "answer"  # another person spends their own
    assert "(daily limit $0.10)" in await e.say("/status")


async def test_the_bots_dollar_limit_holds_everyone_together(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI, limits={"total_cost_per_day": 0.12}))
    assert await e.say("one", user="u1", chat="c1") == "answer"
    assert await e.say("two", user="u2", chat="c2") == "answer"
    await e.idle()
    calls = len(fake_llm.requests)
    assert "all the money I may spend on the model today" in await e.say("three", user="u3", chat="c3")
    assert len(fake_llm.requests) == calls


async def test_a_profiles_price_is_what_a_turn_costs(engine, fake_llm):
    fake_llm.responder = lambda request: Reply(text="answer", usage={"input": 1_000_000, "output": 1_000_000})
    e = await engine(profile=make_profile(model="openai:house-model", prices={"house-model": {"input": 1, "output": 2}}))
    await e.say("priced by the profile")
    await e.idle()
    assert "Cost: $3.00 today" in await e.say("/status")


async def test_the_cost_of_each_model_reaches_the_metrics(engine, fake_llm):
    metrics = PrometheusMetrics()
    fake_llm.responder = lambda request: Reply(text="answer", usage=TURN_USAGE)
    e = await engine(profile=make_profile(model=MINI), metrics=metrics)
    await e.say("one")
    await e.say("two")
    await e.idle()
    spent = metrics.registry.get_sample_value("hermes_cost_usd_total", {"bot": "testbot", "model": MINI})
    assert spent == pytest.approx(0.132)


async def test_a_background_reviews_cost_is_the_persons_whose_turn_it_follows(engine, fake_llm):
    def respond(request):
        if "[Background review" in request.last_user_text:
            return Reply(text="Nothing to save.", usage={"input": 1_000_000, "output": 0})  # $0.40
        return Reply(text="answer", usage=TURN_USAGE)

    fake_llm.responder = respond
    e = await engine(profile=make_profile(model=MINI, review={"memory_every_turns": 1, "skill_every_iterations": 0}))
    assert await e.say("hello") == "answer"
    await e.idle()
    assert any("[Background review" in r.last_user_text for r in fake_llm.requests)
    assert "Cost: $0.466 today" in await e.say("/status")
