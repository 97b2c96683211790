"""`SqlStore(url, create=False)`: the store of an operator command, which opens the gateway's database only
if it is there, and never makes one (on SQLite no file and no folder, on PostgreSQL no tables)."""

from __future__ import annotations

import pytest
from postgres import BACKENDS, empty_database

from storage.errors import NoDatabase
from storage.store import SqlStore


async def test_a_missing_sqlite_file_is_no_database_and_stays_missing(tmp_path):
    home = tmp_path / "home"
    with pytest.raises(NoDatabase, match="hermes.db"):
        await SqlStore(f"sqlite+aiosqlite:///{home / 'hermes.db'}", create=False).init()
    assert not home.exists()


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


async def test_a_database_without_the_schema_is_no_database_and_is_not_migrated(backend, tmp_path):
    async with empty_database(backend, str(tmp_path / "hermes.db")) as (url, options):
        if backend == "sqlite":
            (tmp_path / "hermes.db").touch()  # a file that is not the gateway's database (yet)
        with pytest.raises(NoDatabase, match="no tables of the gateway"):
            await SqlStore(url, engine_options=options, create=False).init()
        made = SqlStore(url, engine_options=options)
        await made.init()  # the gateway's own start makes the schema ...
        await made.close()
        store = SqlStore(url, engine_options=options, create=False)
        await store.init()  # ... which an operator command then opens
        try:
            assert await store.pending_inbound(None) == []
            assert await store.record_inbound("telegram", "1:2:3", {"purpose": "turn"})
        finally:
            await store.close()
