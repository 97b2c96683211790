"""A test's fresh SQLite database at the schema's head, without running every migration for each test: the
first database a test process asks for is migrated by the store's own `init`, the next ones start as copies of
it. From an empty file the migrations take about a fifth of a second; a copy, a millisecond. The store then
opens the copy as it opens any database already at head.

Only the helpers that want "a database as the gateway leaves it" use this (`engine_harness.Engine`,
`state_backends.sql_store`); the tests of the migrations and of a first start begin from empty files."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from storage.engine import is_memory_sqlite, normalize_url
from storage.store import SqlStore

_head: Path | None = None  # this process's migrated database, copied for each test


async def at_head(url: str) -> str:
    """`url`, after making the SQLite file it names a copy of a database at the schema's head if that file is
    not there yet; any other URL (PostgreSQL, an in-memory SQLite, a file there already) is left alone."""
    missing = _missing_file(url)
    if missing is not None:
        _copy(await _migrated(), missing)
    return url


def _missing_file(url: str) -> Path | None:
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite" or is_memory_sqlite(parsed) or parsed.query.get("uri") == "true":
        return None
    path = Path(parsed.database or "").expanduser()
    return None if path.exists() else path


def _copy(head: Path, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(head, path)


async def _migrated() -> Path:
    """This process's database at head, made once (two tests racing to make it each make one: no harm)."""
    global _head
    if _head is None:
        folder = Path(tempfile.mkdtemp(prefix="hermes-schema-"))
        store = SqlStore(f"sqlite+aiosqlite:///{folder / 'head.db'}")
        await store.init()
        await store.close()  # the last connection's close checkpoints the write-ahead log into the file
        _head = folder / "head.db"
    return _head
