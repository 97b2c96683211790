"""`hermes-gateway people …`: find a person's id, and forget a person on their behalf.

    hermes-gateway people                (everyone, with their platform accounts)
    hermes-gateway people list --platform telegram --user-id 123456789
    hermes-gateway people forget telegram:123456789

Everywhere the command line takes a PERSON it takes the id `people list` shows, or `platform:user_id` (the
id the platform gives the person, e.g. Telegram's numeric user id). A PERSON that names no one is one
clear sentence, never an empty person.
"""

from __future__ import annotations

import typer

from hermes_engine.config import Settings
from hermes_engine.ports.storage import Store
from hermes_gateway.cli.home import checked_settings, with_store
from hermes_gateway.cli.printable import printable

app = typer.Typer(rich_markup_mode=None, help="Find people and forget a person.", invoke_without_command=True)

PERSON_HELP = ("The person's id (see `hermes-gateway people`) or platform:user_id, e.g. telegram:123456789, "
               "slack:U0123ABCD or discord:123456789012345678.")
REMAINS = ("Not deleted here: database and HERMES_HOME backups you made, log files, exports already written, "
           "updates rejected as unreadable that show no sender (until HERMES_INBOX_RETENTION_DAYS), "
           "and facts about them in a group's shared memory or in skills. A gateway running now keeps what it "
           "has loaded for the person until it restarts.")


class UnknownPerson(Exception):
    """PERSON names no one (or more than one person); the message is the sentence to show."""


def settings() -> Settings:
    """The gateway's settings, on a home with its data (see `hermes_gateway.cli.home`)."""
    return checked_settings()


async def resolve_person(store: Store, person: str) -> int:
    """The person id PERSON names: an id that exists, or the one person behind `platform:user_id`."""
    text = person.strip()
    if text.isdigit():
        if await store.get_person(int(text)) is None:
            raise UnknownPerson(f"No person has id {text} (a platform user id is written platform:user_id, e.g. "
                                f"telegram:{text}; `hermes-gateway people list` shows everyone).")
        return int(text)
    platform, sep, user_id = text.partition(":")
    if not sep or not platform or not user_id:
        raise UnknownPerson(f"{person!r} is neither a person id nor platform:user_id (e.g. telegram:123456789).")
    ids = sorted({a.person_id for a in await store.find_accounts(platform=platform.lower(), user_id=user_id)})
    if not ids:
        raise UnknownPerson(f"No {platform.lower()} account with user id {user_id} is known "
                            f"(`hermes-gateway people list` shows everyone).")
    if len(ids) > 1:
        raise UnknownPerson(f"{text} is {len(ids)} different people (ids {', '.join(map(str, ids))}, one per bot "
                            f"they wrote to); give the id of the one you mean.")
    return ids[0]


def person_id(person: str) -> int:
    """`resolve_person` for a command: exits with the sentence when PERSON names no one."""

    async def find(store: Store) -> int:
        return await resolve_person(store, person)

    try:
        return with_store(find)
    except UnknownPerson as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command("list")
def list_(platform: str | None = typer.Option(None, "--platform", help="Only accounts on this platform."),
          user_id: str | None = typer.Option(None, "--user-id", help="Only this platform user id.")) -> None:
    """People with their ids and platform accounts."""

    async def rows(store: Store) -> list[str]:
        accounts = await store.find_accounts(platform=platform.lower() if platform else None, user_id=user_id)
        lines: list[str] = []
        for pid in dict.fromkeys(a.person_id for a in accounts):
            own = [a for a in accounts if a.person_id == pid]
            record = await store.get_person(pid)
            name = (record.display_name if record else "") or own[0].display_name or "-"
            listed = ", ".join(f"{a.platform}:{a.user_id} (bot account {a.account})" for a in own)
            lines.append(printable(f"{pid:>6}  {name}  {listed}"))
        return lines

    lines = with_store(rows)
    if not lines:
        typer.echo("No one matches." if platform or user_id else "No one is known yet.")
        return
    typer.echo(f"{'id':>6}  name  accounts")
    for line in lines:
        typer.echo(line)


@app.callback()
def everyone(ctx: typer.Context) -> None:
    """Without a subcommand: everyone known, with their ids and platform accounts (as `people list`)."""
    if ctx.invoked_subcommand is None:
        list_(platform=None, user_id=None)


@app.command()
def forget(person: str = typer.Argument(..., help=PERSON_HELP),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Delete everything kept about a person: memory, profile, conversations, files, link codes, pairing."""
    from hermes_engine.people.forget import forget_person

    pid = person_id(person)
    if not yes:
        typer.confirm(f"Delete everything kept about person {pid}? This cannot be undone.", abort=True)
    config = settings()  # memory and approvals where the gateway keeps them (HERMES_STATE_BACKEND)

    async def run(store: Store) -> str | None:
        from hermes_engine.policy.pairing import Pairing
        from hermes_gateway.wiring import memory_store, pairing_store

        outcome = await forget_person(store, config.home, pid, memory=memory_store(config, store),
                                      pairing=Pairing(pairing_store(config, store)), workspaces=config.workspaces)
        return outcome.summary() if outcome is not None else None

    summary = with_store(run)
    if summary is None:  # deleted by someone else between the look-up and now
        typer.echo(f"Person {pid} is no longer known; nothing to delete.", err=True)
        raise typer.Exit(1)
    typer.echo(summary)
    typer.echo(REMAINS)
