"""Tool calls cannot hold up the event loop: sync tools run in worker threads, every call has a time limit
and a result size cap, and `calculate` refuses numbers too large before computing them."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc

from hermes_engine.ports.conversation import ToolCall
from hermes_engine.ports.tools import ToolContext
from hermes_engine.tools.core import calculate
from hermes_engine.tools.registry import MAX_RESULT_CHARS, ToolRegistry, tool


def _ctx() -> ToolContext:
    return ToolContext(bot="b", session_id=1, session_key="k")


async def _call(registry: ToolRegistry, name: str, arguments: str = "{}"):
    return await registry.call(ToolCall(id="c1", name=name, arguments=arguments), _ctx())


async def test_a_sync_tool_runs_in_a_worker_thread_not_on_the_event_loop():
    @tool(toolset="test")
    def where() -> str:
        """Report the thread."""
        return str(threading.get_ident())

    result = await _call(ToolRegistry([where]), "where")
    assert not result.is_error and result.content != str(threading.get_ident())


async def test_a_sync_tool_over_its_time_limit_becomes_an_error_result():
    release = threading.Event()

    @tool(toolset="test", time_limit=0.05)
    def stuck() -> str:
        """Wait for a release that comes too late."""
        release.wait(10)
        return "finished"

    try:
        result = await _call(ToolRegistry([stuck]), "stuck")
    finally:
        release.set()
    assert result.is_error
    assert "stuck did not finish within its time limit of 0.05 s" in result.content


async def test_an_async_tool_over_its_time_limit_is_cancelled_but_its_own_timeout_is_its_own_failure():
    cancelled = asyncio.Event()

    @tool(toolset="test", time_limit=0.05)
    async def forever() -> str:
        """Never finish on its own."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    @tool(toolset="test", time_limit=0.05)
    async def remote() -> str:
        """A remote call that times out by itself."""
        raise TimeoutError("upstream took too long")

    registry = ToolRegistry([forever, remote])
    over = await _call(registry, "forever")
    assert over.is_error and "forever did not finish within its time limit" in over.content
    assert cancelled.is_set()
    own = await _call(registry, "remote")
    assert own.is_error and "upstream took too long" in own.content and "time limit" not in own.content


async def test_a_huge_tool_result_is_cut_with_a_note():
    @tool(toolset="test")
    def flood() -> dict:
        """Return far too much."""
        return {"rows": ["x" * 1000] * 500}

    result = await _call(ToolRegistry([flood]), "flood")
    assert len(result.content) < MAX_RESULT_CHARS + 100
    assert result.content.endswith("characters]") and "cut" in result.content


def test_calculate_refuses_a_power_too_large_before_computing_it():
    tracemalloc.start()
    try:
        answer = calculate.func("(9**999)**999")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.startswith("Error:") and "too large" in answer and "4,000 digits" in answer
    assert peak < 64 * 1024  # the result would take 400 KB: it was never built


def test_calculate_refuses_a_product_too_large_but_computes_one_within_the_bound():
    assert "too large" in calculate.func("(10**3000)*(10**3000)")
    assert "too large" in calculate.func("(9**999)**(9**999)")
    assert calculate.func("(10**2000)*(10**1999)") == "1" + "0" * 3999
    assert calculate.func("(17.5 * 3) / 4") == "13.125"
    assert calculate.func("2**-2") == "0.25"
