"""`hermes-gateway inbox …`: what the gateway received and has not answered yet, and what it could not read.

    hermes-gateway inbox pending [--platform telegram]
    hermes-gateway inbox rejected [--platform telegram] [--limit 20]

Pending messages are answered by a running gateway (or at its next start); a long list says the gateway
is down or cannot keep up. Rejected events were too malformed to read: they are never answered, and are
deleted with the answered ones after `HERMES_INBOX_RETENTION_DAYS`.
"""

from __future__ import annotations

import typer

from hermes_engine.ports.storage import InboundEvent, Store
from hermes_gateway.cli.home import with_store
from hermes_gateway.cli.printable import printable

app = typer.Typer(rich_markup_mode=None,
                  help="What the gateway received: waiting for an answer, or rejected as unreadable.",
                  no_args_is_help=True)

RAW_SHOWN = 500  # characters of a rejected event's content shown


def _when(event: InboundEvent) -> str:
    return event.created_at.strftime("%Y-%m-%d %H:%M:%S") if event.created_at else "?"


@app.command()
def pending(platform: str | None = typer.Option(None, "--platform", help="Only this platform's.")) -> None:
    """Messages received but not answered yet, oldest first (no message text: see the conversation)."""

    async def work(store: Store) -> list[InboundEvent]:
        return await store.pending_inbound(platform)

    events = with_store(work)
    if not events:
        typer.echo("Nothing is waiting for an answer.")
    for event in events:
        purpose = event.payload.get("purpose", "turn")
        typer.echo(f"{_when(event)}  {event.platform}  {event.event_id}  {purpose}  {event.session_key or '-'}")


@app.command()
def rejected(platform: str | None = typer.Option(None, "--platform", help="Only this platform's."),
             limit: int = typer.Option(20, "--limit", min=1, help="How many, newest first.")) -> None:
    """Events too malformed to read, newest first: why, and what they held."""

    async def work(store: Store) -> list[InboundEvent]:
        return await store.rejected_inbound(platform, limit=limit)

    events = with_store(work)
    if not events:
        typer.echo("No event was rejected.")
    for event in events:
        raw = printable(str(event.payload.get("raw", "")))
        shown = raw if len(raw) <= RAW_SHOWN else raw[:RAW_SHOWN] + "…"
        reason = printable(str(event.payload.get("reason", "?")))
        typer.echo(f"{_when(event)}  {event.platform}  {event.event_id}: {reason}\n    {shown}")
