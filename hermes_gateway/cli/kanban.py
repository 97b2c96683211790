"""`hermes-gateway kanban …`: the task board from the command line.

    hermes-gateway kanban list [--profile NAME] [--status STATUS]
    hermes-gateway kanban show 12
    hermes-gateway kanban move 12 todo --reason "needs a second look"
    hermes-gateway kanban retry 12            (a blocked card goes back to ready, its failure count reset)

A running gateway's dispatcher sees the change at its next tick (`kanban.tick_seconds`).
"""

from __future__ import annotations

import typer

from hermes_engine.kanban import moves
from hermes_engine.kanban.board import parse_status, render_board, render_card
from hermes_engine.ports.storage import CardStatus, Store
from hermes_gateway.cli.home import with_store

app = typer.Typer(rich_markup_mode=None, help="Show and move the cards of the kanban board.", no_args_is_help=True)

ACTOR = "cli"


def _fail(text: str) -> None:
    typer.echo(f"Error: {text}", err=True)
    raise typer.Exit(1)


def _status(word: str) -> CardStatus:
    try:
        return parse_status(word)  # type: ignore[return-value]
    except ValueError as exc:
        _fail(str(exc))
        raise


@app.command("list")
def list_cards(profile: str | None = typer.Option(None, "--profile", help="Only this bot profile's cards."),
               status: str | None = typer.Option(None, "--status", help="Only cards with this status.")) -> None:
    """The board, column by column (archived cards only with --status archived)."""
    wanted = _status(status) if status else None

    async def work(store: Store) -> str:
        return render_board(await store.list_cards(profile=profile, status=wanted))

    typer.echo(with_store(work))


@app.command()
def show(card_id: int = typer.Argument(..., help="The card's number.")) -> None:
    """A card with its result and history."""

    async def work(store: Store) -> str | None:
        card = await store.get_card(card_id)
        return render_card(card, await store.card_events(card_id)) if card else None

    text = with_store(work)
    if text is None:
        _fail(f"no card {card_id}.")
    typer.echo(text)


def _move(card_id: int, status: CardStatus, reason: str) -> None:
    async def work(store: Store) -> str | None:
        card = await moves.move(store, card_id, status, actor=ACTOR, reason=reason)
        return moves.moved_text(card) if card else None

    text = with_store(work)
    if text is None:
        _fail(f"no card {card_id}.")
    typer.echo(text)


@app.command()
def move(card_id: int = typer.Argument(..., help="The card's number."),
         status: str = typer.Argument(..., help="triage, todo, ready, running, blocked, done or archived."),
         reason: str = typer.Option("", "--reason", help="Why, for the card's history.")) -> None:
    """Move a card to another column (a claim on it is dropped)."""
    _move(card_id, _status(status), reason)


@app.command()
def retry(card_id: int = typer.Argument(..., help="The card's number."),
          reason: str = typer.Option(moves.RETRIED, "--reason")) -> None:
    """Put a card back in ready with its failure count reset (after fixing what blocked it)."""
    async def work(store: Store) -> str | None:
        card = await moves.retry(store, card_id, actor=ACTOR, reason=reason)
        return moves.moved_text(card) if card else None

    text = with_store(work)
    if text is None:
        _fail(f"no card {card_id}.")
    typer.echo(text)
