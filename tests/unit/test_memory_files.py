"""Memory files belong to the person: hand-written text, byte-order marks, undecodable bytes, documents over
their limit and duplicates are all met without losing a byte the person wrote, and without crashing a turn."""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path

import pytest

from hermes_engine.config import MemorySettings
from hermes_engine.memory import FileMemoryStore, MemoryBook, MemoryFeature, MemoryOwner
from hermes_engine.ports.commands import CommandContext
from hermes_engine.ports.inbound import ChatKind, InboundMessage
from hermes_engine.ports.services import Services
from hermes_engine.ports.session import SessionScope

ALICE = 1
NOT_UTF8 = b"Uses Python\n\xff\xfe caf\xe9 in Latin-1\n"


@pytest.fixture
def store(tmp_path: Path) -> FileMemoryStore:
    return FileMemoryStore(tmp_path / "memories")


@pytest.fixture
def root(store: FileMemoryStore) -> Path:
    return store.root


@pytest.fixture
def book(store: FileMemoryStore) -> MemoryBook:
    return MemoryBook(store, MemorySettings())


def alice() -> MemoryOwner:
    return MemoryOwner.person(ALICE)


def memory_file(root: Path, name: str = "MEMORY.md") -> Path:
    return root / str(ALICE) / name


def dm_scope() -> SessionScope:
    return SessionScope(bot="t", session_id=1, session_key="k", chat_kind="dm", person_id=ALICE)


def command(args: str) -> CommandContext:
    msg = InboundMessage(platform="console", account="t", chat_kind=ChatKind.DM, chat_id="c", user_id="u",
                         text=f"/memory {args}".strip(), message_id="m1")
    return CommandContext(host=None, session=None,  # type: ignore[arg-type]
                          message=msg, person_id=ALICE, args=msg.args)


# --- text written by hand ---------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["replace", "remove", "add"])
async def test_text_appended_by_hand_without_a_section_line_survives_every_change(book, root, store, action):
    await book.add(alice(), "memory", "Deploys with Docker")
    await book.add(alice(), "memory", "Editor is Helix")
    path = memory_file(root)
    path.write_text(path.read_text(encoding="utf-8") + "Vendor: ACME, contact Jo\nStanding order: weekly\n",
                    encoding="utf-8")

    if action == "replace":
        result = await book.replace(alice(), "memory", "Helix", "Editor is Zed")
    elif action == "remove":
        result = await book.remove(alice(), "memory", "Helix")
    else:
        result = await book.add(alice(), "memory", "Uses Postgres 16")
    assert result.ok, result.message
    entries = await store.read(alice(), "memory")
    assert "Vendor: ACME, contact Jo\nStanding order: weekly" in entries  # kept whole, as an entry of its own
    assert "Editor is Helix" not in entries if action != "add" else "Editor is Helix" in entries
    assert path.read_text(encoding="utf-8").count("Vendor: ACME") == 1


async def test_replace_answers_with_the_whole_entry_it_overwrote(book):
    entry = "RULE A: gate merges. RULE B: CI per head. RULE C: never squash."
    await book.add(alice(), "memory", entry)
    result = await book.replace(alice(), "memory", "RULE B", "RULE B: CI runs per head.")
    assert result.ok and result.replaced == (entry,)
    assert entry in result.message


async def test_replace_in_a_group_names_no_private_text_it_overwrote(book):
    await book.add(alice(), "memory", "Secret project Nightingale ships in May")
    result = await book.replace(alice(), "memory", "Nightingale", "A project ships in May", show_entries=False)
    assert result.ok and "Nightingale" not in result.message and "private" in result.message


# --- encodings -------------------------------------------------------------------------------------------


async def test_a_byte_order_mark_is_dropped_on_read_and_never_written_back(book, root, store):
    path = memory_file(root)
    path.parent.mkdir(parents=True)
    path.write_bytes("\ufeffFirst fact\n§\nSecond fact\n".encode())
    assert await store.read(alice(), "memory") == ["First fact", "Second fact"]
    doc = await book.document(alice(), "memory")
    assert doc.display == ("First fact", "Second fact")  # not "[blocked entry: invisible_unicode]"

    assert (await book.add(alice(), "memory", "Third fact")).ok
    data = path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and "\ufeff" not in data.decode("utf-8")
    assert await store.read(alice(), "memory") == ["First fact", "Second fact", "Third fact"]


