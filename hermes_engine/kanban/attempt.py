"""One attempt at a card: build the worker's isolated context, run it, and end the attempt on the board.

The prompt holds the card, the results of the cards it waited for, and the handoffs of earlier attempts.
A worker that ends without `kanban_complete` but with an answer completes the card with that answer; one
that fails (a provider error, an exhausted budget, no answer) fails the attempt with its error as handoff,
and the board's circuit breaker blocks the card after the configured number of failures in a row. A goal
card is judged after each run like /goal and runs again until the judge says done (or blocked).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_engine.agent.loop import AgentLoop
from hermes_engine.config import KanbanSettings
from hermes_engine.errors import HermesError
from hermes_engine.kanban.worker import (
    MAX_HANDOFF_CHARS,
    WORKER_SERVICE,
    WORKER_SYSTEM,
    WORKER_TOOLS,
    WorkerScope,
    keep_alive,
)
from hermes_engine.loops.goals import JUDGE_SYSTEM, parse_verdict
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.storage import CardRecord, Store
from hermes_engine.providers.base import Completed, ModelRequest
from hermes_engine.tools.registry import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

NEVER_IN_WORKERS = frozenset({"memory", "skills", "kanban"})  # the agent's own memory, skills and board tool


@dataclass(frozen=True)
class Work:
    text: str
    error: str | None = None
    blocked: bool = False  # a goal card the judge found blocked


@dataclass(frozen=True)
class AttemptEnd:
    card: CardRecord | None  # the card after the attempt; None when the claim was lost meanwhile
    ok: bool


async def card_prompt(store: Store, card: CardRecord) -> str:
    parts = [f"Card #{card.id}: {card.title}"]
    if card.body.strip():
        parts.append(card.body.strip())
    for dep_id in card.depends_on:
        dep = await store.get_card(dep_id)
        if dep is not None:
            parts.append(f"Result of card #{dep.id} ({dep.title}):\n{(dep.result or '').strip()}")
    earlier = [e for e in await store.card_events(card.id) if e.kind in ("failed", "reclaimed")]
    if earlier:
        lines = [f"- attempt {e.handoff.get('attempt', '?')}: {e.handoff.get('error') or e.reason}"
                 for e in earlier[-5:]]
        parts.append("Earlier attempts failed; avoid their mistakes:\n" + "\n".join(lines))
    parts.append(f"When done, call kanban_complete with card_id={card.id} and the result.")
    return "\n\n".join(parts)


def worker_context(bot: str, card: CardRecord, services: dict[str, Any]) -> ToolContext:
    """The worker acts for the person who made the card, with the access they had then, in the
    conversation the card came from (its workspace; approvals are asked there). A card without a person
    (made on the command line) gets no person's access."""
    who = card.origin.get("for") or {}
    reply = card.origin.get("reply")
    if not who.get("user_id") or not who.get("session_key"):
        return ToolContext(bot=bot, session_id=0, session_key=f"kanban:{card.id}", services=services,
                           unattended=True)
    person = who.get("person_id")
    return ToolContext(bot=bot, session_id=0, session_key=str(who["session_key"]), services=services,
                       person_id=int(person) if person is not None else None,
                       chat_kind=str(who.get("chat_kind") or "dm"), is_admin=bool(who.get("admin")),
                       user_id=str(who["user_id"]), target=ReplyTarget.from_dict(reply) if reply else None,
                       unattended=True)


