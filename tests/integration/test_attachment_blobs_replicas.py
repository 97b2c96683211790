"""Files people send, across replicas on one PostgreSQL: replica A's adapter downloaded them, replica B (an
empty HERMES_HOME, A's files gone from the disk) answers; the model on B still sees the image and reads the
document on, `send_file /attachments/…` on B finds it, and `/forget` and the retention sweep delete the
copies in the database. A 20 MB file goes through in 1 MiB chunks, never whole in memory."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import shutil
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import PG_URL, fresh_schema, replica_stores

from hermes_engine.attachments.blobs import AttachmentFiles, bind, blob_key
from hermes_engine.attachments.feature import AttachmentsFeature
from hermes_engine.attachments.folders import ATTACHMENTS, attachment_folder_name
from hermes_engine.attachments.retention import DAY, AttachmentRetention
from hermes_engine.ports.inbound import Attachment, InboundMessage
from hermes_engine.ports.reply import OutgoingFile, ReplyTarget
from hermes_engine.workspace.sending import attached
from hermes_engine.workspace.space import WorkspaceError
from storage.repos.blobs import CHUNK_BYTES

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")]

MB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
LOG = "".join(f"line {n:05d} of the log, nothing to see here\n" for n in range(1000))  # ~42,000 characters


@pytest.fixture
async def db() -> AsyncIterator[tuple[str, dict[str, object]]]:
    """A fresh schema on the test server; asked for before `engine`, so the replicas stop before it is dropped."""
    async with fresh_schema() as schema:
        yield PG_URL or "", {"connect_args": {"server_settings": {"search_path": schema}}}


def files_of(e) -> AttachmentFiles:
    [feature] = [f for f in e.gateway.features if isinstance(f, AttachmentsFeature)]
    assert feature.files is not None
    return feature.files


def downloaded(e, msg: InboundMessage, name: str, data: bytes, mime: str, kind: str = "document") -> Attachment:
    """What A's adapter leaves: the file in the conversation's folder under A's home, named after the message."""
    folder = e.home / ATTACHMENTS / attachment_folder_name(e.gateway.session_key(msg))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{msg.message_id}-{name}"
    path.write_bytes(data)
    return Attachment(kind, name, mime, len(data), str(path))


async def arrived_on_a(a, text: str, files: list[tuple[str, bytes, str, str]]) -> InboundMessage:
    """A message whose files replica A downloaded; A's engine has seen it arrive (and kept its files), then A's
    disk loses them, so only the database has them."""
    msg = a.message(text)
    attachments = tuple(downloaded(a, msg, name, data, mime, kind) for name, data, mime, kind in files)
    msg = InboundMessage(**{**msg.__dict__, "attachments": attachments})
    [feature] = [f for f in a.gateway.features if isinstance(f, AttachmentsFeature)]
    feature.on_message(a.gateway.session_key(msg), msg)
    await a.idle()
    shutil.rmtree(a.home / ATTACHMENTS)
    return msg


async def replicas(engine, monkeypatch, tmp_path: Path, db, **profile):
    monkeypatch.setenv("HERMES_REPLICA_ID", "replica-a")
    a = await engine(home=tmp_path / "a", database=db, profile=make_profile(**profile))
    monkeypatch.setenv("HERMES_REPLICA_ID", "replica-b")
    b = await engine(home=tmp_path / "b", database=db, profile=make_profile(**profile))
    assert not (tmp_path / "b" / ATTACHMENTS).exists()
    return a, b


