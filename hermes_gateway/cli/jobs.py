"""`hermes-gateway jobs …`: the clock's reminders and scheduled jobs from the command line.

    hermes-gateway jobs list [--bot PROFILE] [--owner PERSON]
    hermes-gateway jobs show 12
    hermes-gateway jobs pause 12
    hermes-gateway jobs resume 12          (next time from now, by the job's schedule in its zone)
    hermes-gateway jobs remove 12 [--yes]
    hermes-gateway jobs run 12             (due now: a running gateway sends it within a second)

`--bot` names the bot profile as `run` takes it (a folder, or a name under ./bots; without it, the one `run`
serves without `--bot`), or a bot's own name. PERSON is a person id or `platform:user_id` (see
`hermes-gateway people`). The commands change the job in the database and nothing else: a running gateway's
ticker looks at the store at least once a second, so it sees the change there, and a run it has already
taken finishes as it began.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, NoReturn

import typer

from hermes_engine.clock import operating
from hermes_engine.clock.operating import Refused, check_open
from hermes_engine.clock.schedule import ScheduleError, local_time, zone_named
from hermes_engine.clock.tool import describe
from hermes_engine.config import load_profile
from hermes_engine.errors import ConfigError
from hermes_engine.ports.jobs import JobRecord
from hermes_engine.ports.storage import Store
from hermes_gateway.cli.home import refuse, with_store
from hermes_gateway.cli.people import PERSON_HELP, UnknownPerson, resolve_person
from hermes_gateway.cli.printable import printable

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Reminders and scheduled jobs: list, show, pause, resume, remove, or run one now.")

ID_HELP = "The job's number (see `hermes-gateway jobs list`)."


def _fail(text: str) -> NoReturn:
    typer.echo(f"Error: {text}", err=True)
    raise typer.Exit(1)


def bot_name(bot: str | None) -> str:
    """The bot whose jobs `--bot` names: the profile as `run` takes it, else the name as given (a bot served
    from a folder elsewhere keeps its jobs under its own name)."""
    try:
        return load_profile(bot).name
    except ConfigError:
        if bot is None:
            raise
        return bot


def _now() -> datetime:
    return datetime.now(UTC)


def _moment(value: datetime, zone_name: str) -> str:
    """A time as the job's owner reads it (in the job's zone) and in UTC."""
    try:
        local = local_time(value, zone_named(zone_name))
    except ScheduleError:  # a zone the tz database here no longer knows
        local = f"(zone {zone_name!r} unknown here)"
    return f"{local} · {value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _value(job: JobRecord, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return _moment(value, job.timezone)
    if isinstance(value, dict):
        return printable(json.dumps(value, sort_keys=True, ensure_ascii=False))
    if isinstance(value, bool):
        return "yes" if value else "no"
    return printable(str(value))


def render_job(job: JobRecord) -> str:
    """Every field of the record, one a line (fields added to `JobRecord` later show up too)."""
    names = [f.name for f in fields(job)]
    width = max(len(n) for n in names) + 1
    return "\n".join(f"{name + ':':<{width}} {_value(job, getattr(job, name))}" for name in names)


@dataclass(frozen=True)
class _Listing:
    bot: str
    jobs: list[JobRecord]
    owner: int | None


@app.command("list")
def list_jobs(bot: str | None = typer.Option(None, "--bot", help="Bot profile folder or name under ./bots, as "
                                             "`run` takes it (default: the one `run` serves without --bot)."),
              owner: str | None = typer.Option(None, "--owner", help="Only this person's jobs. " + PERSON_HELP)
              ) -> None:
    """The bot's jobs and their next times.

    Those not done (active, paused or failed), oldest first."""
    try:
        name = bot_name(bot)
    except ConfigError as exc:
        refuse(str(exc))

    async def work(store: Store) -> _Listing | str:
        try:
            owner_id = await resolve_person(store, owner) if owner is not None else None
        except UnknownPerson as exc:
            return str(exc)
        return _Listing(name, await store.list_jobs(name, owner_id=owner_id), owner_id)

    listing = with_store(work)
    if isinstance(listing, str):
        _fail(listing)
    if not listing.jobs:
        whose = f" of person {listing.owner}" if listing.owner is not None else ""
        typer.echo(f"Bot {listing.bot!r} has no jobs{whose}.")
        return
    for job in listing.jobs:
        typer.echo(printable(f"{describe(job)} · {job.kind}, owner {job.owner_id}"))


def _job(job_id: int) -> JobRecord:
    async def work(store: Store) -> JobRecord | None:
        return await store.get_job(job_id)

    job = with_store(work)
    if job is None:
        _fail(f"no job {job_id} (`hermes-gateway jobs list` shows them).")
    return job


def _open(job_id: int, doing: str) -> JobRecord:
    job = _job(job_id)
    try:
        check_open(job, doing)
    except Refused as exc:
        _fail(str(exc))
    return job


@app.command()
def show(job_id: int = typer.Argument(..., help=ID_HELP)) -> None:
    """Every field of a job; times in the job's zone and in UTC."""
    typer.echo(render_job(_job(job_id)))


def _change(change: Callable[[Store], Awaitable[str]]) -> None:
    """Say what the change did, or fail with why it did not (`operating.Refused`)."""
    async def work(store: Store) -> str | Refused:
        try:
            return await change(store)
        except Refused as exc:
            return exc

    said = with_store(work)
    if isinstance(said, Refused):
        _fail(str(said))
    typer.echo(printable(said))


@app.command()
def pause(job_id: int = typer.Argument(..., help=ID_HELP)) -> None:
    """Stop a job until it is resumed.

    A run already under way finishes."""
    job = _open(job_id, "pause")
    _change(lambda store: operating.pause(store, job))


@app.command()
def resume(job_id: int = typer.Argument(..., help=ID_HELP)) -> None:
    """Start a paused (or failed) job again.

    Next at its schedule's first time from now, in the job's zone; its failures start again from zero."""
    job = _open(job_id, "resume")
    _change(lambda store: operating.resume(store, job, _now()))


@app.command()
def remove(job_id: int = typer.Argument(..., help=ID_HELP),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Delete a job.

    Its runs so far stay in the conversations they were written into."""
    job = _job(job_id)
    if not yes:
        typer.confirm(printable(f"Remove {describe(job)}?"), abort=True)
    _change(lambda store: operating.remove(store, job))


@app.command()
def run(job_id: int = typer.Argument(..., help=ID_HELP)) -> None:
    """Make a job due now.

    A paused one becomes active; a running gateway sends it within a second, and its schedule goes on from
    then. A one-time job is then done."""
    job = _open(job_id, "run")
    _change(lambda store: operating.run_now(store, job, _now()))
