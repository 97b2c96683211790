"""The store's attachment blobs (`storage/repos/blobs.py`), on SQLite and on PostgreSQL: put once by path and
read back chunk by chunk, listed by conversation folder, deleted by path, by folder and by age."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from postgres import BACKENDS, replica_stores

from hermes_engine.ports.blobs import AttachmentBlobs, BlobGone
from storage.repos.blobs import CHUNK_BYTES
from storage.store import SqlStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path) -> AsyncIterator[SqlStore]:
    async with replica_stores(request.param, tmp_path, 1) as [only]:
        yield only


async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def read_all(store: SqlStore, path: str) -> bytes:
    return b"".join([chunk async for chunk in store.blob_chunks(path)])


async def chunk_sizes(store: SqlStore, path: str) -> list[int]:
    query = sa.text("SELECT length(c.data) FROM attachment_blob_chunks c JOIN attachment_blobs b "
                    "ON b.id = c.blob_id WHERE b.path = :path ORDER BY c.seq")
    async with store.engine.connect() as conn:
        return [int(n) for n in (await conn.execute(query, {"path": path})).scalars()]


async def test_a_blob_is_read_back_as_it_was_put_in_chunks_of_one_mebibyte(store):
    data = bytes(range(256)) * (CHUNK_BYTES * 2 // 256) + b"tail"  # two chunks and four bytes
    info, stored = await store.put_blob("dm_7/m1-report.pdf", pieces(data[:1000], data[1000:]),
                                        mime_type="application/pdf", created_at=NOW)

    assert stored and (info.path, info.size, info.mime_type, info.created_at) == (
        "dm_7/m1-report.pdf", len(data), "application/pdf", NOW)
    assert await store.blob_info("dm_7/m1-report.pdf") == info
    assert await read_all(store, "dm_7/m1-report.pdf") == data
    assert await chunk_sizes(store, "dm_7/m1-report.pdf") == [CHUNK_BYTES, CHUNK_BYTES, 4]


async def test_a_second_put_of_the_same_path_keeps_the_first_and_reads_nothing(store):
    await store.put_blob("dm_7/m1-a.txt", pieces(b"first"), mime_type="text/plain", created_at=NOW)

    async def never() -> AsyncIterator[bytes]:
        raise AssertionError("the bytes of a blob already kept are not read")
        yield b""  # pragma: no cover

    info, stored = await store.put_blob("dm_7/m1-a.txt", never(), mime_type="text/plain", created_at=NOW)
    assert not stored and info.size == 5
    assert await read_all(store, "dm_7/m1-a.txt") == b"first"


async def test_a_put_whose_bytes_fail_part_way_leaves_no_blob(store):
    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * CHUNK_BYTES
        raise OSError("the disk went away")

    with pytest.raises(OSError):
        await store.put_blob("dm_7/m1-cut.bin", broken(), mime_type="application/octet-stream", created_at=NOW)
    assert await store.blob_info("dm_7/m1-cut.bin") is None
    assert await chunk_sizes(store, "dm_7/m1-cut.bin") == []


async def test_a_blob_that_is_not_there_is_gone(store):
    assert await store.blob_info("dm_7/nothing") is None
    with pytest.raises(BlobGone):
        await read_all(store, "dm_7/nothing")


async def test_blobs_are_listed_and_deleted_by_conversation_folder_path_and_age(store):
    for path, age in [("dm_7/m1-a.png", 10), ("dm_7/m2-b.png", 1), ("dm_8/m3-c.png", 10), ("dm_9/m4-d.png", 1)]:
        await store.put_blob(path, pieces(b"png"), mime_type="image/png", created_at=NOW - timedelta(days=age))

    assert [b.path for b in await store.list_blobs("dm_7")] == ["dm_7/m1-a.png", "dm_7/m2-b.png"]
    assert sorted(await store.delete_blob_folders(["dm_7"])) == ["dm_7/m1-a.png", "dm_7/m2-b.png"]
    assert await store.list_blobs("dm_7") == []
    assert await store.delete_blobs(["dm_9/m4-d.png", "dm_9/never-there"]) == ["dm_9/m4-d.png"]
    assert await store.delete_blobs_before(NOW - timedelta(days=7)) == 1
    assert await store.blob_info("dm_8/m3-c.png") is None
    async with store.engine.connect() as conn:  # their chunks went with them
        assert (await conn.execute(sa.text("SELECT count(*) FROM attachment_blob_chunks"))).scalar() == 0


async def test_only_postgresql_says_its_blobs_are_shared_among_replicas(store):
    assert isinstance(store, AttachmentBlobs)
    assert store.blobs_shared == (store.dialect == "postgresql")