async def test_replica_b_with_an_empty_home_shows_the_model_the_image_and_reads_the_document_on(
        db, engine, fake_llm, monkeypatch, tmp_path):
    fake_llm.script(Reply(tool_calls=[("read_document", {"file_name": "server.log", "offset": 20_000})]),
                    Reply(text="Read both."))
    a, b = await replicas(engine, monkeypatch, tmp_path, db)
    msg = await arrived_on_a(a, "what do these say?", [("server.log", LOG.encode(), "text/plain", "document"),
                                                       ("chart.png", PNG, "image/png", "photo")])
    await b.gateway.handle(msg)  # B answers it (it holds the conversation's lease, or A died)
    await b.outlet.wait_for(1)

    assert b.outlet.texts == ["Read both."]
    first = fake_llm.requests[0]
    assert "line 00000 of the log" in first.last_user_text and "line 00999" not in first.last_user_text
    images = [part for m in first.messages if isinstance(m.get("content"), list)
              for part in m["content"] if part.get("type") == "image_url"]
    assert images == [{"type": "image_url",
                       "image_url": {"url": f"data:image/png;base64,{base64.b64encode(PNG).decode()}"}}]
    [result] = fake_llm.requests[1].turn_tool_results
    assert result.startswith("[untrusted data from the document server.log")
    assert "line 00900 of the log" in result and "line 00000 of the log" not in result
    restored = b.home / ATTACHMENTS / Path(msg.attachments[0].path or "").parent.name
    assert sorted(p.name for p in restored.iterdir()) == [f"{msg.message_id}-chart.png",
                                                          f"{msg.message_id}-server.log"]
    assert (restored / f"{msg.message_id}-chart.png").read_bytes() == PNG


