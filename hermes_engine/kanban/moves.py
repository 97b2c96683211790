"""A card moved by hand: one rule for every door (`/kanban`, `hermes-gateway kanban`, the dashboard).

The board takes any of its statuses and drops a claim on the card; a move to `todo` or `ready` resets the
circuit breaker (`CardStore.move_card`). A status it does not know is refused with the same sentence
wherever it was asked, and a card the viewer may not see is no card, as one that does not exist.
"""

from __future__ import annotations

from hermes_engine.kanban.board import parse_status
from hermes_engine.ports.cards import CardRecord, CardStatus, CardStore, CardViewer

RETRIED = "retried from the command line"


def moved_text(card: CardRecord) -> str:
    return f"Card #{card.id} is now {card.status}."


async def move(store: CardStore, card_id: int, status: str, *, actor: str, reason: str = "",
               viewer: CardViewer | None = None) -> CardRecord | None:
    """The card as it is now, or None (nothing changed) for no such card; ValueError for a status the
    board does not know."""
    word: CardStatus = parse_status(status)  # type: ignore[assignment]
    return await store.move_card(card_id, word, actor=actor, reason=reason, viewer=viewer)


async def retry(store: CardStore, card_id: int, *, actor: str, reason: str = RETRIED,
                viewer: CardViewer | None = None) -> CardRecord | None:
    """A card that failed back in `ready` with its failure count reset (after fixing what blocked it)."""
    return await move(store, card_id, "ready", actor=actor, reason=reason, viewer=viewer)
