"""The attachment blobs' rows (migration `attachment_blobs`), on the declarative `Base` of `storage.models` (kept
apart only so that module stays short): the files people send, kept for every replica by their path under the
attachments root, their bytes in numbered chunks so no row is larger than `storage.repos.blobs.CHUNK_BYTES`."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from storage.models import _NEVER_REUSED_IDS, Base, Id, UTCDateTime

__all__ = ["AttachmentBlobRow", "AttachmentChunkRow"]


class AttachmentBlobRow(Base):
    """A file a person sent: where it is under the attachments root, what it is, how many chunks hold it."""

    __tablename__ = "attachment_blobs"
    __table_args__ = (sa.UniqueConstraint("path"), sa.Index(None, "folder"), sa.Index(None, "created_at"),
                      _NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(sa.String(512), nullable=False)  # "<conversation folder>/<file name>"
    folder: Mapped[str] = mapped_column(sa.String(255), nullable=False)  # the conversation's folder
    size: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False)
    mime_type: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    chunks: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)  # when the file arrived


class AttachmentChunkRow(Base):
    """One chunk of a blob's bytes, numbered from 0; deleted with its blob."""

    __tablename__ = "attachment_blob_chunks"

    blob_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("attachment_blobs.id", ondelete="CASCADE"),
                                         primary_key=True)
    seq: Mapped[int] = mapped_column(sa.Integer(), primary_key=True)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary(), nullable=False)
