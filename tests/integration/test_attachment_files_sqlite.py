"""On SQLite (one process, one disk) the files people send stay on the disk alone: a turn that reads them puts
nothing into the database's blob store."""

from __future__ import annotations

import sqlalchemy as sa
from fakes.fake_llm import Reply

from hermes_engine.attachments.blobs import AttachmentFiles
from hermes_engine.attachments.feature import AttachmentsFeature
from hermes_engine.attachments.folders import ATTACHMENTS, attachment_folder_name
from hermes_engine.ports.inbound import Attachment, InboundMessage


async def test_a_turn_with_files_on_sqlite_keeps_them_on_disk_only(engine, fake_llm, tmp_path):
    fake_llm.script(Reply(text="Read it."))
    e = await engine()
    msg = e.message("read this")
    folder = tmp_path / ATTACHMENTS / attachment_folder_name(e.gateway.session_key(msg))
    folder.mkdir(parents=True)
    (folder / f"{msg.message_id}-notes.txt").write_text("the quarterly numbers\n")
    (folder / f"{msg.message_id}-chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    msg = InboundMessage(**{**msg.__dict__, "attachments": (
        Attachment("document", "notes.txt", "text/plain", 22, str(folder / f"{msg.message_id}-notes.txt")),
        Attachment("photo", "chart.png", "image/png", 40, str(folder / f"{msg.message_id}-chart.png")))})

    await e.gateway.handle(msg)
    await e.outlet.wait_for(1)
    await e.idle()

    assert "the quarterly numbers" in fake_llm.requests[0].last_user_text
    [feature] = [f for f in e.gateway.features if isinstance(f, AttachmentsFeature)]
    assert isinstance(feature.files, AttachmentFiles) and not feature.files.shared
    assert not await feature.files.keep(folder / f"{msg.message_id}-notes.txt")
    async with e.store.engine.connect() as conn:
        for table in ("attachment_blobs", "attachment_blob_chunks"):
            assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar() == 0
    assert sorted(p.name for p in folder.iterdir()) == [f"{msg.message_id}-chart.png", f"{msg.message_id}-notes.txt"]
