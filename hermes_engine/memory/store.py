"""Where memory documents live: Markdown files under `<HERMES_HOME>/memories/`, or a dict for tests.

Both implement `MemoryStore` (`hermes_engine.memory.documents`): `read`/`write` whole entry lists plus
`lock(owner)`, which serializes read-modify-write for one owner; so does the database backend,
`hermes_engine.memory.database.DatabaseMemoryStore`. The rules that change documents are `MemoryBook`
(`hermes_engine.memory.book`); this module also re-exports the names of both, the import path the rest of
the engine has always used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from hermes_engine.atomic import atomic_write
from hermes_engine.filelock import AsyncFileLocks
from hermes_engine.memory.book import (
    LABELS,
    Document,
    MemoryBook,
    MemoryResult,
    blocked_placeholder,
    display_entry,
    preview,
)
from hermes_engine.memory.documents import (
    ENTRY_JOIN,
    FILE_NAMES,
    PENDING_FILE,
    SEPARATOR,
    TARGETS,
    MemoryOwner,
    MemoryStore,
    Target,
    UnreadableDocument,
    check_target,
    format_entries,
    owner_folder,
    parse_entries,
    pending_items,
    pending_text,
    safe_scope_name,
    usage_text,
    used_chars,
)


class FileMemoryStore:
    """Markdown files: `<root>/<person_id>/MEMORY.md|USER.md` and `<root>/shared/<safe-scope>/MEMORY.md`.

    `root` is the memories folder itself; `FileMemoryStore.for_home(settings.home)` gives
    `<HERMES_HOME>/memories`. Writes go to a temp file in the same folder, are fsynced, then `os.replace`d.
    `lock(owner)` is an `AsyncFileLocks` lock on `<owner dir>/.lock`: tasks of this store wait on an
    `asyncio.Lock`, other processes (and other store objects) on the `flock`. People edit these files by hand,
    so a read takes what editors produce (a byte-order mark is dropped) and refuses what it cannot decode
    rather than guessing: a guess written back would replace the person's bytes.
    """

    LOCK_FILE = ".lock"
    PENDING_FILE = PENDING_FILE

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._locks = AsyncFileLocks()

    @classmethod
    def for_home(cls, home: str | os.PathLike[str]) -> FileMemoryStore:
        return cls(Path(home) / "memories")

    # -- paths --

    def owner_dir(self, owner: MemoryOwner) -> Path:
        return self.root / owner_folder(owner)

    def path(self, owner: MemoryOwner, target: str) -> Path:
        check_target(owner, target)
        return self.owner_dir(owner) / FILE_NAMES[target]

    # -- the protocol --

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        path = self.path(owner, target)
        return parse_entries(await asyncio.to_thread(self._read_text, path))

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        path = self.path(owner, target)
        await asyncio.to_thread(self._write_file, path, format_entries(list(entries)))

    def lock(self, owner: MemoryOwner) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(self.owner_dir(owner) / self.LOCK_FILE)

    async def read_pending(self, owner: MemoryOwner) -> list[dict[str, Any]]:
        text = await asyncio.to_thread(self._read_text, self.owner_dir(owner) / self.PENDING_FILE)
        return pending_items(text, self.PENDING_FILE)

    async def write_pending(self, owner: MemoryOwner, items: list[dict[str, Any]]) -> None:
        path = self.owner_dir(owner) / self.PENDING_FILE
        if not items:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(path.unlink)
            return
        await asyncio.to_thread(self._write_file, path, pending_text(items))

    async def erase(self, owner: MemoryOwner) -> bool:
        folder = self.owner_dir(owner)
        if not folder.exists() and not folder.is_symlink():
            return False
        async with self.lock(owner):  # a write in flight finishes first; none starts until the files are gone
            await asyncio.to_thread(self._remove_documents, folder)
        await asyncio.to_thread(self._remove_folder, folder)
        return True

    # -- file helpers (sync; run in a worker thread) --

    @staticmethod
    def _read_text(path: Path) -> str:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise UnreadableDocument(f"{path.name} could not be read ({exc.strerror or type(exc).__name__})") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableDocument(f"{path.name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                                     f"{exc.start})") from None
        return text.removeprefix("\ufeff")  # a byte-order mark some editors add; never written back

    def _write_file(self, path: Path, text: str) -> None:
        atomic_write(path, text.encode("utf-8"), replace=self._replace)

    def _replace(self, tmp: Path, final: Path) -> None:
        """The commit point of a write (a seam tests use to simulate a crash)."""
        os.replace(tmp, final)

    def _remove_documents(self, folder: Path) -> None:
        if folder.is_symlink() or not folder.is_dir():
            return
        for item in folder.iterdir():
            if item.name != self.LOCK_FILE and (item.is_symlink() or not item.is_dir()):
                item.unlink(missing_ok=True)

    @staticmethod
    def _remove_folder(folder: Path) -> None:
        if folder.is_symlink():
            folder.unlink()  # the link only, never what it points to
        elif folder.exists():
            shutil.rmtree(folder)


class InMemoryStore:
    """A `MemoryStore` in a dict: for tests and throwaway sessions."""

    def __init__(self) -> None:
        self.documents: dict[tuple[MemoryOwner, str], list[str]] = {}
        self.pending: dict[MemoryOwner, list[dict[str, Any]]] = {}
        self._locks: dict[MemoryOwner, asyncio.Lock] = {}

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        check_target(owner, target)
        return list(self.documents.get((owner, target), []))

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        check_target(owner, target)
        self.documents[(owner, target)] = list(entries)

    @contextlib.asynccontextmanager
    async def lock(self, owner: MemoryOwner) -> AsyncIterator[None]:
        async with self._locks.setdefault(owner, asyncio.Lock()):
            yield

    async def read_pending(self, owner: MemoryOwner) -> list[dict[str, Any]]:
        return json.loads(json.dumps(self.pending.get(owner, [])))

    async def write_pending(self, owner: MemoryOwner, items: list[dict[str, Any]]) -> None:
        self.pending[owner] = json.loads(json.dumps(items))

    async def erase(self, owner: MemoryOwner) -> bool:
        found = owner in self.pending or any(key[0] == owner for key in self.documents)
        self.pending.pop(owner, None)
        for key in [k for k in self.documents if k[0] == owner]:
            del self.documents[key]
        return found


__all__ = [
    "Document", "ENTRY_JOIN", "FILE_NAMES", "FileMemoryStore", "InMemoryStore", "LABELS", "MemoryBook",
    "MemoryOwner", "MemoryResult", "MemoryStore", "SEPARATOR", "TARGETS", "Target", "UnreadableDocument",
    "blocked_placeholder",
    "display_entry", "format_entries", "parse_entries", "preview", "safe_scope_name", "usage_text", "used_chars",
]
