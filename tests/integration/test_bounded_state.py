"""Nothing one chat does stalls the others, and what the gateway keeps stays bounded: sync tools run off the
event loop with a time limit, old inbox rows are pruned by a scheduled job, and idle sessions leave memory
(with every feature's per-session state) and come back from the database on their next message."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta

from fakes.fake_llm import Reply

from hermes_engine.compression.feature import CompressionFeature
from hermes_engine.config import Settings
from hermes_engine.core.housekeeping import DAY, JOB, InboxPruning
from hermes_engine.core.scheduler import Scheduler
from hermes_engine.tools.registry import tool
from storage.store import SqlStore


def _tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def _asks(request, text: str) -> bool:
    return any(m["role"] == "user" and text in str(m["content"]) for m in request.messages)


async def test_a_cpu_heavy_sync_tool_does_not_delay_another_sessions_reply(engine, fake_llm):
    started, release = threading.Event(), threading.Event()

    @tool(toolset="test")
    def crunch() -> str:
        """Crunch numbers until released."""
        started.set()
        give_up = time.monotonic() + 20  # only a safety net: the test releases it long before
        spins = 0
        while not release.is_set() and time.monotonic() < give_up:
            spins += 1
        return "released" if release.is_set() else "gave up"

    e = await engine()
    e.gateway.tools.register(crunch)

    def respond(request):
        if _asks(request, "crunch"):
            return Reply(text="crunched") if _tool_results(request) else Reply(tool_calls=[("crunch", {})])
        return Reply(text="hello Bea")

    fake_llm.responder = respond
    await e.gateway.handle(e.message("crunch please", chat="ada", user="ada"))
    assert await asyncio.to_thread(started.wait, 20)
    try:
        assert await e.say("hi", chat="bea", user="bea") == "hello Bea"  # answered while crunch still runs
    finally:
        release.set()
    await e.outlet.wait_for(2)
    crunch_result = next(_tool_results(r) for r in fake_llm.requests if _asks(r, "crunch") and _tool_results(r))
    assert crunch_result == ["released"]
    assert [d.text for d in e.outlet.delivered] == ["hello Bea", "crunched"]


async def test_a_tool_over_its_time_limit_yields_a_tool_error_and_the_turn_finishes(engine, fake_llm):
    release = threading.Event()

    @tool(toolset="test", time_limit=0.1)
    def slow_report() -> str:
        """Build a report (too slowly)."""
        release.wait(20)
        return "report"

    e = await engine()
    e.gateway.tools.register(slow_report)
    fake_llm.script(Reply(tool_calls=[("slow_report", {})]), Reply(text="The report tool timed out, sorry."))
    try:
        assert await e.say("report please") == "The report tool timed out, sorry."
    finally:
        release.set()
    [result] = _tool_results(fake_llm.requests[1])
    assert "slow_report did not finish within its time limit of 0.1 s" in result


async def _wait_for_first_run(scheduler: Scheduler) -> None:
    job = scheduler.jobs[JOB]
    assert job.interval == DAY and job.lease  # daily, on one replica
    for _ in range(500):
        if job.runs and not job.running:
            break
        await asyncio.sleep(0.02)
    assert job.runs == 1 and job.last_error is None


async def test_the_prune_job_deletes_old_inbox_rows_and_deliveries_and_keeps_recent_ones(engine, tmp_path):
    now = datetime.now(UTC)
    for event_id, age, answered in (("old", 40, True), ("recent", 1, True), ("old-pending", 40, False)):
        store = SqlStore(Settings(home=tmp_path).db_url, clock=lambda age=age: now - timedelta(days=age))
        await store.init()
        await store.record_inbound("telegram", event_id, {})
        await store.record_delivery("bot", "telegram", f"{event_id}:reply", ["1"], final=answered)
        if answered:
            await store.complete_inbound("telegram", event_id)
        await store.close()

    e = await engine()  # the gateway schedules the job; the first run is at start
    assert any(isinstance(f, InboxPruning) for f in e.gateway.features)
    await _wait_for_first_run(e.gateway.scheduler)

    assert await e.store.record_inbound("telegram", "old", {}) is True  # gone: recorded afresh
    assert await e.store.record_inbound("telegram", "recent", {}) is False  # kept: still a duplicate
    assert [p.event_id for p in await e.store.pending_inbound("telegram")] == ["old-pending", "old"]
    assert await e.store.get_delivery("bot", "telegram", "old:reply") is None
    assert await e.store.get_delivery("bot", "telegram", "recent:reply") is not None


async def test_an_evicted_session_is_reloaded_with_its_history_and_its_compression_caches_dropped(
        engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_MAX_LIVE_SESSIONS", "1")
    e = await engine()
    [compression] = [f for f in e.gateway.features if isinstance(f, CompressionFeature)]
    assert compression.service is not None
    fake_llm.script(Reply(text="Nice to meet you, Ada."), Reply(text="Hi Bea."), Reply(text="You are Ada."))

    await e.say("my name is Ada", chat="ada", user="ada")
    ada = e.gateway.sessions.get(e.gateway.session_key(e.message("", chat="ada", user="ada")))
    assert ada is not None and ada.record.id in compression.service._meters
    await e.idle()  # Ada's session is idle (its lane done), so it may leave
    await e.say("hello", chat="bea", user="bea")

    assert len(e.gateway.sessions) == 1 and ada.key not in e.gateway.sessions
    assert ada.record.id not in compression.service._meters and ada.record.id not in compression.service._fixed

    assert await e.say("what is my name?", chat="ada", user="ada") == "You are Ada."
    reloaded = e.gateway.sessions.get(ada.key)
    assert reloaded is not None and reloaded is not ada and reloaded.record.id == ada.record.id
    sent = [(m["role"], m["content"]) for m in fake_llm.requests[-1].messages if m["role"] != "system"]
    assert sent[:2] == [("user", "my name is Ada"), ("assistant", "Nice to meet you, Ada.")]
    assert reloaded.system_prompt == ada.system_prompt


async def test_a_session_with_a_turn_running_is_not_evicted_until_it_is_idle(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_MAX_LIVE_SESSIONS", "1")
    started, release = threading.Event(), threading.Event()

    @tool(toolset="test")
    def wait_for_release() -> str:
        """Hold the turn until released."""
        started.set()
        return "released" if release.wait(20) else "gave up"

    e = await engine()
    e.gateway.tools.register(wait_for_release)
    fake_llm.responder = lambda request: (
        Reply(tool_calls=[("wait_for_release", {})]) if _asks(request, "hold") and not _tool_results(request)
        else Reply(text="done"))
    await e.gateway.handle(e.message("hold on", chat="ada", user="ada"))
    assert await asyncio.to_thread(started.wait, 20)
    ada_key = e.gateway.session_key(e.message("", chat="ada", user="ada"))

    await e.say("hello", chat="bea", user="bea")
    assert ada_key in e.gateway.sessions  # busy: kept although over the limit
    release.set()
    await e.outlet.wait_for(2)
    await e.idle()
    await e.say("hello", chat="cy", user="cy")
    assert list(e.gateway.sessions) == [e.gateway.session_key(e.message("", chat="cy", user="cy"))]
