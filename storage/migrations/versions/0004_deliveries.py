"""What each outlet has shown per idempotency key, so a restart finishes a reply in place.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("message_ids", Json, nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("bot", "platform", "key", name="pk_deliveries"),
    )
    op.create_index("ix_deliveries_updated_at", "deliveries", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_updated_at", table_name="deliveries")
    op.drop_table("deliveries")
