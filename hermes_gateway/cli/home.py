"""Operator commands work on the service's data and never make it.

An operator who runs a command as another user, or without the service's environment, meets another
`HERMES_HOME` than the service's. A command that made an empty home and database there would answer as if
they were the service's ("no one is known yet", "no pending request has that code"); so every operator
command asks `checked_settings` first, which says in one sentence that there is no data there (or that the
home cannot be used) and exits with status 2, creating nothing, and opens the store with `open_existing`,
which never creates a database either.

The data is the gateway's database: on SQLite its file (`hermes.db` under the home, unless
`HERMES_DATABASE_URL` names another), on PostgreSQL the gateway's tables in the database.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import typer

from hermes_engine.config import Settings, load_settings
from hermes_engine.errors import ConfigError
from hermes_engine.ports.storage import Store

T = TypeVar("T")
RUN_AS_THE_SERVICE = "Run the command as the service does: see deploy/README.md."


def refuse(sentence: str) -> NoReturn:
    typer.echo(f"Error: {sentence}", err=True)
    raise typer.Exit(2)


def checked_settings() -> Settings:
    """The settings of an operator command whose home holds the service's data; otherwise the sentence
    that says why not, and exit status 2."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        refuse(str(exc))
    problem = data_problem(settings)
    if problem is not None:
        refuse(problem)
    return settings


def open_existing(settings: Settings) -> Store:
    """The gateway's store, opened (by its `init`) only if the database is there; `storage.errors.NoDatabase`
    otherwise, which `no_database` turns into the sentence."""
    from storage.store import SqlStore

    size = settings.database_pool_size
    pool = {"pool_size": size, "max_overflow": size} if size and is_postgres(settings) else {}
    return SqlStore(settings.db_url, engine_options=pool, create=False)


def with_store(work: Callable[[Store], Awaitable[T]]) -> T:
    """Run `work` against the gateway's database (opened, migrated, closed), which must be there."""
    from sqlalchemy.exc import DBAPIError

    from storage.errors import NoDatabase

    settings = checked_settings()

    async def run() -> T:
        store = open_existing(settings)
        try:
            await store.init()
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except NoDatabase as exc:  # gone since the check a moment ago
        refuse(no_database(settings, str(exc)))
    except DBAPIError as exc:  # not a database, damaged, locked for longer than the busy timeout
        refuse(f"the gateway's database cannot be used ({_first_line(exc)}) — {RUN_AS_THE_SERVICE}")


def no_database(settings: Settings, missing: str) -> str:
    """The sentence for a database found missing at its opening (`missing`: what the store did not find)."""
    if is_postgres(settings):
        return f"no data in the database of HERMES_DATABASE_URL ({missing}) — is this the service's database? " \
               f"{RUN_AS_THE_SERVICE}"
    return f"no data at HERMES_HOME={settings.home} ({missing}) — is this the service's home? {RUN_AS_THE_SERVICE}"


def data_problem(settings: Settings) -> str | None:
    """Why the gateway's data cannot be used here, in one sentence; None when it can."""
    home = settings.home
    unreadable = f"HERMES_HOME={home} cannot be read by user {_user()} (permission denied) — {RUN_AS_THE_SERVICE}"
    try:
        if home.exists() and not home.is_dir():
            return f"HERMES_HOME={home} is a file, not a folder — is this the service's home? {RUN_AS_THE_SERVICE}"
        if home.is_dir() and not os.access(home, os.R_OK | os.X_OK):
            return unreadable
        if not is_postgres(settings):
            return _sqlite_problem(settings)
    except PermissionError:  # a folder above it is closed to this user
        return unreadable
    return asyncio.run(_postgres_problem(settings))


def is_postgres(settings: Settings) -> bool:
    return settings.db_url.split(":", 1)[0].split("+", 1)[0] in ("postgres", "postgresql")


def _sqlite_problem(settings: Settings) -> str | None:
    from storage.engine import is_memory_sqlite, normalize_url

    url = normalize_url(settings.db_url)
    if is_memory_sqlite(url):
        return None
    path = Path((url.database or "").removeprefix("file:")).expanduser()
    default = path == settings.home / "hermes.db"
    if not path.exists():
        if default:
            return no_database(settings, "no hermes.db")
        return f"no data at HERMES_DATABASE_URL (no {path}) — is this the service's database? {RUN_AS_THE_SERVICE}"
    where = f"HERMES_HOME={settings.home}" if default else f"the folder of HERMES_DATABASE_URL ({path.parent})"
    if not path.is_file():
        return f"{path} is not a database file — is this the service's home? {RUN_AS_THE_SERVICE}"
    # SQLite writes beside its file (the write-ahead log), so the folder and the file must both be writable.
    if not os.access(path.parent, os.R_OK | os.W_OK | os.X_OK) or not os.access(path, os.R_OK | os.W_OK):
        return f"{where} is not writable by user {_user()}, as its database needs — {RUN_AS_THE_SERVICE}"
    return None


async def _postgres_problem(settings: Settings) -> str | None:
    from storage.errors import NoDatabase

    store = open_existing(settings)
    try:
        await store.init()
    except NoDatabase as exc:
        return no_database(settings, str(exc))
    except Exception as exc:  # noqa: BLE001 - unreachable, refused, wrong password: each is one sentence
        return f"the database of HERMES_DATABASE_URL cannot be opened ({_first_line(exc)}) — {RUN_AS_THE_SERVICE}"
    finally:
        await store.close()
    return None


def _first_line(exc: BaseException) -> str:
    """The driver's words (without SQLAlchemy's wrapping), first line, secrets masked."""
    from hermes_engine.secrets import redact

    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip()
    return redact(text.splitlines()[0]) if text else type(cause).__name__


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a container's uid without a passwd entry
        return str(os.geteuid())
