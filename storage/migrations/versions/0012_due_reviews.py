"""Background reviews that are due, one per session: recorded before a review runs, so a review cut off
with its replica is run by another.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JsonType = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "due_reviews",
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("session_id", Id, nullable=False),
        sa.Column("session_key", sa.String(512), nullable=False),
        sa.Column("person_id", Id, nullable=True),
        sa.Column("memory", sa.Boolean(), nullable=False),
        sa.Column("skill", sa.Boolean(), nullable=False),
        sa.Column("scope", JsonType, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE",
                                name="fk_due_reviews_session_id_sessions"),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], ondelete="CASCADE",
                                name="fk_due_reviews_person_id_people"),
        sa.PrimaryKeyConstraint("bot", "session_id", name="pk_due_reviews"),
    )
    op.create_index("ix_due_reviews_bot_due_at", "due_reviews", ["bot", "due_at"])


def downgrade() -> None:
    op.drop_index("ix_due_reviews_bot_due_at", table_name="due_reviews")
    op.drop_table("due_reviews")
