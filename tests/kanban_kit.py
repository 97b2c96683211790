"""Shared by the kanban tests: a store on SQLite or on a fresh PostgreSQL schema, and a settable clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fakes.fake_llm import Reply
from postgres import empty_database
from schema_kit import at_head

from hermes_engine.config import BotProfile, KanbanSettings, load_profile
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
    async with empty_database(backend, str(tmp_path / "kanban.db")) as (url, options):
        url = await at_head(url)  # SQLite: a copy of this process's migrated database
        yield lambda **kw: SqlStore(url, engine_options=options, **kw)


# -- the board in chat, as the platform tests drive it -----------------------------------------------------

QUIET_BOARD = KanbanSettings(enabled=False)  # /kanban and the tool without a dispatcher running the cards


def shipped_profile(folder: str) -> BotProfile:
    """A bot profile as the repository ships it under bots/."""
    return load_profile(str(Path(__file__).resolve().parents[1] / "bots" / folder))


def board_markdown(*titles: str) -> str:
    """The board of a fresh database holding these todo cards, as the engine writes it (Markdown)."""
    return "\n".join(["**📋 todo**", *(f"- #{i} {t}" for i, t in enumerate(titles, start=1))])


def planning(*tasks: str) -> Callable[[Any], Reply]:
    """A model that puts `tasks` on the board with the `kanban` tool, then says so."""
    def respond(request: Any) -> Reply:
        if not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[("kanban", {"tasks": list(tasks)})])
        return Reply(text="On the board.")
    return respond
