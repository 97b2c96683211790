"""A tool's result is persisted the moment the tool finishes, not when the slower calls beside it do: a
crash while a neighbour still runs never makes a finished tool (and its side effect) run again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hermes_engine.agent.loop import AgentLoop
from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.models import Completed, ModelRequest, ModelResponse
from hermes_engine.ports.tools import ToolContext
from hermes_engine.tools.registry import ToolRegistry, tool


class TwoSteps:
    """First two parallel tool calls, then a final answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Completed]:
        self.calls += 1
        if self.calls == 1:
            yield Completed(ModelResponse("", tool_calls=[ToolCall("a", "slow", "{}"), ToolCall("b", "quick", "{}")]))
        else:
            yield Completed(ModelResponse("done"))


async def test_a_finished_tool_is_persisted_while_an_earlier_call_still_runs() -> None:
    release = asyncio.Event()

    @tool(toolset="test")
    async def slow() -> str:
        """Wait for the test."""
        await release.wait()
        return "slow result"

    @tool(toolset="test")
    async def quick() -> str:
        """Answer at once."""
        return "quick result"

    persisted: list[Message] = []

    async def persist(message: Message, usage: object, model: object) -> None:
        persisted.append(message)

    loop = AgentLoop(ToolRegistry([slow, quick]))
    history: list[Message] = []
    turn = asyncio.ensure_future(loop.run(router=TwoSteps(), system="s", history=history,
                                          user=Message(role="user", content="go"),
                                          ctx=ToolContext(bot="b", session_id=1, session_key="k"), persist=persist))
    for _ in range(200):
        if any(m.role == "tool" for m in persisted):
            break
        await asyncio.sleep(0.01)
    assert [m.content for m in persisted if m.role == "tool"] == ["quick result"]  # stored before "slow" ends

    release.set()
    result = await turn
    assert result.final_text == "done"
    assert [m.tool_call_id for m in history if m.role == "tool"] == ["a", "b"]  # the history keeps call order
