"""An id names one row for good: a forgotten person's id never goes to the next person, on SQLite (AUTOINCREMENT,
migration 0016) and PostgreSQL (sequences). Migration 0016 rebuilds SQLite's tables, so it is also checked to
keep every row and every reference of a database made before it."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from postgres import BACKENDS, empty_database
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import NullPool

from hermes_engine.ports.conversation import Message
from storage import migrate
from storage.engine import make_engine
from storage.store import SqlStore

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REBUILT = ("people", "accounts", "sessions", "messages", "compactions", "inbound_events", "goals",
           "kanban_cards", "kanban_events")

# A database at 0015 as a gateway leaves it: every table that refers to another holds rows that do, and the
# person and card with the largest ids are referred to most (a drop of their table would cascade to them).
ROWS_AT_0015: dict[str, list[dict[str, Any]]] = {
    "people": [{"id": 1, "display_name": "Ann", "merged_into": None, "created_at": NOW},
               {"id": 2, "display_name": "Ann (slack)", "merged_into": 1, "created_at": NOW},
               {"id": 3, "display_name": "Bob", "merged_into": None, "created_at": NOW}],
    "accounts": [{"id": 1, "person_id": 1, "platform": "telegram", "account": "bot", "user_id": "11",
                  "display_name": "Ann", "created_at": NOW},
                 {"id": 2, "person_id": 3, "platform": "telegram", "account": "bot", "user_id": "33",
                  "display_name": "Bob", "created_at": NOW}],
    "sessions": [{"id": 1, "key": "telegram:bot:dm:11", "bot": "b", "parent_id": None, "model": None,
                  "state": {"owner": 1}, "created_at": NOW},
                 {"id": 2, "key": "telegram:bot:dm:33", "bot": "b", "parent_id": None, "model": None,
                  "state": {"owner": 3}, "created_at": NOW},
                 {"id": 3, "key": "telegram:bot:dm:33", "bot": "b", "parent_id": 2, "model": "m",
                  "state": {"owner": 3}, "created_at": NOW}],
    "messages": [{"id": i, "session_id": session, "person_id": person, "role": role, "content": text,
                  "is_error": False, "created_at": NOW}
                 for i, (session, person, role, text) in enumerate([
                     (1, 1, "user", "ann asks about zebras"), (1, None, "assistant", "zebras are striped"),
                     (3, 3, "user", "bob asks about otters"), (3, None, "assistant", "otters hold hands")], 1)],
    "compactions": [{"id": 1, "session_id": 3, "parent_id": None, "first_message_id": 3, "last_message_id": 4,
                     "summary": "bob and otters", "reason": "agent", "tokens_before": 9, "tokens_after": 3,
                     "created_at": NOW}],
    "inbound_events": [{"id": 1, "platform": "telegram", "event_id": "e1", "session_key": "telegram:bot:dm:33",
                        "status": "done", "payload": {"text": "hi"}, "created_at": NOW}],
    "goals": [{"id": 1, "session_key": "telegram:bot:dm:33", "bot": "b", "session_id": 3, "text": "learn otters",
               "status": "active", "turns_used": 1, "tokens_used": 5, "verdicts": [], "target": {},
               "created_at": NOW, "updated_at": NOW}],
    "link_codes": [{"code": "BOB123", "person_id": 3, "expires_at": NOW}],
    "usage_days": [{"bot": "b", "person_id": 3, "day": date(2026, 1, 1), "turns": 2, "tokens": 40}],
    "due_reviews": [{"bot": "b", "session_id": 3, "session_key": "telegram:bot:dm:33", "person_id": 3,
                     "memory": True, "skill": False, "scope": {}, "version": 1, "due_at": NOW}],
    "kanban_cards": [{"id": i, "title": title, "body": "", "status": "todo", "profile": "b", "parent_id": parent,
                      "goal_mode": False, "origin": {"person": 3}, "attempts": 0, "failures": 0,
                      "created_at": NOW, "updated_at": NOW, "owner_id": 3}
                     for i, (title, parent) in enumerate([("plan", None), ("part", 1), ("last", 1)], 1)],
    "kanban_dependencies": [{"card_id": 2, "depends_on": 3}],
    "kanban_events": [{"id": 1, "card_id": 3, "actor": "cli", "kind": "created", "reason": "", "handoff": {},
                       "created_at": NOW}],
}


def _typed(name: str, value: Any) -> sa.ColumnClause[Any]:
    if isinstance(value, (dict, list)):
        return sa.column(name, sa.JSON())
    if isinstance(value, datetime):
        return sa.column(name, sa.DateTime(timezone=True))
    if isinstance(value, date):
        return sa.column(name, sa.Date())
    return sa.column(name)


async def _fill(conn: AsyncConnection) -> None:
    for table, rows in ROWS_AT_0015.items():
        columns = [_typed(name, value) for name, value in rows[0].items()]
        await conn.execute(sa.table(table, *columns).insert(), rows)
    if conn.dialect.name == "postgresql":  # as if the sequences had given the ids
        for table in REBUILT:
            await conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), MAX(id)) FROM {table}")


async def _contents(conn: AsyncConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {table: [tuple(row) for row in (await conn.exec_driver_sql(
        f'SELECT * FROM "{table}" ORDER BY 1, 2')).all()] for table in ROWS_AT_0015}


async def _sqlite_objects(conn: AsyncConnection) -> set[tuple[str, str, str]]:
    """Indexes, triggers and tables with the text that made them, but for the table statements, which 0016
    changes (they are compared through their rows and `PRAGMA foreign_key_list`)."""
    rows = (await conn.exec_driver_sql(
        "SELECT type, name, COALESCE(sql, '') FROM sqlite_master WHERE name != 'sqlite_sequence'")).all()
    return {(kind, name, sql if kind != "table" else "") for kind, name, sql in rows}


async def _sqlite_references(conn: AsyncConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {table: sorted(tuple(row)[2:] for row in (await conn.exec_driver_sql(
        f'PRAGMA foreign_key_list("{table}")')).all()) for table in ROWS_AT_0015}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _engine(url: str, options: dict[str, Any]) -> AsyncEngine:
    return make_engine(url, poolclass=NullPool, **options)


async def test_a_forgotten_persons_id_never_goes_to_the_next_person(backend: str, tmp_path: Path) -> None:
    async with empty_database(backend, str(tmp_path / "hermes.db")) as (url, options):
        async with SqlStore(url, engine_options=options) as store:
            ann = await store.resolve_account("telegram", "bot", "11", "Ann")
            bob = await store.resolve_account("telegram", "bot", "22", "Bob")
            assert await store.forget_person(bob.person_id) is not None
            cat = await store.resolve_account("telegram", "bot", "33", "Cat")
            assert cat.person_id not in (ann.person_id, bob.person_id)
            assert cat.person_id > bob.person_id


async def test_upgrading_a_database_made_before_0016_keeps_every_row_and_every_reference(
        backend: str, tmp_path: Path) -> None:
    async with empty_database(backend, str(tmp_path / "old.db")) as (url, options):
        engine = _engine(url, options)
        try:
            await migrate.upgrade(engine, "0015")
            async with engine.begin() as conn:
                await _fill(conn)
            async with engine.connect() as conn:
                before = await _contents(conn)
                if backend == "sqlite":
                    objects, references = await _sqlite_objects(conn), await _sqlite_references(conn)
            await migrate.upgrade(engine, "0016")
            async with engine.connect() as conn:
                assert await migrate.current_revision(engine) == "0016"
                assert await _contents(conn) == before
                if backend == "sqlite":
                    assert (await conn.exec_driver_sql("PRAGMA foreign_key_check")).all() == []
                    assert await _sqlite_references(conn) == references
                    assert await _sqlite_objects(conn) == objects
        finally:
            await engine.dispose()
        async with SqlStore(url, engine_options=options) as store:  # full-text search still follows new messages
            await store.append_message(3, Message(role="user", content="bob asks about beavers"), person_id=3)
            hits = await store.search_messages(person_id=3, bot="b", query="beavers")
            assert [hit.session_id for hit in hits] == [3]
            assert await store.search_messages(person_id=3, bot="b", query="otters")


async def test_after_the_upgrade_a_deleted_rows_id_is_not_given_again(backend: str, tmp_path: Path) -> None:
    async with empty_database(backend, str(tmp_path / "old.db")) as (url, options):
        engine = _engine(url, options)
        try:
            await migrate.upgrade(engine, "0015")
            async with engine.begin() as conn:
                await _fill(conn)
            await migrate.upgrade(engine, "head")
            if backend == "sqlite":
                async with engine.connect() as conn:
                    sequences = dict((await conn.exec_driver_sql("SELECT name, seq FROM sqlite_sequence")).all())
                    largest = {table: (await conn.exec_driver_sql(f'SELECT MAX(id) FROM "{table}"')).scalar()
                               for table in REBUILT}
                assert sequences == largest
        finally:
            await engine.dispose()
        async with SqlStore(url, engine_options=options) as store:
            assert await store.forget_person(3) is not None  # Bob, the largest id
            cat = await store.resolve_account("telegram", "bot", "44", "Cat")
            assert cat.person_id == 4
            session = await store.new_session("telegram:bot:dm:44", "b")
            assert session.id == 4  # Bob's sessions 2 and 3 went with him


async def test_an_upgrade_that_would_leave_a_row_pointing_nowhere_is_rolled_back_whole(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    engine = _engine(url, {})
    try:
        await migrate.upgrade(engine, "0015")
        async with engine.begin() as conn:
            await _fill(conn)
        async with engine.connect() as conn:  # a row written with foreign keys off, by some other tool
            await conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
            await conn.exec_driver_sql("UPDATE accounts SET person_id = 99 WHERE id = 2")
            await conn.commit()
            before = await _contents(conn)
        with pytest.raises(migrate.DanglingReferences, match=r"^Migration rolled back, nothing changed: 1 row .*"
                                                               r"\(accounts → people\)\.$"):
            await migrate.upgrade(engine, "head")
        async with engine.connect() as conn:
            assert await migrate.current_revision(engine) == "0015"
            assert await _contents(conn) == before
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
    finally:
        await engine.dispose()


async def test_the_store_runs_with_foreign_keys_on_after_migrating_its_own_connection() -> None:
    async with SqlStore("sqlite://") as store:  # in memory: the migration and the store share one connection
        async with store.engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
