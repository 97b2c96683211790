"""Kanban: the board in columns by status, a card with its history and handoffs, and moving or retrying a
card through the board's own rule (`hermes_engine.kanban.moves`, as `/kanban` and the command line do)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from hermes_engine.kanban import moves
from hermes_engine.kanban.board import COLUMNS, MAX_DONE_SHOWN
from hermes_engine.ports.cards import CARD_STATUSES, CardEvent, CardRecord, CardViewer
from hermes_gateway.dashboard.guard import PREFIX, visitor
from hermes_gateway.dashboard.pages import Page
from hermes_gateway.dashboard.rendering import SOURCES, render

ADMIN = CardViewer(None, admin=True)  # an admin of the bot sees every card, as `/kanban` shows them one


@dataclass(frozen=True)
class Column:
    status: str
    cards: tuple[CardRecord, ...]
    hidden: int  # older done cards not shown (the board shows the newest `MAX_DONE_SHOWN`, as in chat)


def columns(cards: Sequence[CardRecord]) -> tuple[Column, ...]:
    found = []
    for status in COLUMNS:
        mine = tuple(c for c in cards if c.status == status)
        hidden = max(0, len(mine) - MAX_DONE_SHOWN) if status == "done" else 0
        found.append(Column(status, mine[hidden:], hidden))
    return tuple(found)


def handoff_text(handoff: dict[str, Any]) -> str:
    return json.dumps(handoff, indent=2, sort_keys=True, ensure_ascii=False, default=str) if handoff else ""


async def board(request: web.Request) -> web.Response:
    cards = await request.app[SOURCES].store.list_cards(viewer=ADMIN)
    return render(request, "kanban.html", page="kanban", columns=columns(cards), total=len(cards))


async def card(request: web.Request, *, status: int = 200, said: str | None = None, ok: bool = True
               ) -> web.Response:
    store = request.app[SOURCES].store
    found = await store.get_card(int(request.match_info["card"]), viewer=ADMIN)
    if found is None:
        raise web.HTTPNotFound(text="No such card.\n")
    events: list[CardEvent] = await store.card_events(found.id)
    if said is None and "moved" in request.query:
        said = moves.moved_text(found)
    return render(request, "card.html", status=status, page="kanban", card=found, events=events, said=said, ok=ok,
                  statuses=CARD_STATUSES, handoff_text=handoff_text)


async def move(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    return await _moved(request, str(form.get("status", "")), str(form.get("reason", "")).strip(), retry=False)


async def retry(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    return await _moved(request, "ready", str(form.get("reason", "")).strip() or "retried from the dashboard",
                        retry=True)


async def _moved(request: web.Request, status: str, reason: str, *, retry: bool) -> web.StreamResponse:
    """The board's own move (a claim dropped, the circuit breaker reset on todo and ready); a status it does
    not know is refused with its sentence, and nothing is recorded."""
    store, who = request.app[SOURCES].store, visitor(request)
    card_id = int(request.match_info["card"])
    before = await store.get_card(card_id, viewer=ADMIN)
    if before is None:
        raise web.HTTPNotFound(text="No such card.\n")
    actor = f"dashboard:{who.admin}"
    try:
        if retry:
            moved = await moves.retry(store, card_id, actor=actor, reason=reason, viewer=ADMIN)
        else:
            moved = await moves.move(store, card_id, status, actor=actor, reason=reason, viewer=ADMIN)
    except ValueError as exc:
        return await card(request, status=422, said=str(exc), ok=False)
    if moved is None:  # removed meanwhile
        raise web.HTTPNotFound(text="No such card.\n")
    detail = f"{before.status} → {moved.status}" + (f": {reason}" if reason else "")
    await store.record_dashboard_change(who.admin, "kanban.retry" if retry else "kanban.move", f"card #{card_id}",
                                        detail)
    raise web.HTTPSeeOther(f"{PREFIX}/kanban/{card_id}?moved")


def routes(router: web.UrlDispatcher) -> None:
    router.add_get("/kanban", board)
    router.add_get("/kanban/{card:\\d+}", card)
    router.add_post("/kanban/{card:\\d+}/move", move)
    router.add_post("/kanban/{card:\\d+}/retry", retry)


PAGE = Page("kanban", routes, "Kanban", "/kanban")
