"""The kanban feature: the `/kanban` command, the `kanban` tool, and this gateway's dispatcher.

The `kanban` tool lets the agent split a task into cards with dependencies and return at once; the cards
remember the conversation they came from (and the person, whose usage limits pay for their workers), and
the dispatcher posts there as cards start (a batch at a time), are taken back to run again, finish or
block. A card belongs to the person who asked for it and to the group, channel or thread it was asked in:
`/kanban` shows and changes, in a DM, the person's own cards, in a shared conversation its cards (for an
admin, every card; `CardViewer`), and a card it may not see is "no card", as one that does not exist. A
conversation that is gone (its platform is not attached, the chat was deleted) costs only
the message: the card still finishes and stays on the board.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hermes_engine.config import KanbanSettings
from hermes_engine.holders import new_holder
from hermes_engine.kanban import moves
from hermes_engine.kanban.attempt import AttemptRunner
from hermes_engine.kanban.board import parse_card_id, render_board, render_card
from hermes_engine.kanban.dispatcher import Dispatcher, Progress
from hermes_engine.kanban.triage import Triage
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.storage import CardRecord, CardSpec, CardViewer, shared_conversation
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import tool

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

TOOLSET = "kanban"
SERVICE: ServiceKey[KanbanFeature] = ServiceKey("kanban")
MAX_TITLES = 5  # a progress message names this many cards, then counts the rest
USAGE = ("Usage: /kanban [list] | add <title>[: <details>] | show <#id> | move <#id> <status> | "
         "block <#id> <reason> | cancel <#id>")


@tool(toolset=TOOLSET)
async def kanban(tasks: list[str], dependencies: list[str] | None = None, goal_mode: bool = False, *,
                 ctx: ToolContext) -> ToolResult:
    """Put work on the kanban board: each task becomes a card that workers take on in parallel, and this
    conversation is told as each finishes. Returns at once; do not wait for the results.

    Args:
        tasks: one self-contained task per card ("title: details")
        dependencies: "2:1" means task 2 starts after task 1 is done (numbers are positions in tasks, from 1)
        goal_mode: judge each card like a /goal and keep working until it is done
    """
    feature = ctx.services.get(SERVICE)
    if feature is None:
        return ToolResult("Error: the kanban board is not available here.", is_error=True)
    try:
        cards = await feature.add_tasks(tasks, dependencies or [], goal_mode=goal_mode, ctx=ctx)
    except ValueError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    listing = ", ".join(f"#{c.id} {c.title}" for c in cards)
    return ToolResult(f"Created {len(cards)} card(s): {listing}. They run in the background; this "
                      "conversation is told as each finishes.")


def progress_text(kind: Progress, cards: Sequence[CardRecord]) -> str:
    names = "; ".join(c.title for c in cards[:MAX_TITLES])
    if len(cards) > MAX_TITLES:
        names += f" and {len(cards) - MAX_TITLES} more"
    if kind == "started":
        return f"▶️ Started: {names}" if len(cards) == 1 else f"▶️ Started {len(cards)} cards: {names}"
    if len(cards) == 1:
        return f"↩️ {names} was taken back after its worker stopped; it will run again"
    return f"↩️ {len(cards)} cards were taken back after their workers stopped; they will run again: {names}"


def new_batch() -> str:
    """The mark shared by the cards of one request (kept in their `origin`, and inherited by the parts they
    are split into), so that request is told when its own cards are done, whatever else the chat asked for."""
    return uuid.uuid4().hex


def _spec_text(text: str) -> tuple[str, str]:
    title, _, body = text.partition(":")
    return (title.strip(), body.strip()) if body.strip() else (text.strip(), "")


class KanbanFeature(Feature):
    name = "kanban"

    def __init__(self, settings: KanbanSettings | None = None) -> None:
        self.settings = settings or KanbanSettings()
        self.host: Host | None = None
        self.dispatcher: Dispatcher | None = None

    def tools(self) -> list[Tool]:
        return [kanban]

    def services(self) -> dict[ServiceKey[Any], object]:
        return {SERVICE: self}

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("kanban", "the task board: /kanban [list|add|show|move|block|cancel]",
                         immediate=True)(self._command)

    async def start(self, host: Host) -> None:
        self.host = host
        if not self.settings.enabled:
            return
        runner = AttemptRunner(host, self.settings)
        triage = Triage(host, self.settings)
        self.dispatcher = Dispatcher(host.store, host.bot, self.settings, runner.run, holder=new_holder(),
                                     on_card=self._post, on_batch=self._post_batch, decompose=triage.decompose,
                                     metrics=host.metrics)
        self.dispatcher.start()

    async def stop(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.stop()

    def _poke(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.poke()

    # ------------------------------------------------------------------ adding work

    async def add_tasks(self, tasks: list[str], dependencies: list[str], *, goal_mode: bool,
                        ctx: ToolContext) -> list[CardRecord]:
        assert self.host is not None
        if not tasks:
            raise ValueError("give at least one task")
        deps: dict[int, list[str]] = {}
        for entry in dependencies:
            later, sep, earlier = entry.partition(":")
            if not sep or not later.strip().isdigit() or not earlier.strip().isdigit():
                raise ValueError(f"dependency {entry!r} should look like \"2:1\" (task 2 after task 1)")
            a, b = int(later), int(earlier)
            if not (1 <= a <= len(tasks) and 1 <= b <= len(tasks)):
                raise ValueError(f"dependency {entry!r} names a task that does not exist")
            deps.setdefault(a, []).append(str(b))
        session = self.host.session(ctx.session_key)
        origin: dict[str, Any] = {}
        shared_in = shared_conversation(session.target, ctx.chat_kind) if session else None
        if session:
            origin = {"reply": replace(session.target, reply_to_id=None).to_dict(),
                      "for": {"user_id": ctx.user_id, "admin": ctx.is_admin, "person_id": ctx.person_id,
                              "chat_kind": ctx.chat_kind, "session_key": ctx.session_key}}
        if ctx.person_id is not None:
            origin["person"] = ctx.person_id
        origin["batch"] = new_batch()
        specs = []
        for i, text in enumerate(tasks, start=1):
            title, body = _spec_text(text)
            specs.append(CardSpec(title=title, body=body, profile=self.host.bot, key=str(i),
                                  depends_on=tuple(deps.get(i, [])), goal_mode=goal_mode, origin=origin,
                                  owner_id=ctx.person_id, shared_in=shared_in))
        cards = await self.host.store.create_cards(specs, actor=f"agent:{ctx.session_key}")
        self._poke()
        return cards

    # ------------------------------------------------------------------ telling the conversation

    async def _post(self, card: CardRecord) -> None:
        host = self.host
        reply = card.origin.get("reply")
        if host is None or not reply or card.status not in ("done", "blocked"):
            return
        if card.status == "done":
            text = f"✅ Card #{card.id} done: {card.title}\n{(card.result or '').strip()[:1500]}".rstrip()
        else:
            text = f"⛔ Card #{card.id} blocked: {card.title}\n{card.reason or ''}".rstrip()
        key = f"kanban-{card.id}-{card.attempts}-{card.status}"
        if not await host.notify(ReplyTarget.from_dict(reply), text, idempotency_key=key):
            log.info("kanban: card %s finished; its conversation (%s) is not reachable", card.id,
                     reply.get("platform"))
            return
        if card.status == "done" and (finished := await self._all_done(card)):
            await host.notify(ReplyTarget.from_dict(reply), f"🏁 All {finished} cards of this request are done.",
                              idempotency_key=f"kanban-all-{card.origin.get('batch') or card.id}")  # said once

    async def _post_batch(self, kind: Progress, cards: Sequence[CardRecord]) -> None:
        """One message per conversation for the cards of one batch (started, or taken back to run again)."""
        host = self.host
        if host is None:
            return
        by_place: dict[str, list[CardRecord]] = {}
        for card in cards:
            if reply := card.origin.get("reply"):
                by_place.setdefault(json.dumps(reply, sort_keys=True), []).append(card)
        for place, mine in by_place.items():
            first = mine[0]
            key = f"kanban-{kind.replace(' ', '-')}-{first.id}.{first.attempts}-{len(mine)}"
            await host.notify(ReplyTarget.from_dict(json.loads(place)), progress_text(kind, mine),
                              idempotency_key=key)

    async def _all_done(self, card: CardRecord) -> int:
        """How many cards `card`'s request has, when `card` was the last of several still open (else 0): a
        person who handed the bot a piece of work in parts hears when all of it is finished, whatever became
        of what the same chat asked for before; a single card's own message already says so. Cards made
        before requests were marked know only their conversation, so they are counted with its other
        unmarked cards, as they were then."""
        assert self.host is not None
        batch = card.origin.get("batch")
        mine = [c for c in await self.host.store.list_cards(profile=card.profile)
                if (c.origin.get("batch") == batch if batch is not None else c.origin == card.origin)]
        return len(mine) if len(mine) > 1 and all(c.status == "done" for c in mine) else 0

    # ------------------------------------------------------------------ /kanban

    async def _command(self, ctx: CommandContext) -> str | None:
        store = ctx.host.store
        word, _, rest = ctx.args.strip().partition(" ")
        sub, rest = word.lower(), rest.strip()
        actor = f"{ctx.message.platform}:{ctx.message.user_id}"
        conversation = shared_conversation(ctx.message.reply_target(), ctx.message.chat_kind)
        viewer = CardViewer(ctx.person_id, conversation, admin=ctx.is_admin)
        try:
            if sub in ("", "list", "board"):
                return render_board(await store.list_cards(profile=ctx.host.bot, viewer=viewer))
            if sub == "add":
                if not rest:
                    return "Usage: /kanban add <title>[: <details>]"
                title, body = _spec_text(rest)
                origin = {"reply": replace(ctx.message.reply_target(), reply_to_id=None).to_dict(),
                          "person": ctx.person_id,
                          "for": {"user_id": ctx.message.user_id, "admin": ctx.is_admin, "person_id": ctx.person_id,
                                  "chat_kind": ctx.session.scope.chat_kind, "session_key": ctx.session.key},
                          "batch": new_batch()}
                [card] = await store.create_cards([CardSpec(title=title, body=body, profile=ctx.host.bot,
                                                            origin=origin, owner_id=ctx.person_id,
                                                            shared_in=conversation)], actor=actor)
                self._poke()
                return f"Added card #{card.id}: {card.title}"
            if sub == "show":
                shown = await store.get_card(parse_card_id(rest), viewer=viewer)
                if shown is None:
                    return f"No card {rest}."
                return render_card(shown, await store.card_events(shown.id))
            if sub in ("move", "block", "cancel"):
                target, _, tail = rest.partition(" ")
                card_id = parse_card_id(target)
                if sub == "move":
                    status, _, reason = tail.strip().partition(" ")
                    moved = await moves.move(store, card_id, status, actor=actor, reason=reason, viewer=viewer)
                elif sub == "block":
                    moved = await moves.move(store, card_id, "blocked", actor=actor, reason=tail.strip() or "blocked",
                                             viewer=viewer)
                else:
                    moved = await moves.move(store, card_id, "archived", actor=actor,
                                             reason=tail.strip() or "cancelled", viewer=viewer)
                if moved is None:
                    return f"No card {target}."
                self._poke()
                return moves.moved_text(moved)
        except ValueError as exc:
            return f"{exc}\n{USAGE}"
        return USAGE
