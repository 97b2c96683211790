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
from dataclasses import dataclass, field
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
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.models import Completed, ModelRequest
from hermes_engine.ports.services import Services
from hermes_engine.ports.storage import CardRecord, CardUsage, Store
from hermes_engine.ports.tools import ToolContext
from hermes_engine.tools.registry import ToolRegistry

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


@dataclass
class Meter:
    """What one attempt spent, counted as its model calls come back (a failed attempt spent it too)."""

    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)  # the same, per model: what its person is charged

    def add(self, usage: Usage) -> None:
        self.usage.add(usage)
        self.tokens_in += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.tokens_out += usage.output_tokens
        self.model_calls += 1

    def spent(self) -> CardUsage:
        return CardUsage(self.tokens_in, self.tokens_out, self.model_calls)

    async def persist(self, _m: Message, usage: Usage | None, _model: str | None) -> None:
        """The agent loop's persist hook: worker steps are not stored as a conversation (the card's history
        keeps the handoff), only counted."""
        if usage is not None:
            self.add(usage)


async def card_prompt(store: Store, card: CardRecord) -> str:
    parts = [f"Card #{card.id}: {card.title}"]
    if card.body.strip():
        parts.append(card.body.strip())
    own_parts = 0
    for dep_id in card.depends_on:
        dep = await store.get_card(dep_id)
        if dep is None:
            continue
        own_parts += dep.parent_id == card.id
        kind = "your part" if dep.parent_id == card.id else "card"
        parts.append(f"Result of {kind} #{dep.id} ({dep.title}):\n{(dep.result or '').strip()}")
    if own_parts:
        parts.append("You split this card into the parts above and they are all done: combine their results "
                     "into the card's result.")
    earlier = [e for e in await store.card_events(card.id) if e.kind in ("failed", "reclaimed")]
    if earlier:
        lines = [f"- attempt {e.handoff.get('attempt', '?')}: {e.handoff.get('error') or e.reason}"
                 for e in earlier[-5:]]
        parts.append("Earlier attempts failed; avoid their mistakes:\n" + "\n".join(lines))
    parts.append(f"When done, call kanban_complete with card_id={card.id} and the result.")
    return "\n\n".join(parts)


def worker_context(bot: str, card: CardRecord, services: Services) -> ToolContext:
    """The worker acts for the person who made the card, with the access they had then, for the
    conversation the card came from (approvals are asked there), in a workspace of the card's own
    (`card-<id>`): cards running side by side never write over each other's files, and a card's work stays
    apart from the conversation's until someone copies it over. A card without a person (made on the
    command line) gets no person's access."""
    who = card.origin.get("for") or {}
    reply = card.origin.get("reply")
    workspace = f"card-{card.id}"
    if not who.get("user_id") or not who.get("session_key"):
        return ToolContext(bot=bot, session_id=0, session_key=f"kanban:{card.id}", services=services,
                           unattended=True, workspace=workspace)
    person = who.get("person_id")
    return ToolContext(bot=bot, session_id=0, session_key=str(who["session_key"]), services=services,
                       person_id=int(person) if person is not None else None,
                       chat_kind=str(who.get("chat_kind") or "dm"), is_admin=bool(who.get("admin")),
                       user_id=str(who["user_id"]), target=ReplyTarget.from_dict(reply) if reply else None,
                       unattended=True, workspace=workspace)


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
        meter = Meter()
        try:
            return await self._attempt(card, claim, meter)
        finally:
            if meter.model_calls:
                await asyncio.shield(self._charge(card, claim, meter))

    async def _charge(self, card: CardRecord, claim: str, meter: Meter) -> None:
        """Put the attempt's spending on the card and, when a person asked for the card, on that person's (and
        so the bot's) daily count, as a turn's tokens and cost are."""
        host = self.host
        try:
            await host.store.record_card_usage(card.id, card.attempts, meter.spent(), actor=claim)
            await charge(host, card.person_id, meter.usage)
        except HermesError as exc:  # the card's work stands; only its bill is missing
            log.warning("kanban card %s: could not record its usage: %s", card.id, exc)

    async def _attempt(self, card: CardRecord, claim: str, meter: Meter) -> AttemptEnd:
        store = self.host.store
        scope = WorkerScope(store, card, claim, self.settings.lease_seconds,
                            split_before=bool(await store.list_cards(parent_id=card.id)))
        services = self.host.services.without(NEVER_IN_WORKERS).with_entry(WORKER_SERVICE, scope)
        ctx = worker_context(self.host.bot, card, services)
        task = asyncio.ensure_future(self._work(card, scope, ctx, meter))
        keeper = asyncio.ensure_future(keep_alive(scope, task))
        try:
            work = await task
        except asyncio.CancelledError:
            if not keeper.done():  # stopped (a shutdown): the dispatcher gives the card back
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

    async def _work(self, card: CardRecord, scope: WorkerScope, ctx: ToolContext, meter: Meter) -> Work:
        """What the worker produced; a goal card runs rounds judged like /goal."""
        agent = AgentLoop(self._registry(), max_iterations=self.settings.max_iterations,
                          max_output_tokens=self.host.profile.max_output_tokens)
        history = SessionHistory([])  # the worker's own, across its rounds
        user = Message(role="user", content=await card_prompt(self.host.store, card))
        rounds = self.settings.goal_rounds if card.goal_mode else 1
        text = ""
        for n in range(rounds):
            try:
                result = await agent.run(router=self._router(), system=WORKER_SYSTEM, history=history, user=user,
                                         ctx=ctx, persist=meter.persist, purpose="kanban")
            except HermesError as exc:
                return Work("", f"{type(exc).__name__}: {str(exc)[:300]}")
            if result.budget_exhausted:
                return Work("", f"the worker used its budget of {self.settings.max_iterations} model calls")
            text = result.final_text
            if scope.finished is not None or not card.goal_mode:
                return Work(text)
            verdict = await self._judge(card, text, meter)
            if verdict is not None and verdict["verdict"] == "done":
                return Work(text)
            if verdict is not None and verdict["verdict"] == "blocked":
                return Work(f"{text}\n\nBlocked: {verdict['reason']}", blocked=True)
            user = Message(role="user", content=f"[Continuing toward the card's goal, round {n + 2}] {card.title}")
        return Work("", f"the goal was not reached in {rounds} rounds")

    async def _judge(self, card: CardRecord, answer: str, meter: Meter) -> dict[str, str] | None:
        request = ModelRequest(system=JUDGE_SYSTEM, max_tokens=200, purpose="judge",
                               messages=(Message(role="user", content=f"Goal: {card.title}\n{card.body}\n\n"
                                                                      f"Latest answer:\n{answer[-4000:]}"),))
        try:
            text = ""
            async for event in self._router().stream(request):
                if isinstance(event, Completed):
                    text = event.response.text
                    meter.add(event.response.usage)
            return parse_verdict(text)
        except HermesError as exc:
            log.warning("kanban card %s: judge failed: %s", card.id, exc)
            return None
