"""Attachment blobs: the files people send, kept in the database so any replica can read them, by their path
relative to the attachments root; the bytes in numbered chunks of at most 1 MiB (`storage/repos/blobs.py`).

On PostgreSQL the chunks' `bytea` is stored out of line and uncompressed (`STORAGE EXTERNAL`): most
attachments (images, PDFs, voice notes) are compressed already, and compressing them again only costs time.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "attachment_blobs",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("folder", sa.String(255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", When, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_attachment_blobs"),
        sa.UniqueConstraint("path", name="uq_attachment_blobs_path"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_attachment_blobs_folder", "attachment_blobs", ["folder"])
    op.create_index("ix_attachment_blobs_created_at", "attachment_blobs", ["created_at"])
    op.create_table(
        "attachment_blob_chunks",
        sa.Column("blob_id", Id, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["blob_id"], ["attachment_blobs.id"], ondelete="CASCADE",
                                name="fk_attachment_blob_chunks_blob_id_attachment_blobs"),
        sa.PrimaryKeyConstraint("blob_id", "seq", name="pk_attachment_blob_chunks"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE attachment_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("attachment_blob_chunks")
    op.drop_index("ix_attachment_blobs_created_at", table_name="attachment_blobs")
    op.drop_index("ix_attachment_blobs_folder", table_name="attachment_blobs")
    op.drop_table("attachment_blobs")
