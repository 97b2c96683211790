"""A worker: one agent run scoped to one card, with an isolated context and the profile's tools.

Like a sub-agent (`loops/delegation.py`) it sees a short system prompt of its own and one user message: the
card, the results of the cards it waited for, and the handoffs of earlier attempts (so a retry knows what
went wrong before). It reaches the board only through `kanban_show`, `kanban_heartbeat` and
`kanban_complete`, which refuse to change any card but its own, or to read any but its own, the cards it
depends on and its parts: the board holds other people's work. Whatever happens, the attempt ends with a
structured handoff in the card's history.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from hermes_engine.errors import HermesError
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.storage import CardRecord, CardSpec, CardStore
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import tool

log = logging.getLogger(__name__)

WORKER_SERVICE: ServiceKey[WorkerScope] = ServiceKey("kanban_worker")
WORKER_TOOLSET = "kanban_worker"
MAX_HANDOFF_CHARS = 2000

WORKER_SYSTEM = """\
You are a worker on a kanban board: you were given one card to finish. No person reads your messages; work
only from the card and the context given, with the tools you have. Use kanban_show to read your card, the
cards it depends on or its parts, kanban_heartbeat to report progress on long work, and kanban_complete to
finish it with its result (or to split it into child cards). You may change only your own card."""


def refusal(own: int, other: int) -> ToolResult:
    return ToolResult(f"Error: worker is scoped to task {own}; refusing to mutate {other}", is_error=True)


@dataclass
class WorkerScope:
    """What the worker tools of one attempt may touch: its card, through its claim."""

    store: CardStore
    card: CardRecord
    claim: str
    lease_seconds: float
    finished: CardRecord | None = None  # set once kanban_complete ended the attempt
    notes: list[str] = field(default_factory=list)
    split_before: bool = False  # the card already has parts: this run integrates them, it does not split again


def may_read(scope: WorkerScope, card: CardRecord) -> bool:
    """A worker reads its own card, the cards it waits for, and the parts it split its card into."""
    own = scope.card
    return card.id == own.id or card.id in own.depends_on or card.parent_id == own.id


def _scope(ctx: ToolContext) -> WorkerScope | None:
    return ctx.services.get(WORKER_SERVICE)


def describe(card: CardRecord) -> dict[str, Any]:
    return {"id": card.id, "title": card.title, "body": card.body, "status": card.status,
            "depends_on": list(card.depends_on), "parent_id": card.parent_id, "result": card.result,
            "reason": card.reason}


@tool(toolset=WORKER_TOOLSET)
async def kanban_show(card_id: int | None = None, *, ctx: ToolContext) -> ToolResult:
    """Read a card of the board (default: your own), with its status and result.

    Args:
        card_id: the card to read; omit for your own
    """
    scope = _scope(ctx)
    if scope is None:
        return ToolResult("Error: kanban_show is for kanban workers.", is_error=True)
    wanted = card_id if card_id is not None else scope.card.id
    card = await scope.store.get_card(wanted)
    if card is None or not may_read(scope, card):
        return ToolResult(f"Error: no card {wanted} among those this worker may read: its own (#{scope.card.id}), "
                          "the cards it depends on and its parts.", is_error=True)
    return ToolResult(json.dumps(describe(card), ensure_ascii=False))


@tool(toolset=WORKER_TOOLSET)
async def kanban_heartbeat(card_id: int, note: str = "", *, ctx: ToolContext) -> ToolResult:
    """Tell the board you are still working on your card (renews your claim), with a progress note.

    Args:
        card_id: your card's id
        note: what you did so far, in one sentence
    """
    scope = _scope(ctx)
    if scope is None:
        return ToolResult("Error: kanban_heartbeat is for kanban workers.", is_error=True)
    if card_id != scope.card.id:
        return refusal(scope.card.id, card_id)
    alive = await scope.store.heartbeat_card(card_id, scope.claim, lease_seconds=scope.lease_seconds, note=note)
    if not alive:
        return ToolResult("Error: this attempt no longer holds the card; stop working on it.", is_error=True)
    if note:
        scope.notes.append(note)
    return ToolResult("ok")


@tool(toolset=WORKER_TOOLSET)
async def kanban_complete(card_id: int, result: str, children: list[str] | None = None, *,
                          ctx: ToolContext) -> ToolResult:
    """Finish your card with its result. To split it instead, list child cards to create (each a short,
    self-contained task); your card then waits for them, and you get their results to finish it.

    Args:
        card_id: your card's id
        result: the result of the card (or why it was split)
        children: titles of child cards to create under your card
    """
    scope = _scope(ctx)
    if scope is None:
        return ToolResult("Error: kanban_complete is for kanban workers.", is_error=True)
    if card_id != scope.card.id:
        return refusal(scope.card.id, card_id)
    if scope.finished is not None:
        return ToolResult("The card is already complete.")
    text = result.strip()
    titles = [t for t in children or [] if t.strip()]
    if titles and scope.split_before:
        return ToolResult("Error: this card was already split and its parts are done; combine their results "
                          "and call kanban_complete without children.", is_error=True)
    handoff = {"result": text[:MAX_HANDOFF_CHARS], "notes": scope.notes}
    finished: CardRecord | None
    if titles:
        card = scope.card
        specs = [CardSpec(title=t, profile=card.profile, origin=card.origin, owner_id=card.owner_id,
                          shared_in=card.shared_in) for t in titles]
        split = await scope.store.split_card(card_id, scope.claim, specs, result=text, handoff=handoff)
        finished = split[0] if split is not None else None
    else:
        finished = await scope.store.finish_attempt(card_id, scope.claim, ok=True, result=text, handoff=handoff)
    if finished is None:
        return ToolResult("Error: this attempt no longer holds the card; its result was not recorded.",
                          is_error=True)
    scope.finished = finished
    if titles:
        return ToolResult("Card split; it runs again with the parts' results once they are done. Stop now.")
    return ToolResult("Card complete. Reply with a one-line summary and stop.")


WORKER_TOOLS = [kanban_show, kanban_heartbeat, kanban_complete]


async def keep_alive(scope: WorkerScope, task: asyncio.Task[Any]) -> None:
    """Renew the card's lease every third of it while the attempt runs; cancel the attempt when the claim
    is lost (the lease was reclaimed), so a stalled worker does not finish a card someone else now holds."""
    while not task.done():
        await asyncio.sleep(scope.lease_seconds / 3)
        if scope.finished is not None:
            return
        try:
            alive = await scope.store.heartbeat_card(scope.card.id, scope.claim, lease_seconds=scope.lease_seconds)
        except HermesError as exc:  # the database is away: keep working, the next beat may land
            log.warning("kanban card %s: heartbeat failed: %s", scope.card.id, exc)
            continue
        if not alive:
            task.cancel()
            return
