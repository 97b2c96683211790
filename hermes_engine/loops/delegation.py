"""Sub-agents: `delegate_task` runs a fresh agent on one goal and hands its final answer back as a tool result.

A sub-agent is isolated: it sees a short system prompt of its own and one user message holding the goal and
the context the parent chose to pass — never the parent's conversation, the person's memory snapshot or the
bot's persona. Its tools are the requested toolsets intersected with the parent's, minus anything that writes
to the agent itself (memory, skills); it may delegate further only below the depth limit. It has its own
iteration budget, uses the parent turn's provider chain, and stores nothing: only the tool result enters the
parent's history. It runs inside the parent's tool call, so stopping the parent turn cancels it. Failures
(provider errors, an exhausted budget, the depth limit) come back as error results, never as exceptions.

Concurrency is capped per gateway with one semaphore per depth level: a single shared pool would deadlock
when every slot is held by a sub-agent waiting for a child of its own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hermes_engine.agent.loop import AgentLoop
from hermes_engine.config import DelegationSettings
from hermes_engine.errors import HermesError
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import ToolRegistry, tool

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

TOOLSET = "delegate"
SERVICE: ServiceKey[DelegationFeature] = ServiceKey("delegation")
NEVER_DELEGATED = frozenset({"memory", "skills"})  # writes to the agent's own memory and skills
MAX_RESULT_CHARS = 4000

SUBAGENT_SYSTEM = """\
You are a sub-agent: another agent delegated one task to you. You cannot ask questions and no person reads
your messages; work only from the goal and context you were given, using the tools available to you.
When done, reply with a concise final report: the answer or result first, then key details the delegating
agent needs (sources, numbers, caveats). If you could not finish, say what is missing."""


@tool(toolset=TOOLSET, time_limit=1800.0)  # a whole sub-agent run; its iteration budget bounds it first
async def delegate_task(goal: str, context: str | None = None, toolsets: list[str] | None = None, *,
                        ctx: ToolContext) -> ToolResult:
    """Hand a self-contained subtask to a sub-agent with a fresh context; returns its final report.
    The sub-agent does not see this conversation: put everything it needs in goal and context. Several calls
    in one step run in parallel.

    Args:
        goal: what the sub-agent should achieve, stated completely
        context: facts, constraints and data the sub-agent needs (it knows nothing else)
        toolsets: toolsets it may use (default: all of yours except memory and skills)
    """
    service = ctx.services.get(SERVICE)
    if service is None:
        return ToolResult("Error: delegation is not available in this session.", is_error=True)
    return await service.delegate(goal, context, toolsets, ctx)


class DelegationFeature(Feature):
    name = "delegation"

    def __init__(self, settings: DelegationSettings | None = None) -> None:
        self.settings = settings or DelegationSettings()
        self.host: Host | None = None
        self._slots: dict[int, asyncio.Semaphore] = {}  # depth → in-flight sub-agents at that depth
        self.usage = Usage()  # all sub-agents of this gateway
        self.runs = 0

    def tools(self) -> list[Tool]:
        return [delegate_task]

    def services(self) -> dict[ServiceKey[Any], object]:
        return {SERVICE: self}

    async def start(self, host: Host) -> None:
        self.host = host

    def _slot(self, depth: int) -> asyncio.Semaphore:
        slot = self._slots.get(depth)
        if slot is None:
            slot = self._slots[depth] = asyncio.Semaphore(max(1, self.settings.max_concurrent))
        return slot

    def allowed_toolsets(self, requested: list[str] | None, depth: int) -> list[str]:
        """The sub-agent's toolsets: requested ∩ the parent's, never memory/skills, `delegate` only below
        the depth limit."""
        assert self.host is not None
        parent = {t.toolset for t in self.host.tools}
        chosen = parent if requested is None else parent & set(requested)
        chosen -= NEVER_DELEGATED
        if depth >= self.settings.max_depth:
            chosen.discard(TOOLSET)
        return sorted(chosen)

    def _router(self, ctx: ToolContext) -> Any:
        host = self.host
        assert host is not None
        if self.settings.model:
            return host.chain([self.settings.model]).route()
        session = host.session(ctx.session_key)
        if session is not None and session.record.id == ctx.session_id:
            return host.chain_for(session).route()
        return host.chain(host.profile.models(host.settings)).route()

    async def delegate(self, goal: str, context: str | None, toolsets: list[str] | None,
                       ctx: ToolContext) -> ToolResult:
        host = self.host
        if host is None:
            return ToolResult("Error: delegation is not available in this session.", is_error=True)
        if not goal or not goal.strip():
            return ToolResult("Error: delegate_task needs a goal.", is_error=True)
        depth = ctx.delegation_depth + 1
        if depth > self.settings.max_depth:
            return ToolResult(f"Error: delegation depth limit reached ({self.settings.max_depth}); "
                              "do this task yourself.", is_error=True)
        names = self.allowed_toolsets(toolsets, depth)
        registry = ToolRegistry(list(host.tools)).select(names)
        sub_ctx = replace(ctx, services=ctx.services.without(NEVER_DELEGATED), delegation_depth=depth)
        agent = AgentLoop(registry, max_iterations=self.settings.max_iterations,
                          max_output_tokens=host.profile.max_output_tokens)
        text = f"Goal:\n{goal.strip()}"
        if context and context.strip():
            text += f"\n\nContext:\n{context.strip()}"
        usage = Usage()

        async def persist(_m: Message, step_usage: Usage | None, _model: str | None) -> None:
            if step_usage is not None:  # nothing is stored: only the tool result enters the parent's history
                usage.add(step_usage)
                # Not the parent turn's tokens (they never reach its result): each step counts on its own
                # against the person the parent acts for, so a run cut short counts too.
                host.spawn(charge(host, ctx.person_id, step_usage), "usage-tokens")

        async with self._slot(depth):
            try:
                result = await agent.run(router=self._router(ctx), system=SUBAGENT_SYSTEM,
                                         history=SessionHistory([]), user=Message(role="user", content=text),
                                         ctx=sub_ctx, persist=persist, purpose="delegate")
            except asyncio.CancelledError:
                raise
            except HermesError as exc:
                return self._finish(usage, depth, f"Error: the sub-agent failed: {_short(exc)}", error=True)
            except Exception as exc:  # never crash the parent turn
                log.exception("sub-agent failed")
                return self._finish(usage, depth, f"Error: the sub-agent failed: {type(exc).__name__}: "
                                                  f"{_short(exc)}", error=True)
            finally:  # what the sub-agent read from outside now steers the parent's answer too
                ctx.untrusted = ctx.untrusted or sub_ctx.untrusted
        header = (f"[sub-agent: {result.model_calls} iterations, {result.tool_calls} tool calls, "
                  f"{usage.input_tokens} in / {usage.output_tokens} out tokens]")
        if result.budget_exhausted:
            return self._finish(usage, depth, f"Error: the sub-agent used its budget of "
                                              f"{self.settings.max_iterations} iterations without finishing.\n"
                                              f"{header}", error=True)
        final = result.final_text.strip()
        if len(final) > MAX_RESULT_CHARS:
            final = final[:MAX_RESULT_CHARS] + f"\n[truncated: {len(result.final_text.strip())} chars in all]"
        return self._finish(usage, depth, f"{header}\n{final}", error=False)

    def _finish(self, usage: Usage, depth: int, content: str, *, error: bool) -> ToolResult:
        self.runs += 1
        self.usage.add(usage)
        log.info("sub-agent (depth %s) %s: %s in / %s out tokens", depth, "failed" if error else "finished",
                 usage.input_tokens, usage.output_tokens)
        return ToolResult(content, is_error=error)


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