class AttemptRunner:
    """Runs attempts for one gateway (its profile's tools and models)."""

    def __init__(self, host: Host, settings: KanbanSettings) -> None:
        self.host = host
        self.settings = settings

    def _registry(self) -> ToolRegistry:
        tools = [t for t in self.host.tools if t.toolset not in NEVER_IN_WORKERS]
        return ToolRegistry([*tools, *WORKER_TOOLS])

    def _router(self) -> Any:
        models = [self.settings.model] if self.settings.model else self.host.profile.models(self.host.settings)
        return self.host.chain(models).route()

    async def run(self, card: CardRecord, claim: str) -> AttemptEnd:
        store = self.host.store
        scope = WorkerScope(store, card, claim, self.settings.lease_seconds)
        services = {k: v for k, v in self.host.services.items() if k not in NEVER_IN_WORKERS}
        services[WORKER_SERVICE] = scope
        ctx = worker_context(self.host.bot, card, services)
        task = asyncio.ensure_future(self._work(card, scope, ctx))
        keeper = asyncio.ensure_future(keep_alive(scope, task))
        try:
            work = await task
        except asyncio.CancelledError:
            if not keeper.done():  # stopped (a shutdown): give the card back for the next dispatcher
                await asyncio.shield(store.release_card(card.id, claim, reason="the gateway stopped"))
                raise
            return AttemptEnd(await store.get_card(card.id), False)  # the claim was lost: someone else has it
        finally:
            keeper.cancel()
        if scope.finished is not None:
            return AttemptEnd(scope.finished, True)
        handoff: dict[str, Any] = {"notes": scope.notes}
        if work.error is None and work.text.strip():
            handoff["result"] = work.text[:MAX_HANDOFF_CHARS]
            end = await store.finish_attempt(card.id, claim, ok=True, result=work.text, handoff=handoff,
                                             to_status="blocked" if work.blocked else None)
            return AttemptEnd(end, True)
        handoff["error"] = work.error or "the worker ended without a result"
        end = await store.finish_attempt(card.id, claim, ok=False, handoff=handoff,
                                         max_failures=self.settings.max_failures)
        return AttemptEnd(end, False)

    async def _work(self, card: CardRecord, scope: WorkerScope, ctx: ToolContext) -> Work:
        """What the worker produced; a goal card runs rounds judged like /goal."""
        agent = AgentLoop(self._registry(), max_iterations=self.settings.max_iterations,
                          max_output_tokens=self.host.profile.max_output_tokens)
        history: list[Message] = []
        user = Message(role="user", content=await card_prompt(self.host.store, card))
        rounds = self.settings.goal_rounds if card.goal_mode else 1
        text = ""
        for n in range(rounds):
            try:
                result = await agent.run(router=self._router(), system=WORKER_SYSTEM, history=history, user=user,
                                         ctx=ctx, persist=_discard, purpose="kanban")
            except HermesError as exc:
                return Work("", f"{type(exc).__name__}: {str(exc)[:300]}")
            if result.budget_exhausted:
                return Work("", f"the worker used its budget of {self.settings.max_iterations} model calls")
            text = result.final_text
            if scope.finished is not None or not card.goal_mode:
                return Work(text)
            verdict = await self._judge(card, text)
            if verdict is not None and verdict["verdict"] == "done":
                return Work(text)
            if verdict is not None and verdict["verdict"] == "blocked":
                return Work(f"{text}\n\nBlocked: {verdict['reason']}", blocked=True)
            user = Message(role="user", content=f"[Continuing toward the card's goal, round {n + 2}] {card.title}")
        return Work("", f"the goal was not reached in {rounds} rounds")

    async def _judge(self, card: CardRecord, answer: str) -> dict[str, str] | None:
        request = ModelRequest(system=JUDGE_SYSTEM, max_tokens=200, purpose="judge",
                               messages=(Message(role="user", content=f"Goal: {card.title}\n{card.body}\n\n"
                                                                      f"Latest answer:\n{answer[-4000:]}"),))
        try:
            text = ""
            async for event in self._router().stream(request):
                if isinstance(event, Completed):
                    text = event.response.text
            return parse_verdict(text)
        except HermesError as exc:
            log.warning("kanban card %s: judge failed: %s", card.id, exc)
            return None


async def _discard(_m: Message, _usage: Any, _model: str | None) -> None:
    """Worker steps are not stored as a conversation: the card's history keeps the handoff."""
