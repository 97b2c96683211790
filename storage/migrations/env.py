"""Alembic environment for Hermes Gateway.

Two ways in:
- from code (`storage.migrate.upgrade`): a live connection arrives in `config.attributes["connection"]`,
  already inside the migration transaction and holding the migration lock; run on it, commit nothing;
- from the `alembic` command line: build an async engine for the URL (see `storage/alembic.ini`), take the
  same lock, run, commit.
Logging is configured from the ini file only on the command line, never inside the application.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from pathlib import Path

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

import storage.blob_models  # noqa: F401 - its rows are on Base too
import storage.dashboard_rows  # noqa: F401
from storage.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: object) -> None:
    from storage.migrate import include_object

    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        include_object=include_object,
        **kwargs,  # type: ignore[arg-type]
    )


def _run_on(connection: Connection) -> None:
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def _cli_url() -> str:
    url = (config.attributes.get("url")
           or context.get_x_argument(as_dictionary=True).get("url")
           or os.environ.get("HERMES_DATABASE_URL")
           or config.get_main_option("sqlalchemy.url"))
    if not url:
        home = Path(os.environ.get("HERMES_HOME") or "~/.hermes-gateway").expanduser()
        url = f"sqlite+aiosqlite:///{home / 'hermes.db'}"
    return url


async def _run_cli_online(url: str) -> None:
    from storage.engine import make_engine
    from storage.migrate import migration_transaction

    engine = make_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn, migration_transaction(conn):
            await conn.run_sync(_run_on)
    finally:
        await engine.dispose()


def _run_cli_offline(url: str) -> None:
    from storage.engine import normalize_url

    _configure(url=normalize_url(url), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run_on(connection)
else:
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    if context.is_offline_mode():
        _run_cli_offline(_cli_url())
    else:
        asyncio.run(_run_cli_online(_cli_url()))
