"""Shared by the kanban tests: a store on SQLite or on a fresh PostgreSQL schema, and a settable clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from postgres import PG_URL, fresh_schema

from storage.store import SqlStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@asynccontextmanager
async def database(backend: str, tmp_path: Path) -> AsyncIterator[Callable[..., SqlStore]]:
    """A factory of stores on one database (several stores = several processes sharing it)."""
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'kanban.db'}"
        yield lambda **kw: SqlStore(url, **kw)
        return
    assert PG_URL
    async with fresh_schema() as schema:
        options: dict[str, Any] = {"connect_args": {"server_settings": {"search_path": schema}}}
        yield lambda **kw: SqlStore(PG_URL, engine_options=options, **kw)
