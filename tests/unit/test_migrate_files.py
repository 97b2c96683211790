"""`hermes-gateway migrate-files`: a file home's memory, USER.md, proposals and pairing move into the database
once (a second run changes nothing and says so, an interrupted run finishes), the files stay in place, and
the engine then reads the same memory and approvals from the database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from skills_kit import skill_md
from state_backends import DATABASES, database_url_sync
from typer.testing import CliRunner

from hermes_engine.memory import FileMemoryStore, MemoryBook, MemoryOwner
from hermes_engine.memory.database import DatabaseMemoryStore
from hermes_engine.policy.pairing import Pairing
from hermes_engine.policy.pairing_db import DatabasePairingStore
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.database import DatabaseSkillLibrary
from hermes_engine.skills.files import FileSkillLibrary
from hermes_engine.skills.library import library_root
from hermes_gateway.cli.main import app
from hermes_gateway.cli.state import store_on_thread

ALICE, GROUP = MemoryOwner.person(1), MemoryOwner.shared("telegram:bot:group:-100")


def file_home(home: Path) -> None:
    async def fill() -> None:
        book = MemoryBook(FileMemoryStore.for_home(home))
        await book.add(ALICE, "memory", "Deploys with Nix")
        await book.add(ALICE, "memory", "Uses Postgres 16")
        await book.add(ALICE, "user", "Prefers short answers")
        await book.add(GROUP, "memory", "The group ships on Fridays")
        await book.store.write_pending(ALICE, [{"id": "p1", "target": "memory"}])

    asyncio.run(fill())
    pairing = Pairing.for_home(home)
    pairing.approve_user("telegram", "77", "Mallory")
    pairing.request("discord", "5", "Eve")
    (home / "memories" / "3").mkdir()
    (home / "memories" / "3" / "USER.md").write_bytes(b"caf\xe9\n")  # not UTF-8: reported, never guessed
    library = FileSkillLibrary(library_root(home, "helper"))
    library.apply_sync(SkillChange("create", "pg-dump", content=skill_md("pg-dump"), category="db"))
    library.apply_sync(SkillChange("write_file", "pg-dump", file_path="scripts/dump.sh", file_content="pg_dump\n"))
    library.apply_sync(SkillChange("create", "old-one", content=skill_md("old-one"), category="db"))
    library.archive_sync("old-one")
    library.backup_sync()  # a binary tar.gz: history travels too
    FileSkillLibrary(library_root(home, "other")).apply_sync(
        SkillChange("create", "tea", content=skill_md("tea"), category="life"))


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with database_url_sync(request.param, tmp_path) as url:
        monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("HERMES_DATABASE_URL", url)
        yield url


def migrate(*options: str) -> str:
    result = CliRunner().invoke(app, ["migrate-files", *options])
    assert result.exit_code == 0, result.output
    return result.output


def test_migrate_files_moves_everything_once_and_the_engine_reads_the_same(database, tmp_path):
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    file_home(home)
    before = sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file() and ".lock" not in p.name)

    first = migrate("--bot", "helper")
    # SKILL.md x2, script, backup, and the history of the three writes
    assert "skill files (helper): 7 moved" in first and "(other)" not in first
    assert "memory documents: 4 moved, 0 already in the database" in first
    assert "pairing approvals: 1 moved" in first and "pairing codes: 1 moved" in first
    assert "skipped (cannot be read)" in first and "USER.md" in first and "not UTF-8" in first
    # SQLite reads files unless told otherwise; PostgreSQL reads the database
    assert ("set HERMES_STATE_BACKEND=database" in first) == database.startswith("sqlite")
    assert "left in place" in first
    assert sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file() and ".lock" not in p.name) == before

    second = migrate()
    assert "skill files (helper): 0 moved, 7 already" in second
    assert "skill files (other): 2 moved" in second  # every library when no --bot is given
    assert "memory documents: 0 moved, 4 already in the database" in second
    assert "pairing approvals: 0 moved, 1 already" in second
    assert "Nothing changed" in migrate()

    with store_on_thread(database) as (store, loop):
        async def read() -> tuple[list[str], list[str], list[str], list[dict]]:
            memory = DatabaseMemoryStore(store, store)
            return (await memory.read(ALICE, "memory"), await memory.read(ALICE, "user"),
                    await memory.read(GROUP, "memory"), await memory.read_pending(ALICE))

        mine, profile, shared, pending = asyncio.run_coroutine_threadsafe(read(), loop).result()
        assert mine == ["Deploys with Nix", "Uses Postgres 16"] and profile == ["Prefers short answers"]
        assert shared == ["The group ships on Fridays"] and pending == [{"id": "p1", "target": "memory"}]
        pairing = Pairing(DatabasePairingStore(store, loop))
        assert pairing.is_approved("telegram", "77") and [r.user_id for r in pairing.pending()] == ["5"]
        skills = DatabaseSkillLibrary(tmp_path / "copy", store, store, "helper", loop=loop)
        skill = skills.get_sync("pg-dump")
        assert skill is not None and skill.category == "db" and skill.files == ("scripts/dump.sh",)
        assert skills.read_file_sync("pg-dump", "scripts/dump.sh") == "pg_dump\n"
        assert [s.name for s in skills.list_sync()] == ["pg-dump"] and skills.archived() == ["db/old-one"]
        assert [p.read_bytes() for p in skills.backups()] == \
               [p.read_bytes() for p in FileSkillLibrary(library_root(home, "helper")).backups()]

        # an interrupted run finishes; a document the gateway changed since is kept as the database has it
        asyncio.run_coroutine_threadsafe(store.delete_documents("memory", "1/USER.md"), loop).result()
        asyncio.run_coroutine_threadsafe(
            DatabaseMemoryStore(store, store).write(GROUP, "memory", ["Changed by the gateway"]), loop).result()
    third = migrate()
    assert "memory documents: 1 moved, 2 already in the database" in third
    assert "kept the database's copy" in third and "shared" in third


def test_migrate_files_on_an_empty_home_says_there_was_nothing(database, tmp_path):
    assert "No memory, USER.md, pairing or skill files were found." in migrate()
