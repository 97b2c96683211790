"""Where memory documents live: Markdown files under `<HERMES_HOME>/memories/`, or a dict for tests.

Both implement `MemoryStore` (`hermes_engine.memory.documents`): `read`/`write` whole entry lists plus
`lock(owner)`, which serializes read-modify-write for one owner; a database backend implements the same
three methods. The rules that change documents are `MemoryBook` (`hermes_engine.memory.book`); this module
also re-exports the names of both, the import path the rest of the engine has always used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

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
    SEPARATOR,
    TARGETS,
    MemoryOwner,
    MemoryStore,
    Target,
    format_entries,
    parse_entries,
    safe_scope_name,
    usage_text,
    used_chars,
)


def _check_target(owner: MemoryOwner, target: str) -> None:
    if target not in owner.targets():
        raise ValueError(f"{owner} has no {target!r} document (choose from {', '.join(owner.targets())})")


class FileMemoryStore:
    """Markdown files: `<root>/<person_id>/MEMORY.md|USER.md` and `<root>/shared/<safe-scope>/MEMORY.md`.

    `root` is the memories folder itself; `FileMemoryStore.for_home(settings.home)` gives
    `<HERMES_HOME>/memories`. Writes go to a temp file in the same folder, are fsynced, then `os.replace`d.
    `lock(owner)` is an `AsyncFileLocks` lock on `<owner dir>/.lock`: tasks of this store wait on an
    `asyncio.Lock`, other processes (and other store objects) on the `flock`.
    """

    LOCK_FILE = ".lock"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._locks = AsyncFileLocks()

    @classmethod
    def for_home(cls, home: str | os.PathLike[str]) -> FileMemoryStore:
        return cls(Path(home) / "memories")

    # -- paths --

    def owner_dir(self, owner: MemoryOwner) -> Path:
        if owner.is_shared:
            return self.root / "shared" / safe_scope_name(owner.key)
        if not owner.key.isdigit():
            raise ValueError(f"person key must be a non-negative integer id, not {owner.key!r}")
        return self.root / owner.key

    def path(self, owner: MemoryOwner, target: str) -> Path:
        _check_target(owner, target)
        return self.owner_dir(owner) / FILE_NAMES[target]

    # -- the protocol --

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        path = self.path(owner, target)
        return await asyncio.to_thread(self._read_file, path)

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        path = self.path(owner, target)
        await asyncio.to_thread(self._write_file, path, format_entries(list(entries)))

    def lock(self, owner: MemoryOwner) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(self.owner_dir(owner) / self.LOCK_FILE)

    # -- file helpers (sync; run in a worker thread) --

    def _read_file(self, path: Path) -> list[str]:
        try:
            return parse_entries(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def _write_file(self, path: Path, text: str) -> None:
        atomic_write(path, text.encode("utf-8"), replace=self._replace)

    def _replace(self, tmp: Path, final: Path) -> None:
        """The commit point of a write (a seam tests use to simulate a crash)."""
        os.replace(tmp, final)


class InMemoryStore:
    """A `MemoryStore` in a dict: for tests and throwaway sessions."""

    def __init__(self) -> None:
        self.documents: dict[tuple[MemoryOwner, str], list[str]] = {}
        self._locks: dict[MemoryOwner, asyncio.Lock] = {}

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        _check_target(owner, target)
        return list(self.documents.get((owner, target), []))

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        _check_target(owner, target)
        self.documents[(owner, target)] = list(entries)

    @contextlib.asynccontextmanager
    async def lock(self, owner: MemoryOwner) -> AsyncIterator[None]:
        async with self._locks.setdefault(owner, asyncio.Lock()):
            yield


__all__ = [
    "Document", "ENTRY_JOIN", "FILE_NAMES", "FileMemoryStore", "InMemoryStore", "LABELS", "MemoryBook",
    "MemoryOwner", "MemoryResult", "MemoryStore", "SEPARATOR", "TARGETS", "Target", "blocked_placeholder",
    "display_entry", "format_entries", "parse_entries", "preview", "safe_scope_name", "usage_text", "used_chars",
]
