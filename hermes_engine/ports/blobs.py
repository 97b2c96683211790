"""The attachments' storage role: the files people send, kept in the database as well as on the disk of the
replica that downloaded them, so any replica can read them. Part of `ports.storage.Store`; kept in a module of
its own as `jobs.py` is.

A blob is named by the attachment's path relative to the attachments root (`HERMES_HOME/attachments/`):
``<conversation folder>/<file name>``, the same on every replica whatever its home. Its bytes go in and come out
as a stream of chunks, so a 20 MB file is never whole in memory on either side. Only where the store says blobs
are shared (`blobs_shared`: PostgreSQL, which several replicas use) does the engine put any: SQLite serves one
process, whose disk already has every file.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class BlobInfo:
    path: str  # relative to the attachments root: "<conversation folder>/<file name>"
    size: int  # bytes
    mime_type: str
    created_at: datetime  # when the file arrived (the downloaded file's modification time)


class BlobGone(LookupError):
    """The blob is not (or no longer) in the store, or was deleted while it was read."""


@runtime_checkable
class AttachmentBlobs(Protocol):
    """Attachment files by relative path: put once, read as chunks, deleted by path, by conversation folder
    (`/forget`) and by age (the retention sweep)."""

    @property
    def blobs_shared(self) -> bool:
        """Whether several replicas read this store, so attachments belong in it (PostgreSQL: yes)."""

    async def put_blob(self, path: str, chunks: AsyncIterable[bytes], *, mime_type: str,
                       created_at: datetime) -> tuple[BlobInfo, bool]:
        """Keep the bytes `chunks` yields under `path`, unless a blob of that path is there already (then
        `chunks` is not read). The blob appears whole or not at all. Returns its info and whether this call
        stored it."""

    async def blob_info(self, path: str) -> BlobInfo | None: ...

    def blob_chunks(self, path: str) -> AsyncIterator[bytes]:
        """The blob's bytes, one stored chunk at a time. Raises `BlobGone` (before the first chunk when there
        is no such blob, or part way when it is deleted meanwhile)."""

    async def list_blobs(self, folder: str) -> list[BlobInfo]:
        """The blobs of one conversation folder, oldest first."""

    async def delete_blobs(self, paths: Sequence[str]) -> list[str]:
        """Delete these blobs; the paths that were there."""

    async def delete_blob_folders(self, folders: Sequence[str]) -> list[str]:
        """Delete every blob of these conversation folders; the paths deleted."""

    async def delete_blobs_before(self, cutoff: datetime) -> int:
        """Delete the blobs created before `cutoff`; how many."""


__all__ = ["AttachmentBlobs", "BlobGone", "BlobInfo"]
