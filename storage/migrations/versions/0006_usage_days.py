"""Turns and tokens per bot, person and day: what usage limits count.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "usage_days",
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("person_id", Id, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], name="fk_usage_days_person_id_people",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("bot", "person_id", "day", name="pk_usage_days"),
    )
    op.create_index("ix_usage_days_bot_day", "usage_days", ["bot", "day"])


def downgrade() -> None:
    op.drop_index("ix_usage_days_bot_day", table_name="usage_days")
    op.drop_table("usage_days")
