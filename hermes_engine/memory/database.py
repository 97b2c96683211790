"""Memory documents in the database (the `DocumentStore` role), so replicas on one PostgreSQL share them.

The documents are the same texts the file backend writes (entries each followed by a `§` line), under the
same paths relative to the memories folder (`42/MEMORY.md`, `shared/<scope>/MEMORY.md`), so moving a file
home in is a copy and everything above the store (`MemoryBook`: parsing, limits, the scan) is unchanged.

`lock(owner)` must hold across replicas, as the file lock holds across processes: it is a lease named after
the owner's folder (`LeaseStore`), taken with short waits and given back at the end. Writes also compare and
set the version read under that lease, so even a lease that ran out mid-change (a stalled replica) cannot
overwrite a newer document: the late writer is refused and nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from hermes_engine.holders import new_holder
from hermes_engine.memory.documents import (
    FILE_NAMES,
    PENDING_FILE,
    MemoryOwner,
    check_target,
    format_entries,
    owner_folder,
    parse_entries,
    pending_items,
    pending_text,
)
from hermes_engine.ports.storage import DocumentStore, LeaseStore

AREA = "memory"


class DocumentChanged(OSError):
    """Another writer changed the document after it was read; nothing was written (`MemoryBook` reports a
    write that raised `OSError` as not saved)."""


class MemoryLockTimeout(OSError):
    """The owner's lease stayed with another writer for longer than the store waits."""


class DatabaseMemoryStore:
    """`MemoryStore` on the database's `DocumentStore`, serialized per owner by a `LeaseStore` lease."""

    def __init__(self, documents: DocumentStore, leases: LeaseStore, *, lease_seconds: float = 30.0,
                 wait_seconds: float = 60.0) -> None:
        self.documents = documents
        self.leases = leases
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self._local: dict[str, asyncio.Lock] = {}
        self._versions: dict[str, int] = {}

    @staticmethod
    def path(owner: MemoryOwner, target: str) -> str:
        check_target(owner, target)
        return f"{owner_folder(owner)}/{FILE_NAMES[target]}"

    async def _get(self, path: str) -> str:
        doc = await self.documents.get_document(AREA, path)
        self._versions[path] = doc.version if doc else 0
        return doc.text if doc else ""

    async def _put(self, path: str, text: str | None) -> None:
        """Write (or with None delete) the document at the version last read, or the current one."""
        if path not in self._versions:
            await self._get(path)
        expected = self._versions[path]
        if text is None:
            if expected:
                await self.documents.delete_documents(AREA, path)
            self._versions[path] = 0
            return
        version = await self.documents.put_document(AREA, path, text, expected_version=expected)
        if version is None:
            self._versions.pop(path, None)
            raise DocumentChanged(f"{path} was changed by another writer")
        self._versions[path] = version

    async def read(self, owner: MemoryOwner, target: str) -> list[str]:
        return parse_entries(await self._get(self.path(owner, target)))

    async def write(self, owner: MemoryOwner, target: str, entries: list[str]) -> None:
        await self._put(self.path(owner, target), format_entries(list(entries)))

    def lock(self, owner: MemoryOwner) -> AbstractAsyncContextManager[None]:
        return self._held(owner_folder(owner))

    @asynccontextmanager
    async def _held(self, folder: str) -> AsyncIterator[None]:
        async with self._local.setdefault(folder, asyncio.Lock()):
            name, holder = f"{AREA}:{folder}", new_holder()
            delay, waited = 0.02, 0.0
            while not await self.leases.acquire_lease(name, holder, self.lease_seconds):
                if waited >= self.wait_seconds:
                    raise MemoryLockTimeout(f"memory of {folder} is held by another writer")
                await asyncio.sleep(delay)
                waited, delay = waited + delay, min(delay * 2, 0.25)
            try:
                yield
            finally:
                await asyncio.shield(self.leases.release_lease(name, holder))

    async def read_pending(self, owner: MemoryOwner) -> list[dict[str, Any]]:
        return pending_items(await self._get(f"{owner_folder(owner)}/{PENDING_FILE}"), PENDING_FILE)

    async def write_pending(self, owner: MemoryOwner, items: list[dict[str, Any]]) -> None:
        await self._put(f"{owner_folder(owner)}/{PENDING_FILE}", pending_text(items) if items else None)

    async def erase(self, owner: MemoryOwner) -> bool:
        folder = owner_folder(owner)
        async with self.lock(owner):
            removed = await self.documents.delete_documents(AREA, f"{folder}/")
        for path in [p for p in self._versions if p.startswith(f"{folder}/")]:
            del self._versions[path]
        return removed > 0


__all__ = ["AREA", "DatabaseMemoryStore", "DocumentChanged", "MemoryLockTimeout"]
