"""Nothing one chat does stalls the others: sync tools run off the event loop, with a time limit."""

from __future__ import annotations

import asyncio
import threading
import time

from fakes.fake_llm import Reply

from hermes_engine.tools.registry import tool


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
