"""The schema's revision is known without Alembic, so a gateway on an up-to-date database never loads it,
and a new database is brought to head by a short-lived child process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from storage import migrate, revision
from storage.engine import make_engine

ROOT = Path(__file__).resolve().parents[2]


def test_revision_ids_are_the_file_numbers_each_naming_the_one_before() -> None:
    files = sorted(revision.VERSIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.py"))
    previous = None
    for path in files:
        text = path.read_text(encoding="utf-8")
        declared = re.search(r'^revision: str = "([^"]+)"', text, re.M)
        down = re.search(r'^down_revision: [^=]+= (None|"([^"]+)")', text, re.M)
        assert declared and declared.group(1) == path.name[:4], path.name
        assert down and down.group(2) == previous, path.name
        previous = declared.group(1)
    assert revision.head() == previous == migrate.head_revision()


async def test_a_database_is_current_only_at_head(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
    try:
        assert not await revision.is_current(engine)  # never migrated
        await migrate.upgrade(engine, "0001")
        assert not await revision.is_current(engine)
        await migrate.upgrade(engine)
        assert await revision.is_current(engine)
    finally:
        await engine.dispose()


async def test_the_child_process_brings_a_new_database_to_head(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'new' / 'hermes.db'}"
    assert await revision.upgrade_in_child(url)
    assert await migrate.current_revision(url) == migrate.head_revision()


async def test_a_child_that_cannot_migrate_says_so() -> None:
    assert not await revision.upgrade_in_child("postgresql+asyncpg://nobody@127.0.0.1:1/none")


def test_a_store_opening_an_up_to_date_database_never_imports_alembic(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}"
    migrate.upgrade_sync(url)
    script = (
        "import asyncio, sys\n"
        "from storage.store import SqlStore\n"
        "async def main():\n"
        f"    async with SqlStore({url!r}) as store:\n"
        "        await store.active_session('k', 'bot')\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]"