@pytest.mark.parametrize("action", ["add", "replace", "remove", "delete_number"])
async def test_a_file_that_is_not_utf8_refuses_every_write_and_keeps_its_bytes(store, root, action):
    feature = MemoryFeature(store)
    path = memory_file(root)
    path.parent.mkdir(parents=True)
    path.write_bytes(NOT_UTF8)
    if action == "add":
        result = (await feature.book.add(alice(), "memory", "New fact")).message
    elif action == "replace":
        result = (await feature.book.replace(alice(), "memory", "Python", "Uses Python 3.12")).message
    elif action == "remove":
        result = (await feature.book.remove(alice(), "memory", "Python")).message
    else:
        result = await feature.handle_command(command("delete 1"))
    assert "MEMORY.md" in result and "not UTF-8" in result
    assert path.read_bytes() == NOT_UTF8


async def test_a_file_that_is_not_utf8_shows_as_unreadable_in_the_prompt_and_in_memory_command(store, root):
    feature = MemoryFeature(store)
    await feature.book.add(alice(), "user", "Prefers concise answers")
    path = memory_file(root)
    path.write_bytes(NOT_UTF8)

    section = await feature.contributor.frozen_section(dm_scope())
    assert "MEMORY.md cannot be read (MEMORY.md is not UTF-8 text" in section
    assert "Prefers concise answers" in section  # the other document is unaffected
    listing = await feature.handle_command(command(""))
    assert "cannot be read" in listing and "Prefers concise answers" in listing


async def test_memory_tool_on_an_undecodable_file_answers_with_an_error_not_a_crash(store, root):
    from hermes_engine.memory import memory_tool
    from hermes_engine.ports.conversation import ToolCall
    from hermes_engine.ports.tools import ToolContext
    from hermes_engine.tools.registry import ToolRegistry

    feature = MemoryFeature(store)
    path = memory_file(root, "USER.md")
    path.parent.mkdir(parents=True)
    path.write_bytes(NOT_UTF8)
    ctx = ToolContext(bot="t", session_id=1, session_key="k", person_id=ALICE, services=Services(feature.services()))
    call = ToolCall(id="c1", name="memory", arguments='{"action": "add", "target": "user", "content": "Likes tea"}')
    result = await ToolRegistry([memory_tool]).call(call, ctx)
    assert result.is_error and result.content.startswith("Error: USER.md cannot be read")
    assert path.read_bytes() == NOT_UTF8


# --- loading -----------------------------------------------------------------------------------------------


async def test_a_document_over_its_limit_loads_whole_with_a_warning_naming_it(store, root, caplog):
    book = MemoryBook(store, MemorySettings(memory_chars=100))
    path = memory_file(root)
    path.parent.mkdir(parents=True)
    path.write_text("x" * 150 + "\n§\nshort fact\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="hermes_engine.memory.book"):
        doc = await book.document(alice(), "memory")
    assert doc.entries == ("x" * 150, "short fact")
    assert "MEMORY.md of person 1 is over its limit (163/100 chars)" in caplog.text


async def test_a_document_over_its_limit_can_still_shrink(store, root):
    book = MemoryBook(store, MemorySettings(memory_chars=100))
    path = memory_file(root)
    path.parent.mkdir(parents=True)
    path.write_text("x" * 150 + "\n§\nshort fact\n", encoding="utf-8")
    result = await book.replace(alice(), "memory", "x" * 20, "y" * 120)  # smaller, still over: consolidating
    assert result.ok, result.message
    assert not (await book.add(alice(), "memory", "grows it further")).ok


async def test_duplicate_entries_collapse_on_load(book, root, store):
    path = memory_file(root)
    path.parent.mkdir(parents=True)
    path.write_text("duplicate entry\n§\nduplicate entry\n§\nunique entry\n", encoding="utf-8")
    assert await store.read(alice(), "memory") == ["duplicate entry", "unique entry"]
    assert (await book.document(alice(), "memory")).used == len("duplicate entry\n§\nunique entry")


# --- the lock ----------------------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "O_NOFOLLOW"), reason="POSIX lock files")
async def test_a_symlinked_memory_lock_is_a_clear_refusal_and_its_target_is_untouched(book, root, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("do not touch", encoding="utf-8")
    outside.chmod(0o644)
    folder = root / str(ALICE)
    folder.mkdir(parents=True)
    (folder / FileMemoryStore.LOCK_FILE).symlink_to(outside)

    result = await book.add(alice(), "memory", "A fact")
    assert not result.ok and "could not be locked" in result.message
    assert outside.read_text(encoding="utf-8") == "do not touch"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert not (folder / "MEMORY.md").exists()
