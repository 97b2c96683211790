"""The `AttachmentBlobs` role (migration `attachment_blobs`): the files people send, in the database, by their path
relative to the attachments root.

The bytes are kept in chunks of `CHUNK_BYTES` (1 MiB), one row each, written and read one at a time: a 20 MB
file is 20 rows, and neither side ever holds more than a chunk or two of it, well inside `bytea`'s 1 GB and
the memory of a replica receiving ten such files at once. A blob is written in one transaction, header first
(`INSERT ... ON CONFLICT DO NOTHING` on its path), so two replicas putting the same file store it once (the
second waits for the first's transaction, then finds it), and no reader sees half a blob. Reading asks for
one chunk per statement; a blob deleted meanwhile (`/forget`, retention) raises `BlobGone` part way, never a
short file taken for the whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from datetime import datetime

import sqlalchemy as sa

from hermes_engine.ports.blobs import BlobGone, BlobInfo
from storage.blob_models import AttachmentBlobRow, AttachmentChunkRow
from storage.models import table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["CHUNK_BYTES", "BlobRepository"]

CHUNK_BYTES = 1024 * 1024


def _info(row: AttachmentBlobRow) -> BlobInfo:
    return BlobInfo(path=row.path, size=row.size, mime_type=row.mime_type, created_at=row.created_at)


async def _rechunked(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """`chunks` cut or joined into pieces of `CHUNK_BYTES` (the last one shorter)."""
    pending = bytearray()
    async for chunk in chunks:
        if not pending and len(chunk) == CHUNK_BYTES:
            yield bytes(chunk)
            continue
        pending += chunk
        while len(pending) >= CHUNK_BYTES:
            yield bytes(pending[:CHUNK_BYTES])
            del pending[:CHUNK_BYTES]
    if pending:
        yield bytes(pending)


class BlobRepository(SqlRepository):
    """`hermes_engine.ports.blobs.AttachmentBlobs`."""

    @property
    def blobs_shared(self) -> bool:
        return self.dialect == "postgresql"

    @whole
    async def put_blob(self, path: str, chunks: AsyncIterable[bytes], *, mime_type: str,
                       created_at: datetime) -> tuple[BlobInfo, bool]:
        blobs, parts = table_of(AttachmentBlobRow), table_of(AttachmentChunkRow)
        folder = path.partition("/")[0]
        async with self._write() as session:
            header = (self._insert(blobs)
                      .values(path=path, folder=folder, size=0, mime_type=mime_type[:255], chunks=0,
                              created_at=created_at)
                      .on_conflict_do_nothing(index_elements=["path"]).returning(blobs.c.id))
            blob_id = (await session.execute(header)).scalar_one_or_none()
            if blob_id is None:
                there = await session.scalar(sa.select(AttachmentBlobRow).where(AttachmentBlobRow.path == path))
                if there is None:  # deleted between the conflict and this read
                    raise BlobGone(path)
                return _info(there), False
            size = seq = 0
            async for chunk in _rechunked(chunks):
                await session.execute(sa.insert(parts).values(blob_id=blob_id, seq=seq, data=chunk))
                size += len(chunk)
                seq += 1
            await session.execute(sa.update(blobs).where(blobs.c.id == blob_id).values(size=size, chunks=seq))
        return BlobInfo(path=path, size=size, mime_type=mime_type[:255], created_at=created_at), True

    @whole
    async def blob_info(self, path: str) -> BlobInfo | None:
        async with self._session() as session:
            row = await session.scalar(sa.select(AttachmentBlobRow).where(AttachmentBlobRow.path == path))
            return _info(row) if row is not None else None

    async def blob_chunks(self, path: str) -> AsyncIterator[bytes]:
        head = await self._blob_head(path)
        if head is None:
            raise BlobGone(path)
        blob_id, count = head
        for seq in range(count):
            data = await self._blob_chunk(blob_id, seq)
            if data is None:
                raise BlobGone(f"{path} was deleted while it was read")
            yield data

    @whole
    async def _blob_head(self, path: str) -> tuple[int, int] | None:
        query = sa.select(AttachmentBlobRow.id, AttachmentBlobRow.chunks).where(AttachmentBlobRow.path == path)
        async with self._session() as session:
            row = (await session.execute(query)).one_or_none()
            return (int(row[0]), int(row[1])) if row is not None else None

    @whole
    async def _blob_chunk(self, blob_id: int, seq: int) -> bytes | None:
        query = sa.select(AttachmentChunkRow.data).where(AttachmentChunkRow.blob_id == blob_id,
                                                         AttachmentChunkRow.seq == seq)
        async with self._session() as session:
            data = await session.scalar(query)
            return bytes(data) if data is not None else None

    @whole
    async def list_blobs(self, folder: str) -> list[BlobInfo]:
        query = (sa.select(AttachmentBlobRow).where(AttachmentBlobRow.folder == folder)
                 .order_by(AttachmentBlobRow.created_at, AttachmentBlobRow.id))
        async with self._session() as session:
            return [_info(row) for row in await session.scalars(query)]

    @whole
    async def delete_blobs(self, paths: Sequence[str]) -> list[str]:
        if not paths:
            return []
        query = sa.delete(AttachmentBlobRow).where(AttachmentBlobRow.path.in_(list(paths)))
        async with self._write() as session:
            return list(await session.scalars(query.returning(AttachmentBlobRow.path)))

    @whole
    async def delete_blob_folders(self, folders: Sequence[str]) -> list[str]:
        if not folders:
            return []
        query = sa.delete(AttachmentBlobRow).where(AttachmentBlobRow.folder.in_(list(folders)))
        async with self._write() as session:
            return list(await session.scalars(query.returning(AttachmentBlobRow.path)))

    @whole
    async def delete_blobs_before(self, cutoff: datetime) -> int:
        query = sa.delete(AttachmentBlobRow).where(AttachmentBlobRow.created_at < cutoff)
        async with self._write() as session:
            return len(list(await session.scalars(query.returning(AttachmentBlobRow.id))))
