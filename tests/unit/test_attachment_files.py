"""`hermes_engine/attachments/blobs.py`: which files have a blob name, what `local_path` gives without a blob
store, and a blob store that fails (the file on disk still serves, a missing one is missing, no turn breaks)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from datetime import datetime

import pytest

from hermes_engine.attachments.blobs import AttachmentFiles, blob_key, local_path
from hermes_engine.errors import StorageError
from hermes_engine.ports.blobs import BlobInfo
from hermes_engine.ports.inbound import Attachment


@pytest.mark.parametrize(("path", "key"), [
    ("/srv/a/attachments/telegram_1_dm_7/42-report.pdf", "telegram_1_dm_7/42-report.pdf"),
    ("/other/home/attachments/slack_T1_dm_D1/m1-a.png", "slack_T1_dm_D1/m1-a.png"),
    ("/srv/a/workspaces/x/report.pdf", None),  # not an attachments root
    ("/srv/a/attachments/report.pdf", None),  # no conversation folder
    ("/srv/a/attachments/telegram_1_dm_7/." + "0" * 32 + ".part", None),  # a download in progress (`partial_name`)
    ("/srv/a/attachments/../attachments/x", None),
])
def test_a_file_of_a_conversation_folder_is_named_by_its_folder_and_name(path, key):
    assert blob_key(path) == key


def test_without_a_blob_store_local_path_is_the_file_on_disk_or_nothing(tmp_path):
    there = tmp_path / "attachments" / "dm_7" / "m1-a.txt"
    there.parent.mkdir(parents=True)
    there.write_text("hi")
    gone = there.with_name("m2-b.txt")

    assert local_path(Attachment("document", "a.txt", "text/plain", 2, str(there))) == there
    assert local_path(str(gone)) is None
    assert local_path(Attachment("document", "c.txt", "text/plain", 2, None, "too large")) is None


class FailingStore:
    """A shared blob store whose database cannot be reached."""

    blobs_shared = True

    def __init__(self) -> None:
        self.calls = 0

    async def put_blob(self, path: str, chunks: AsyncIterable[bytes], *, mime_type: str,
                       created_at: datetime) -> tuple[BlobInfo, bool]:
        self.calls += 1
        raise StorageError("the database is down")

    async def blob_info(self, path: str) -> BlobInfo | None:
        self.calls += 1
        raise StorageError("the database is down")

    def blob_chunks(self, path: str) -> AsyncIterator[bytes]:
        raise AssertionError("not read: its info could not be had")

    async def list_blobs(self, folder: str) -> list[BlobInfo]:
        self.calls += 1
        raise StorageError("the database is down")

    async def delete_blobs(self, paths: Sequence[str]) -> list[str]:
        return []

    async def delete_blob_folders(self, folders: Sequence[str]) -> list[str]:
        return []

    async def delete_blobs_before(self, cutoff: datetime) -> int:
        return 0


async def test_a_blob_store_that_fails_leaves_the_file_on_disk_in_use_and_a_missing_one_missing(tmp_path):
    store = FailingStore()
    files = AttachmentFiles(tmp_path, store)
    there = tmp_path / "attachments" / "dm_7" / "m1-a.txt"
    there.parent.mkdir(parents=True)
    there.write_text("hi")

    assert await asyncio.to_thread(files.local_path, str(there)) == there
    assert await asyncio.to_thread(files.local_path, str(there.with_name("m2-b.txt"))) is None
    assert await asyncio.to_thread(files.named, "dm_7", "b.txt") is None
    assert store.calls == 3  # each was asked, none raised into the turn


async def test_on_the_event_loop_itself_local_path_does_not_wait_for_the_store(tmp_path):
    files = AttachmentFiles(tmp_path, FailingStore())
    assert files.local_path(str(tmp_path / "attachments" / "dm_7" / "m1-a.txt")) is None
