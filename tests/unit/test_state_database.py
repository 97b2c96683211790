"""Memory, USER.md and pairing in the database: replicas sharing one database lose no update, a stale write
is refused rather than applied, and the backend is chosen by the database unless a setting says otherwise."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from home_kit import service_home
from skills_kit import skill_md
from state_backends import DATABASES, database_url, database_url_sync, sql_store

from hermes_engine.config import MemorySettings, Settings
from hermes_engine.errors import ConfigError
from hermes_engine.memory import MemoryBook, MemoryOwner
from hermes_engine.memory.database import DatabaseMemoryStore
from hermes_engine.policy.pairing import Pairing
from hermes_engine.policy.pairing_db import DatabasePairingStore
from hermes_engine.skills.contract import SkillChange
from hermes_engine.skills.database import DatabaseSkillLibrary, library_files
from hermes_engine.skills.usage import DAYS_KEPT, DayUse, UsageLog
from hermes_gateway.cli.state import store_on_thread
from storage.store import SqlStore

ALICE = MemoryOwner.person(1)


@pytest.fixture(params=DATABASES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_two_replicas_adding_to_one_persons_memory_lose_nothing(kind, tmp_path):
    async with database_url(kind, tmp_path) as url:
        first, second = SqlStore(url), SqlStore(url)  # two replicas: no lock or connection in common
        await first.init()
        await second.init()
        try:
            books = [MemoryBook(DatabaseMemoryStore(s, s)) for s in (first, second)]
            jobs = [books[i % 2].add(ALICE, "memory", f"Fact {i}") for i in range(16)]
            jobs += [books[i % 2].add(ALICE, "user", f"Likes {i}") for i in range(6)]
            assert all(r.ok and r.changed for r in await asyncio.gather(*jobs))
            reader = DatabaseMemoryStore(first, first)
            assert sorted(await reader.read(ALICE, "memory")) == sorted(f"Fact {i}" for i in range(16))
            assert sorted(await reader.read(ALICE, "user")) == sorted(f"Likes {i}" for i in range(6))
        finally:
            await first.close()
            await second.close()


async def test_a_write_based_on_a_stale_read_is_refused_and_keeps_the_newer_document(kind, tmp_path):
    async with sql_store(kind, tmp_path) as store:
        slow, fast = DatabaseMemoryStore(store, store), DatabaseMemoryStore(store, store)
        await slow.write(ALICE, "memory", ["Old"])
        await slow.read(ALICE, "memory")
        await fast.read(ALICE, "memory")
        await fast.write(ALICE, "memory", ["Old", "Newer"])
        with pytest.raises(OSError, match="another writer"):
            await slow.write(ALICE, "memory", ["Old", "Lost?"])
        assert await fast.read(ALICE, "memory") == ["Old", "Newer"]
        # the book turns the refusal into a clear answer that saved nothing, and a retry lands
        result = await MemoryBook(slow, MemorySettings()).add(ALICE, "memory", "Retried")
        assert result.ok and await fast.read(ALICE, "memory") == ["Old", "Newer", "Retried"]


async def test_erase_removes_the_persons_documents_and_proposals_only(kind, tmp_path):
    async with sql_store(kind, tmp_path) as store:
        memory = DatabaseMemoryStore(store, store)
        bob = MemoryOwner.person(11)  # "1" must not match "11/"
        for owner in (ALICE, bob):
            await memory.write(owner, "user", ["Likes tea"])
            await memory.write_pending(owner, [{"id": "p1"}])
        assert await memory.erase(ALICE) and not await memory.erase(ALICE)
        assert await memory.read(ALICE, "user") == [] and await memory.read_pending(ALICE) == []
        assert await memory.read(bob, "user") == ["Likes tea"] and await memory.read_pending(bob) == [{"id": "p1"}]


@pytest.fixture
def replicas(kind: str, tmp_path: Path) -> Iterator[tuple[Pairing, Pairing]]:
    with database_url_sync(kind, tmp_path) as url, store_on_thread(url) as one, store_on_thread(url) as two:
        yield Pairing(DatabasePairingStore(*one)), Pairing(DatabasePairingStore(*two))


def test_pairing_changes_on_one_replica_are_seen_by_the_other(replicas):
    gateway_a, gateway_b = replicas
    code = gateway_a.request("telegram", "77", "Mallory", chat_id="77").code
    assert code and [r.code for r in gateway_b.pending()] == [code]
    assert gateway_b.approve(code) is not None
    assert gateway_a.is_approved("telegram", "77")
    assert [a.user_id for a in gateway_a.claim_unnotified("telegram")] == ["77"]
    assert gateway_b.claim_unnotified("telegram") == []  # told once, across replicas


def test_concurrent_pairing_approvals_on_two_replicas_lose_nothing(replicas):
    def approve(pairing: Pairing, worker: str) -> None:
        for i in range(10):
            pairing.approve_user("telegram", f"{worker}-{i}")

    threads = [threading.Thread(target=approve, args=(replicas[w % 2], f"w{w}")) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert {a.user_id for a in replicas[0].approved()} == {f"w{w}-{i}" for w in range(4) for i in range(10)}


async def test_the_database_pairing_store_refuses_to_block_its_own_event_loop(tmp_path):
    async with sql_store("sqlite", tmp_path) as store:
        pairing = Pairing(DatabasePairingStore(store))
        with pytest.raises(RuntimeError, match="worker thread"):
            pairing.is_approved("telegram", "1")
        assert not await asyncio.to_thread(pairing.is_approved, "telegram", "1")


def test_the_backend_follows_the_database_unless_a_setting_names_one(tmp_path, monkeypatch):
    pg = "postgresql://u:p@db/hermes"
    assert not Settings(home=tmp_path).state_in_database  # SQLite: files
    assert Settings(home=tmp_path, database_url=pg).state_in_database
    assert not Settings(home=tmp_path, database_url=pg, state_backend="files").state_in_database
    monkeypatch.setenv("HERMES_STATE_BACKEND", "Database")
    assert Settings(home=tmp_path).state_in_database
    monkeypatch.setenv("HERMES_STATE_BACKEND", "s3")
    from hermes_engine.config import load_settings

    with pytest.raises(ConfigError, match="HERMES_STATE_BACKEND"):
        load_settings()


async def test_two_replicas_patching_one_skill_and_its_files_lose_nothing(kind, tmp_path):
    async with database_url(kind, tmp_path) as url:
        first, second = SqlStore(url), SqlStore(url)
        await first.init()
        await second.init()
        try:
            one = DatabaseSkillLibrary(tmp_path / "replica-1", first, first, "helper")
            two = DatabaseSkillLibrary(tmp_path / "replica-2", second, second, "helper")
            steps = "\n".join(f"{i}. step {i}" for i in range(1, 13))
            await one.apply(SkillChange("create", "busy", content=skill_md("busy", steps=steps)))
            await two.apply(SkillChange("write_file", "busy", file_path="references/notes.md", file_content="v1\n"))
            patches = [(one, two)[i % 2].apply(SkillChange("patch", "busy", old_string=f"{i}. step {i}\n",
                                                           new_string=f"{i}. step {i} (ok)\n"))
                       for i in range(1, 13)]
            await asyncio.gather(*patches)
            for library in (one, two):
                skill = await library.get("busy")
                assert skill is not None and skill.text.count("(ok)") == 12
                assert skill.files == ("references/notes.md",)
                assert await library.read_file("busy", "references/notes.md") == "v1\n"
            # history and backups live in the database: a third replica starting empty sees them
            await one.backup()
            await two.archive("busy")
            three = DatabaseSkillLibrary(tmp_path / "replica-3", first, first, "helper")
            assert await three.list_skills() == []
            archived = await asyncio.to_thread(three.archived)
            assert len(archived) == 1 and archived[0].endswith("/busy")
            assert archived == await asyncio.to_thread(one.archived)
            assert [p.name for p in await asyncio.to_thread(three.backups)] == \
                   [p.name for p in await asyncio.to_thread(one.backups)]
        finally:
            await first.close()
            await second.close()


def test_people_forget_erases_memory_and_pairing_kept_in_the_database(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from hermes_gateway.cli.people import app, with_store

    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path / "home")))
    monkeypatch.setenv("HERMES_STATE_BACKEND", "database")

    async def person(store: SqlStore, user_id: str, note: str) -> int:
        pid = (await store.resolve_account("telegram", "bot", user_id, user_id)).person_id
        await MemoryBook(DatabaseMemoryStore(store, store)).add(MemoryOwner.person(pid), "user", note)
        await asyncio.to_thread(Pairing(DatabasePairingStore(store)).approve_user, "telegram", user_id)
        return pid

    ann, bob = with_store(lambda store: person(store, "123", "Likes tea")), with_store(
        lambda store: person(store, "222", "Likes coffee"))
    result = CliRunner().invoke(app, ["forget", "telegram:123", "--yes"])
    assert result.exit_code == 0, result.output
    assert "1 memory folder(s)" in result.output and "1 pairing approval(s)" in result.output

    async def left(store: SqlStore) -> tuple[list[str], list[str], list[str]]:
        memory, pairing = DatabaseMemoryStore(store, store), Pairing(DatabasePairingStore(store))
        approved = await asyncio.to_thread(pairing.approved)
        return (await memory.read(MemoryOwner.person(ann), "user"), await memory.read(MemoryOwner.person(bob), "user"),
                [a.user_id for a in approved])

    assert with_store(left) == ([], ["Likes coffee"], ["222"])
    assert not (tmp_path / "home" / "memories").exists() and not (tmp_path / "home" / "pairing.json").exists()


@pytest.mark.parametrize("command", [["curator", "run"], ["curator", "report"], ["skills", "stats"]])
def test_skill_commands_on_the_shell_refuse_folders_that_are_not_the_record(tmp_path, monkeypatch, command):
    from typer.testing import CliRunner

    from hermes_gateway.cli.main import app

    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path)))
    monkeypatch.setenv("HERMES_STATE_BACKEND", "database")
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and "live in the database" in result.output


async def test_a_restarted_replica_trusts_the_database_not_the_copy_it_left_behind(tmp_path):
    async with sql_store("sqlite", tmp_path) as store:
        one = DatabaseSkillLibrary(tmp_path / "one", store, store, "helper")
        for name in ("keep-me", "drop-me"):
            await one.apply(SkillChange("create", name, content=skill_md(name), category="ops"))
        two = DatabaseSkillLibrary(tmp_path / "two", store, store, "helper")
        assert [s.name for s in await two.list_skills()] == ["drop-me", "keep-me"]
        await one.apply(SkillChange("delete", "drop-me"))  # while replica two is down, its copy still has it
        restarted = DatabaseSkillLibrary(tmp_path / "two", store, store, "helper")
        assert [s.name for s in await restarted.list_skills()] == ["keep-me"]
        await restarted.apply(SkillChange("write_file", "keep-me", file_path="references/a.md", file_content="a\n"))
        assert [s.name for s in await one.list_skills()] == ["keep-me"]  # nothing came back to life


async def test_usage_day_files_travel_through_the_database_and_so_does_their_deletion(kind, tmp_path):
    """A replica's turns write day files in its copy; the next read writes them back, another replica's
    copy gets them, and a day passing out of the span is deleted from the database too."""
    at = datetime(2026, 11, 30, 9, tzinfo=UTC)
    async with database_url(kind, tmp_path) as url:
        first, second = SqlStore(url), SqlStore(url)
        await first.init()
        await second.init()
        try:
            one = DatabaseSkillLibrary(tmp_path / "replica-1", first, first, "helper")
            await one.apply(SkillChange("create", "busy", content=skill_md("busy")))
            usage = UsageLog.for_library(one.root)
            for days_ago, calls in ((DAYS_KEPT, 4), (1, 2)):
                await asyncio.to_thread(usage.record_turn, {"busy": 1}, calls=calls, tokens=100,
                                        at=at - timedelta(days=days_ago))
            await one.revision()  # the bookkeeping's writes go back at the next read
            two = DatabaseSkillLibrary(tmp_path / "replica-2", second, second, "helper")
            await two.revision()
            oldest, yesterday = ((at - timedelta(days=n)).date().isoformat() for n in (DAYS_KEPT, 1))
            assert UsageLog.for_library(two.root).per_day("busy") == [(oldest, {"busy": DayUse(1, 4, 1, 100)}),
                                                                      (yesterday, {"busy": DayUse(1, 2, 1, 100)})]

            await asyncio.to_thread(usage.record_turn, {"busy": 1}, calls=1, at=at)  # a new day: the oldest goes
            await one.revision()
            await two.revision()
            assert sorted(UsageLog.for_library(two.root).day_stamps()) == [yesterday, "2026-11-30"]
            assert sorted(r for r in await first.read_documents("skills/helper") if "usage-days" in r) == [
                f".usage-days/{yesterday}.json", ".usage-days/2026-11-30.json"]
        finally:
            await first.close()
            await second.close()


def test_a_write_under_way_in_the_skill_copy_is_not_taken_for_content(tmp_path):
    """Usage bookkeeping writes beside the skills from worker threads while a refresh lists the folder: its
    temp file (gone a moment later) is neither pushed to the database nor read."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "SKILL.md").write_text("x")
    (tmp_path / ".usage.json.ab12cd.tmp").write_text("{}")
    (tmp_path / "notes.md").symlink_to(tmp_path / "tools" / "SKILL.md")
    assert sorted(library_files(tmp_path)) == ["tools/SKILL.md"]
