"""One background review: a forked agent on a snapshot of a session, which may write memory and skills.

It sends the session's own system prompt, history and tool schemas, so the provider's prefix cache serves
it; only the memory and skill tools actually run inside it. The session is the one loaded on this replica
when the review follows a turn here, or a private copy read from the store (the frozen system prompt on the
session record, the history through its compaction lineage) when the review was found due by another
replica's sweep; the copy never joins the replica's live sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hermes_engine.agent.loop import AgentLoop, TurnResult, repair_history
from hermes_engine.config import ReviewSettings
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.session import SessionHandle, SessionScope
from hermes_engine.ports.storage import DueReview
from hermes_engine.ports.tools import ToolContext, ToolResult, Tools
from hermes_engine.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

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


def review_prompt(*, memory: bool, skill: bool) -> str:
    prompts = [MEMORY_PROMPT] * memory + [SKILL_PROMPT] * skill
    return "\n\n".join(prompts) + "\n\n" + CLOSING


def scope_record(scope: SessionScope, target: ReplyTarget | None) -> dict[str, object]:
    """What a due review keeps of the session's scope, so another replica can rebuild it."""
    return {"chat_kind": scope.chat_kind, "shared_scope": scope.shared_scope,
            "target": target.to_dict() if target is not None else {}}


async def stored_session(host: Host, due: DueReview) -> SessionHandle | None:
    """A private copy of the reviewed session read from the store; None when there is nothing to review
    (the session is gone, or never froze a prompt because no turn ran in it)."""
    record = await host.store.get_session(due.session_id)
    if record is None or record.state.get("system_prompt") is None:
        return None
    scope = SessionScope(bot=host.bot, session_id=record.id, session_key=due.session_key,
                         chat_kind=str(due.scope.get("chat_kind") or "dm"), person_id=due.person_id,
                         shared_scope=due.scope.get("shared_scope"))
    session = SessionHandle(key=due.session_key, record=record, scope=scope,
                            target=ReplyTarget.from_dict(due.scope.get("target") or {}))
    await host.ensure_loaded(session, due.person_id)
    return session


class _ReviewTools(ToolRegistry):
    """The session's tools as the model sees them (so the cached prefix is reused), but only memory and
    skill tools run; anything else answers that it is unavailable here."""

    def __init__(self, tools: Tools) -> None:
        super().__init__(list(tools))

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        t = self.get(call.name)
        if t is None or t.toolset not in REVIEW_TOOLSETS:
            return ToolResult(f"{call.name} is not available during a review; only memory and skill tools are.",
                              is_error=True)
        return await super().call(call, ctx)


async def run_review(host: Host, settings: ReviewSettings, session: SessionHandle, person_id: int | None,
                     prompt: str, on_usage: Callable[[Usage], None]) -> TurnResult | None:
    """Run one review on a snapshot of `session`; None when the session has nothing loaded to review."""
    if not session.history.loaded or session.system_prompt is None:
        return None
    chain = host.chain([settings.model]) if settings.model else host.chain_for(session)
    agent = AgentLoop(_ReviewTools(host.tools), max_iterations=settings.max_iterations,
                      max_output_tokens=host.profile.max_output_tokens)

    async def persist(_m: Message, usage: Usage | None, _model: str | None) -> None:
        if usage is not None:
            on_usage(usage)

    history = SessionHistory(snapshot(session.history.view()))  # the review's own: the session's is not touched
    return await agent.run(router=chain.route(), system=session.system_prompt, history=history,
                           user=Message(role="user", content=prompt),
                           ctx=host.tool_context(session, person_id, in_review=True),
                           persist=persist, purpose="review")


def snapshot(history: Sequence[Message]) -> list[Message]:
    """The recent part of the conversation, starting at a user message so it is valid on its own."""
    messages = repair_history(list(history))
    start = max(0, len(messages) - SNAPSHOT_MESSAGES)
    while start < len(messages) and messages[start].role != "user":
        start += 1
    return messages[start:] if start < len(messages) else messages
