"""`/metrics`: the real engine against the fake LLM (and the real Telegram adapter against the fake Bot
API) reporting into prometheus-client, read back through the real HTTP server as Prometheus would."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeUser
from prometheus_client.parser import text_string_to_metric_families

from adapters.telegram import PLATFORM
from hermes_engine.core.housekeeping import JOB
from hermes_gateway.metrics import PrometheusMetrics
from hermes_gateway.serve import health_app

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# The label names a series may carry: closed sets an operator aggregates over, nothing about a person.
ALLOWED_LABELS = {"bot", "platform", "outcome", "kind", "tool", "limit", "job", "le"}


async def scrape(metrics: PrometheusMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """GET /metrics from a real server; every sample as {(name, labels): value}."""
    async with TestClient(TestServer(health_app(metrics=metrics))) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_turns_latency_tokens_and_tool_calls_are_counted_and_served(engine, fake_llm):
    metrics = PrometheusMetrics()
    fake_llm.script(
        Reply(tool_calls=[("calculate", {"expression": "2*21"}), ("ask_alice_at_5551", {})],
              usage={"input": 100, "output": 10}),
        Reply(text="It is 42.", usage={"input": 120, "output": 5, "cache_read": 80}),
        Reply(text="Hello again.", usage={"input": 30, "output": 3}))
    e = await engine(metrics=metrics)
    assert await e.say("what is 2*21?") == "It is 42."
    assert await e.say("hi") == "Hello again."
    await e.idle()

    samples = await scrape(metrics)
    turn = {"bot": "testbot", "platform": "test"}
    assert value(samples, "hermes_turns_total", outcome="answered", **turn) == 2
    assert value(samples, "hermes_turn_seconds_count", **turn) == 2
    assert value(samples, "hermes_gateway_added_seconds_count", **turn) == 2  # one per turn, not per call
    assert value(samples, "hermes_tokens_total", kind="input", **turn) == 250
    assert value(samples, "hermes_tokens_total", kind="output", **turn) == 18
    assert value(samples, "hermes_tokens_total", kind="cached", **turn) == 80
    assert value(samples, "hermes_tool_calls_total", bot="testbot", tool="calculate") == 1
    # a name the model made up is not a tool of the bot: counted, but never as a label of its own
    assert value(samples, "hermes_tool_calls_total", bot="testbot", tool="unknown") == 1
    assert not [key for key in samples if "ask_alice_at_5551" in str(key)]
    assert value(samples, "hermes_turns_pending", bot="testbot") == 0
    assert value(samples, "hermes_errors_total", bot="testbot", kind="provider") == 0


async def test_a_turn_the_model_cannot_answer_counts_as_a_provider_error(engine, fake_llm):
    metrics = PrometheusMetrics()
    fake_llm.responder = lambda request: Reply(error=400, error_message="bad request")
    e = await engine(metrics=metrics)
    assert "not reachable" in await e.say("hello")
    await e.idle()

    samples = await scrape(metrics)
    assert value(samples, "hermes_errors_total", bot="testbot", kind="provider") == 1
    assert value(samples, "hermes_turns_total", bot="testbot", platform="test", outcome="failed") == 1


async def test_a_fault_of_the_program_counts_as_an_internal_error(engine, fake_llm):
    from hermes_engine.ports.feature import Feature

    class Broken(Feature):
        name = "broken"

        async def on_turn_start(self, scope) -> None:
            raise RuntimeError("a bug in a feature")

    metrics = PrometheusMetrics()
    e = await engine(metrics=metrics, features=[Broken()])
    assert "Something went wrong on my side" in await e.say("hello")
    await e.idle()
    samples = await scrape(metrics)
    assert value(samples, "hermes_errors_total", bot="testbot", kind="internal") == 1
    assert value(samples, "hermes_errors_total", bot="testbot", kind="provider") == 0


async def test_turns_waiting_behind_a_running_one_are_the_queue_depth(engine, fake_llm):
    metrics = PrometheusMetrics()
    started, release = asyncio.Event(), asyncio.Event()

    async def respond(request: Any) -> Reply:
        started.set()
        await release.wait()
        return Reply(text="done")

    fake_llm.responder = respond
    e = await engine(metrics=metrics)
    assert e.gateway is not None
    for text in ("one", "two", "three"):
        await e.gateway.handle(e.message(text))
    await asyncio.wait_for(started.wait(), 10)

    assert value(await scrape(metrics), "hermes_turns_pending", bot="testbot") == 2
    release.set()
    await e.outlet.wait_for(3)
    await e.idle()
    assert value(await scrape(metrics), "hermes_turns_pending", bot="testbot") == 0


async def telegram_gateway(engine, metrics: PrometheusMetrics) -> tuple[Any, Any]:
    """A gateway with the real Telegram adapter started against the fake Bot API; user 42 is allowed."""
    options = {"edit_interval_seconds": 0.05, "poll_timeout": 1, "send_backoff": 0.1}
    e = await engine(profile=make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": options}),
                     metrics=metrics)
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
    adapter.report_to(metrics)
    e.gateway.attach(adapter)
    await adapter.start()
    return e, adapter


async def test_a_429_from_telegram_is_counted_for_the_platform(engine, telegram, fake_llm):
    metrics = PrometheusMetrics()
    fake_llm.responder = lambda request: Reply(text="Answer.")
    e, adapter = await telegram_gateway(engine, metrics)
    try:
        telegram.rate_limit(42, retry_after=1, times=1)
        telegram.user_says(42, FakeUser(42, "Alice", "alice"), "hello")
        await telegram.wait_for_text(42, "Answer.")
        await e.idle()
    finally:
        await adapter.stop()

    samples = await scrape(metrics)
    assert value(samples, "hermes_platform_rate_limited_total", platform="telegram") == 1
    assert value(samples, "hermes_turns_total", bot="testbot", platform="telegram", outcome="answered") == 1


async def test_gateway_added_latency_counts_from_receipt_not_from_the_platforms_timestamp(
        engine, telegram, fake_llm):
    """Telegram dates a message when the person sent it, in whole seconds of its own clock: a minute spent
    at Telegram (or a clock a minute off) is nothing the gateway added."""
    metrics = PrometheusMetrics()
    fake_llm.responder = lambda request: Reply(text="Answer.")
    e, adapter = await telegram_gateway(engine, metrics)
    try:
        update = telegram.user_says(42, FakeUser(42, "Alice", "alice"), "hello")
        update["message"]["date"] -= 60  # before the adapter fetches it
        await telegram.wait_for_text(42, "Answer.")
        await e.idle()
    finally:
        await adapter.stop()

    samples = await scrape(metrics)
    turn = {"bot": "testbot", "platform": "telegram"}
    assert value(samples, "hermes_gateway_added_seconds_count", **turn) == 1
    assert value(samples, "hermes_gateway_added_seconds_sum", **turn) < 5


async def test_no_series_carries_a_person_a_chat_a_name_or_message_text(engine, fake_llm):
    metrics = PrometheusMetrics()
    fake_llm.responder = lambda request: (Reply(text="noted") if request.last_user_text != "calc please"
                                          else Reply(text="ok"))
    e = await engine(metrics=metrics)
    said = [("secret plan 7781", "user-5551", "chat-9091", "Zoë Quill"),
            ("calc please", "user-5552", "chat-9092", "Xavier Bloom")]
    for text, user, chat, name in said:
        await e.say(text, user=user, chat=chat, name=name)
    await e.idle()
    assert e.store is not None
    people = [str((await e.store.resolve_account("test", "acct", user, name)).person_id)
              for _, user, _, name in said]

    samples = await scrape(metrics)
    assert value(samples, "hermes_turns_total", bot="testbot", platform="test", outcome="answered") == 2
    label_names = {name for _, labels in samples for name, _ in labels}
    assert label_names <= ALLOWED_LABELS
    label_values = {v for _, labels in samples for name, v in labels if name != "le"}
    forbidden = {item for row in said for item in row} | set(people) | {"acct"}
    assert not {v for v in label_values for f in forbidden if f in v or v == f}
    jobs = {JOB, "skills-curator:testbot", "kanban-dispatcher:testbot",  # leased jobs, named by the engine
            "attachments-prune:testbot"}
    assert label_values <= {"testbot", "test", "answered", "input", "output", *jobs}