async def test_a_voice_note_replica_a_downloaded_is_heard_on_replica_b(db, engine, fake_llm, monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_STT_MODEL", "whisper-1")  # at the fake LLM, through OPENAI_BASE_URL
    fake_llm.transcripts.append("remind me to water the plants")
    fake_llm.script(Reply(text="I will."))
    ogg = b"OggS\x00\x02" + bytes(58)
    a, b = await replicas(engine, monkeypatch, tmp_path, db)
    msg = await arrived_on_a(a, "", [("voice.ogg", ogg, "audio/ogg", "voice")])
    await b.gateway.handle(msg)
    await b.outlet.wait_for(1)

    [upload] = fake_llm.transcriptions
    assert upload.data == ogg
    assert "remind me to water the plants" in fake_llm.requests[0].last_user_text


async def test_send_file_of_an_attachment_on_replica_b_brings_it_from_the_database_while_it_keeps_it(db, engine, monkeypatch, tmp_path):
    a, b = await replicas(engine, monkeypatch, tmp_path, db)
    msg = await arrived_on_a(a, "here", [("notes.csv", b"a,b\n1,2\n", "text/csv", "document")])
    folder = b.home / ATTACHMENTS / attachment_folder_name(b.gateway.session_key(msg))
    bind(files_of(b))  # as a turn on B does
    file = await asyncio.to_thread(attached, folder, "/attachments/notes.csv", "yours", Limits())
    assert (file.name, file.data, file.caption) == ("notes.csv", b"a,b\n1,2\n", "yours")

    await a.store.delete_blob_folders([folder.name])  # /forget on replica A
    assert any(folder.iterdir())  # B's copy is still on B's disk
    with pytest.raises(WorkspaceError, match="has sent no file named notes.csv"):
        await asyncio.to_thread(attached, folder, "/attachments/notes.csv", "", Limits())


async def test_forget_on_replica_b_deletes_the_files_replica_a_kept_in_the_database(db, engine, fake_llm, monkeypatch,
                                                                                   tmp_path):
    fake_llm.script(Reply(text="Seen."))
    a, b = await replicas(engine, monkeypatch, tmp_path, db)
    msg = await arrived_on_a(a, "keep this", [("passport.png", PNG, "image/png", "photo")])
    key = blob_key(msg.attachments[0].path or "")
    assert key is not None and await b.store.blob_info(key) is not None
    await b.gateway.handle(msg)
    await b.outlet.wait_for(1)
    assert (b.home / ATTACHMENTS / key).exists()

    explained = await b.say("/forget")
    code = re.search(r"/forget (\w+)", explained)
    assert code is not None
    assert await b.say(f"/forget {code.group(1)}") == "Done: I have deleted everything I kept about you."

    assert await b.store.blob_info(key) is None
    assert not (b.home / ATTACHMENTS / key).exists()
    assert await files_of(a).restore(key) is None  # no replica can bring it back


async def test_the_retention_job_deletes_the_blobs_past_the_retention(db, engine, monkeypatch, tmp_path):
    a, b = await replicas(engine, monkeypatch, tmp_path, db, attachments={"retention_days": 7})
    msg = a.message("two files")
    old = downloaded(a, msg, "old.png", PNG, "image/png", "photo")
    recent = downloaded(a, msg, "recent.png", PNG, "image/png", "photo")
    now = time.time()
    os.utime(old.path or "", (now - 8 * DAY, now - 8 * DAY))
    os.utime(recent.path or "", (now - DAY, now - DAY))
    await files_of(a).keep_all([old, recent])

    [retention] = [f for f in b.gateway.features if isinstance(f, AttachmentRetention)]
    swept = await retention.prune()  # the daily job, on whichever replica holds its lease

    assert swept.blobs == 1
    assert await b.store.blob_info(blob_key(old.path or "") or "") is None
    assert await b.store.blob_info(blob_key(recent.path or "") or "") is not None
    shutil.rmtree(a.home / ATTACHMENTS)
    assert await asyncio.to_thread(files_of(b).local_path, old) is None
    restored = await asyncio.to_thread(files_of(b).local_path, recent)
    assert restored is not None and restored.is_relative_to(b.home)
    assert abs(restored.stat().st_mtime - (now - DAY)) < 2  # the sweep on B ages it from its arrival

    await a.store.delete_blobs([blob_key(recent.path or "") or ""])  # its turn came on another replica
    fresh = AttachmentFiles(b.home, b.store)  # B after a restart: it does not remember what it kept
    assert await asyncio.to_thread(fresh.local_path, recent) is None  # B's leftover copy is not used
    assert restored.exists() and await b.store.blob_info(blob_key(recent.path or "") or "") is None


async def test_a_20_mb_file_goes_through_the_database_in_chunks_never_whole_in_memory(tmp_path):
    source = tmp_path / "a" / ATTACHMENTS / "telegram_acct_dm_c1" / "m1-video.mp4"
    source.parent.mkdir(parents=True)
    digest = hashlib.sha256()
    with source.open("wb") as out:
        for _ in range(20):
            chunk = os.urandom(MB)
            digest.update(chunk)
            out.write(chunk)
    del chunk
    async with replica_stores("postgres", tmp_path) as (store_a, store_b):
        sender, receiver = AttachmentFiles(tmp_path / "a", store_a), AttachmentFiles(tmp_path / "b", store_b)
        tracemalloc.start()
        try:
            assert await sender.keep(source, "video/mp4")
            _, put_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            restored = await receiver.restore("telegram_acct_dm_c1/m1-video.mp4")
            _, read_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        query = sa.text("SELECT count(*), max(length(data)) FROM attachment_blob_chunks")
        async with store_a.engine.connect() as conn:
            chunks, largest = (await conn.execute(query)).one()

    assert (chunks, largest) == (20, CHUNK_BYTES)
    assert restored == tmp_path / "b" / ATTACHMENTS / "telegram_acct_dm_c1" / "m1-video.mp4"
    with restored.open("rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == digest.hexdigest()
    # a file read whole would be 20 MB at once; a few copies of one chunk at a time stay far below
    assert put_peak < 10 * MB and read_peak < 10 * MB, (put_peak, read_peak)


class Limits:
    """A `FileOutlet`'s limits: 50 MB, as Telegram's documents."""

    platform = "telegram"

    def max_file_bytes(self, media_type: str) -> int:
        return 50 * MB

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool:
        raise AssertionError("not sent in these tests")
