"""A home as the service leaves it: the folder with its database. Operator commands refuse any other
(`hermes_gateway.cli.home`), so a test that runs them on a home of its own makes it with `service_home`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from schema_kit import at_head

from storage.store import SqlStore


async def make_service_home(home: Path) -> Path:
    store = SqlStore(await at_head(f"sqlite+aiosqlite:///{home / 'hermes.db'}"))  # the folder too, as a first start
    await store.init()
    await store.close()
    return home


def service_home(home: Path) -> Path:
    """`home` with the gateway's SQLite database in it (made, migrated, closed)."""
    return asyncio.run(make_service_home(home))
