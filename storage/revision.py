"""Where the database's schema stands, answered without importing Alembic.

A gateway restarting on an up-to-date database never needs Alembic, whose import costs start-up time and
about 10 MB that stay resident for the life of the process. Revision ids are the four-digit prefixes of the
files in `migrations/versions/`, each naming the one before it (a unit test pins the convention), so the
newest file is the head. `upgrade_in_child` applies migrations in a short-lived process, on another core,
while this one loads the model SDKs; the schema work then leaves nothing behind here.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"
_NUMBERED = re.compile(r"^(\d{4})_\w+\.py$")
URL_VARIABLE = "HERMES_MIGRATE_URL"  # the child's database URL: the environment, not argv, which `ps` shows


def head() -> str:
    """The newest revision id: the highest numbered file in `migrations/versions/`."""
    ids = [match.group(1) for path in VERSIONS_DIR.iterdir() if (match := _NUMBERED.match(path.name))]
    if not ids:
        raise RuntimeError(f"no migrations in {VERSIONS_DIR}")
    return max(ids)


async def is_current(engine: AsyncEngine) -> bool:
    """Whether the database is at `head()`; a database never migrated is not."""
    async with engine.connect() as conn:
        try:
            version = (await conn.exec_driver_sql("SELECT version_num FROM alembic_version")).scalar()
        except DBAPIError:  # no version table yet
            return False
    return version == head()


async def has_schema(engine: AsyncEngine) -> bool:
    """Whether the database was ever migrated (at any revision): it has the version table."""
    async with engine.connect() as conn:
        try:
            await conn.exec_driver_sql("SELECT version_num FROM alembic_version")
        except DBAPIError:
            return False
    return True


async def upgrade_in_child(url: str) -> bool:
    """Run `python -m storage.migrate` on `url`; True when it succeeded. A failure is not reported here:
    the caller's own in-process upgrade then meets the same problem and reports it as it always does."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "storage.migrate", env={**os.environ, URL_VARIABLE: url},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await process.wait() == 0
