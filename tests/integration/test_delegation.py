"""Sub-agents (`delegate_task`) through the real gateway, real SDKs and the fake LLM.

Requests are routed by their system prompt: a sub-agent's starts with the sub-agent prompt, the parent's with
the bot's own."""

from __future__ import annotations

import asyncio
import json

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.loops.delegation import SERVICE as DELEGATION
from hermes_engine.loops.delegation import SUBAGENT_SYSTEM, DelegationFeature
from hermes_engine.ports.tools import ToolContext
from hermes_engine.tools.registry import tool

TOOLSETS = ["core", "memory", "skills", "search", "test", "delegate"]


def delegating_profile(**delegation):
    return make_profile(toolsets=TOOLSETS, delegation=delegation)


def is_sub(request) -> bool:
    return request.system.startswith(SUBAGENT_SYSTEM.splitlines()[0])


def tool_names(request) -> set[str]:
    return {t.get("function", t).get("name") for t in request.tools}


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def delegate(goal: str, context: str | None = None, **extra):
    args = {"goal": goal, **({"context": context} if context else {}), **extra}
    return ("delegate_task", args)


async def test_sub_agent_sees_only_goal_and_context_uses_core_tools_and_its_answer_is_the_tool_result(
        engine, fake_llm):
    e = await engine(profile=delegating_profile())
    # Session 1 stores a memory entry, so session 2's frozen prompt carries it.
    fake_llm.script(Reply(tool_calls=[("memory", {"action": "add", "target": "user",
                                                  "content": "User's cat is named Biscuit."})]), Reply(text="ok"))
    await e.say("remember my cat")
    await e.say("/new")
    fake_llm.script(Reply(text="hello earlier"))
    await e.say("an earlier private remark")

    def respond(request):
        if is_sub(request):
            if not tool_results(request):
                return Reply(tool_calls=[("calculate", {"expression": "17*23"})])
            return Reply(text=f"The total is {tool_results(request)[0]}.")
        if not tool_results(request):
            return Reply(tool_calls=[delegate("Compute 17 times 23.", "It is for an invoice.")])
        return Reply(text="Done: " + tool_results(request)[-1].splitlines()[-1])

    fake_llm.requests.clear()
    fake_llm.responder = respond
    assert await e.say("work out the invoice total") == "Done: The total is 391."

    parent = [r for r in fake_llm.requests if not is_sub(r)]
    subs = [r for r in fake_llm.requests if is_sub(r)]
    assert len(subs) == 2 and "Biscuit" in parent[0].system  # the parent does have the memory snapshot
    first = subs[0]
    users = [m for m in first.messages if m["role"] == "user"]
    assert len(users) == 1 and [m["role"] for m in first.messages if m["role"] != "system"] == ["user"]
    assert "Compute 17 times 23." in users[0]["content"] and "It is for an invoice." in users[0]["content"]
    for sub in subs:
        everything = json.dumps(sub.body)
        for leaked in ("Biscuit", "an earlier private remark", "hello earlier", "work out the invoice total"):
            assert leaked not in everything
    assert "calculate" in tool_names(first) and "memory" not in tool_names(first)
    assert "skill_manage" not in tool_names(first)
    assert tool_results(subs[1]) == ["391"]
    result = tool_results(parent[1])[-1]
    assert result.startswith("[sub-agent: 2 iterations, 1 tool calls,") and "tokens]" in result
    # Only the tool result enters the parent's history; the sub-agent's own steps are not stored.
    session = next(s for s in e.gateway.sessions.values())
    stored = await e.store.load_messages(session.record.id)
    assert [m.role for m in stored][-4:] == ["user", "assistant", "tool", "assistant"]
    assert not any(m.content == "The total is 391." for m in stored)


async def test_parallel_delegations_run_concurrently_but_never_above_max_concurrent(engine, fake_llm):
    e = await engine(profile=delegating_profile(max_concurrent=2))
    in_flight = peak = 0

    async def respond(request):
        nonlocal in_flight, peak
        if is_sub(request):
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.05)
            in_flight -= 1
            return Reply(text="answer to " + request.last_user_text.splitlines()[1])
        if not tool_results(request):
            return Reply(tool_calls=[delegate(f"task {i}") for i in range(5)])
        return Reply(text=" | ".join(r.splitlines()[-1] for r in tool_results(request)))

    fake_llm.responder = respond
    answer = await e.say("do five things")
    assert answer == " | ".join(f"answer to task {i}" for i in range(5))  # results keep call order
    assert peak == 2


