"""Nudge engine: after some turns, a background review decides what is worth saving.

The review is a forked agent on a snapshot of the conversation. It sends the session's own system prompt,
history and tool schemas, so the provider's prefix cache serves it; only the memory and skill tools
actually run inside it. It never speaks to the person and never holds the session's queue, so a live turn
is never delayed by it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_engine.agent.loop import AgentLoop, repair_history
from hermes_engine.config import ReviewSettings
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.session import SessionScope
from hermes_engine.tools.registry import ToolContext, ToolRegistry, ToolResult

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

REVIEW_TOOLSETS = ("memory", "skills")
SNAPSHOT_MESSAGES = 60

MEMORY_PROMPT = """\
[Background review — the person does not see this.] Look back over the conversation above and decide
whether anything is worth remembering about this person for future sessions: stable facts about their
environment, projects and conventions (target "memory"), or their preferences and communication style
(target "user"). Save declarative facts with the memory tool ("User prefers concise answers"), never
instructions, and skip what is already saved or only matters today."""

SKILL_PROMPT = """\
[Background review — the person does not see this.] Look back over the work above. If it took five or
more tool calls, overcame an error, followed a correction from the person, or used a non-obvious
workflow, save the procedure as a skill with skill_manage (create, with When to use / Steps / Pitfalls).
A multi-step terminal or file procedure that worked is worth a skill: the commands in order, the files
it wrote or changed, and what failed first and how it was fixed (as Pitfalls); name the tools it used in
the front matter (tools: [terminal, write_file, ...]).
If a skill was used and something went wrong that it did not cover, patch its Pitfalls instead."""

CLOSING = "If nothing is worth saving, just say 'Nothing to save.' and stop."


class _ReviewTools(ToolRegistry):
    """The session's tools as the model sees them (so the cached prefix is reused), but only memory and
    skill tools run; anything else answers that it is unavailable here."""

    def __init__(self, tools: ToolRegistry) -> None:
        super().__init__(list(tools))

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        t = self.get(call.name)
        if t is None or t.toolset not in REVIEW_TOOLSETS:
            return ToolResult(f"{call.name} is not available during a review; only memory and skill tools are.",
                              is_error=True)
        return await super().call(call, ctx)


@dataclass
class _Counters:
    turns: int = 0
    tool_iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    reviews: int = 0
    last_outcome: str = ""


class ReviewFeature(Feature):
    name = "review"

    def __init__(self, settings: ReviewSettings) -> None:
        self.settings = settings
        self.host: Host | None = None
        self.counters: dict[int, _Counters] = {}
        self.running: dict[int, asyncio.Task[Any]] = {}

    async def start(self, host: Host) -> None:
        self.host = host

    async def stop(self) -> None:
        for task in list(self.running.values()):
            task.cancel()
        await asyncio.gather(*self.running.values(), return_exceptions=True)

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if outcome.failed or outcome.interrupted or outcome.purpose not in ("turn", "goal"):
            return
        counters = self.counters.setdefault(outcome.scope.session_id, _Counters())
        counters.turns += 1
        counters.tool_iterations += outcome.tool_iterations
        if any(c.name == "skill_manage" for m in outcome.new_messages for c in m.tool_calls):
            counters.tool_iterations = 0  # the live agent just wrote a skill
        prompts = []
        every_turns, every_iterations = self.settings.memory_every_turns, self.settings.skill_every_iterations
        if every_turns and counters.turns >= every_turns:
            counters.turns = 0
            prompts.append(MEMORY_PROMPT)
        if every_iterations and counters.tool_iterations >= every_iterations:
            counters.tool_iterations = 0
            prompts.append(SKILL_PROMPT)
        session_id = outcome.scope.session_id
        if prompts and self.host is not None and session_id not in self.running:
            prompt = "\n\n".join(prompts) + "\n\n" + CLOSING
            task = self.host.spawn(self.review(outcome.scope, outcome.person_id, prompt), f"review:{session_id}")
            self.running[session_id] = task
            task.add_done_callback(functools.partial(self._finished, session_id))

    def on_session_evicted(self, scope: SessionScope) -> None:
        self.counters.pop(scope.session_id, None)  # a running review keeps its own reference

    def _finished(self, session_id: int, _task: asyncio.Task[Any]) -> None:
        self.running.pop(session_id, None)

    async def review(self, scope: SessionScope, person_id: int | None, prompt: str) -> str:
        """Run one review on a snapshot of the session; returns the reviewer's last words."""
        host = self.host
        assert host is not None
        session = host.session_by_id(scope.session_id)
        if session is None or session.history is None or session.system_prompt is None:
            return ""
        snapshot = _snapshot(session.history)
        chain = host.chain([self.settings.model]) if self.settings.model else host.chain_for(session)
        agent = AgentLoop(_ReviewTools(host.tools), max_iterations=self.settings.max_iterations,
                          max_output_tokens=1024)
        counters = self.counters.setdefault(scope.session_id, _Counters())

        async def persist(_m: Message, usage: Usage | None, _model: str | None) -> None:
            if usage is not None:
                counters.usage.add(usage)

        result = await agent.run(router=chain.route(), system=session.system_prompt, history=snapshot,
                                 user=Message(role="user", content=prompt),
                                 ctx=host.tool_context(session, person_id, in_review=True),
                                 persist=persist, purpose="review")
        counters.reviews += 1
        counters.last_outcome = result.final_text.strip()[:200]
        log.info("review of session %s: %s (%s tool calls)", scope.session_id, counters.last_outcome,
                 result.tool_calls)
        return result.final_text

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        counters = self.counters.get(scope.session_id)
        if counters is None or not counters.reviews:
            return ["Background reviews: none yet"]
        u = counters.usage
        return [f"Background reviews: {counters.reviews}, {u.input_tokens} in / {u.output_tokens} out tokens "
                f"({u.cache_read_tokens} cache read)"]


def _snapshot(history: list[Message]) -> list[Message]:
    """The recent part of the conversation, starting at a user message so it is valid on its own."""
    messages = repair_history(list(history))
    start = max(0, len(messages) - SNAPSHOT_MESSAGES)
    while start < len(messages) and messages[start].role != "user":
        start += 1
    return messages[start:] if start < len(messages) else messages
