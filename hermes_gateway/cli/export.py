"""`hermes-gateway export …`: conversations out of the database.

    hermes-gateway export trajectories --since 2025-03-01 --person 7 --out trajectories.jsonl

The database is the gateway's own (`HERMES_DATABASE_URL`, else SQLite under `HERMES_HOME`); the format is
described in `hermes_engine.history.export`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from hermes_engine.ports.storage import Store
from hermes_gateway.cli.home import with_store

app = typer.Typer(rich_markup_mode=None, help="Export conversations.", no_args_is_help=True)


@app.callback()
def _export() -> None:
    """Export conversations."""


@app.command()
def trajectories(
    since: str | None = typer.Option(None, "--since", help="Only sessions with messages on or after this "
                                                              "date (YYYY-MM-DD or an ISO date-time, UTC)."),
    person: int | None = typer.Option(None, "--person", help="Only sessions this person id took part in; "
                                                                "other people's messages are left out."),
    out: Path | None = typer.Option(None, "--out", help="Write here instead of standard output."),
) -> None:
    """Write every conversation as one JSON line (OpenAI chat format with tool calls, plus usage and
    compaction summaries), secrets redacted."""
    from hermes_engine.history.export import export_trajectories, parse_since

    try:
        since_at = parse_since(since)
    except ValueError:
        typer.echo(f"Error: --since {since!r} is not a date (use YYYY-MM-DD).", err=True)
        raise typer.Exit(2) from None

    async def run(store: Store) -> tuple[int, int]:
        if out is None:
            stats = await export_trajectories(store, sys.stdout, since=since_at, person_id=person)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            partial = out.with_name(out.name + ".partial")
            with partial.open("w", encoding="utf-8") as handle:
                stats = await export_trajectories(store, handle, since=since_at, person_id=person)
            partial.replace(out)  # a reader never sees half a file
        return stats.sessions, stats.messages

    sessions, messages = with_store(run)
    where = f" to {out}" if out is not None else ""
    typer.echo(f"Exported {sessions} session{'s' if sessions != 1 else ''} ({messages} messages){where}.", err=True)