async def test_depth_limit_is_enforced(engine, fake_llm):
    e = await engine(profile=delegating_profile(max_depth=2))

    def respond(request):
        if is_sub(request):
            fresh = request.messages[-1]["role"] == "user"  # its first step
            first_user = next(m["content"] for m in request.messages if m["role"] == "user")
            if "level one" in first_user and fresh:
                return Reply(tool_calls=[delegate("level two")])
            if "level two" in first_user and fresh:
                return Reply(tool_calls=[delegate("level three")])  # not offered at the limit
            return Reply(text=f"finished after: {tool_results(request)[-1].splitlines()[-1]}")
        if not tool_results(request):
            return Reply(tool_calls=[delegate("level one")])
        return Reply(text="parent done")

    fake_llm.responder = respond
    assert await e.say("go deep") == "parent done"
    subs = [r for r in fake_llm.requests if is_sub(r)]
    level_one, level_two = subs[0], subs[1]
    assert "delegate_task" in tool_names(level_one) and "delegate_task" not in tool_names(level_two)
    assert "Unknown tool 'delegate_task'" in tool_results(subs[2])[-1]  # level two tried anyway
    # Called directly past the limit (e.g. a profile that lists the tool for a deep agent): an error result.
    feature = e.gateway.services.get(DELEGATION)
    assert feature is not None
    ctx = ToolContext(bot="testbot", session_id=1, session_key="k", services=e.gateway.services, delegation_depth=2)
    result = await feature.delegate("too deep", None, None, ctx)
    assert result.is_error and "depth limit" in result.content


async def test_sub_agent_out_of_budget_gives_an_error_result_and_the_parent_turn_completes(engine, fake_llm):
    e = await engine(profile=delegating_profile(max_iterations=3))

    def respond(request):
        if is_sub(request):
            return Reply(tool_calls=[("calculate", {"expression": "1+1"})])  # never finishes
        if not tool_results(request):
            return Reply(tool_calls=[delegate("loop forever")])
        return Reply(text="parent recovered: " + tool_results(request)[-1].splitlines()[0])

    fake_llm.responder = respond
    answer = await e.say("try it")
    assert answer.startswith("parent recovered: Error: the sub-agent used its budget of 3 iterations")
    assert len([r for r in fake_llm.requests if is_sub(r)]) == 3


async def test_provider_failure_in_a_sub_agent_is_an_error_result(engine, fake_llm):
    e = await engine(profile=delegating_profile())

    def respond(request):
        if is_sub(request):
            return Reply(error=400, error_message="bad request from sub")
        if not tool_results(request):
            return Reply(tool_calls=[delegate("fail")])
        return Reply(text="parent saw: " + tool_results(request)[-1])

    fake_llm.responder = respond
    answer = await e.say("try")
    assert answer.startswith("parent saw: Error: the sub-agent failed")


async def test_memory_tool_is_unavailable_inside_a_sub_agent(engine, fake_llm):
    e = await engine(profile=delegating_profile())

    def respond(request):
        if is_sub(request):
            if not tool_results(request):
                return Reply(tool_calls=[("memory", {"action": "add", "target": "user",
                                                     "content": "Sub-agent wrote this."})])
            return Reply(text="sub: " + tool_results(request)[-1])
        if not tool_results(request):
            return Reply(tool_calls=[delegate("save a note", toolsets=["core", "memory", "skills"])])
        return Reply(text="parent: " + tool_results(request)[-1].splitlines()[-1])

    fake_llm.responder = respond
    answer = await e.say("delegate a memory write")
    assert "Unknown tool 'memory'" in answer
    sub = next(r for r in fake_llm.requests if is_sub(r))
    # requested ∩ parent's, minus memory/skills (read_document: the documents the person sent, in `core`)
    assert tool_names(sub) == {"calculate", "current_time", "read_document"}
    fake_llm.responder = lambda request: Reply(text="fresh")
    await e.say("/new")
    await e.say("hi")
    assert "Sub-agent wrote this." not in fake_llm.requests[-1].system


async def test_stopping_the_parent_turn_cancels_the_sub_agent(engine, fake_llm):
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool(toolset="test")
    async def wait_forever() -> str:
        """Block until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    e = await engine(profile=delegating_profile())
    e.gateway.tools.register(wait_forever)

    def respond(request):
        if is_sub(request):
            return Reply(tool_calls=[("wait_forever", {})])
        return Reply(tool_calls=[delegate("wait", toolsets=["test"])])

    fake_llm.responder = respond
    await e.gateway.handle(e.message("start waiting"))
    await asyncio.wait_for(started.wait(), 5)
    await e.gateway.handle(e.message("/stop"))
    await asyncio.wait_for(cancelled.wait(), 5)
    await e.idle()
    assert any(d.kind == "abort" for d in e.outlet.delivered)


async def test_delegation_defaults_match_the_design():
    feature = DelegationFeature()
    s = feature.settings
    assert (s.max_concurrent, s.max_depth, s.max_iterations, s.model) == (3, 2, 50, None)
