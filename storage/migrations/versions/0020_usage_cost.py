"""Money spent: each person's cost per bot and day beside their turns and tokens (what a dollar limit is
checked on), and each model's share of it (what `/usage` breaks down). Micro-dollars, as integers.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("usage_days") as batch:
        batch.add_column(sa.Column("cost_micros", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_table(
        "usage_model_days",
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("person_id", Id, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], name="fk_usage_model_days_person_id_people",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("bot", "person_id", "day", "model", name="pk_usage_model_days"),
    )
    op.create_index("ix_usage_model_days_bot_day", "usage_model_days", ["bot", "day"])


def downgrade() -> None:
    op.drop_index("ix_usage_model_days_bot_day", table_name="usage_model_days")
    op.drop_table("usage_model_days")
    with op.batch_alter_table("usage_days") as batch:
        batch.drop_column("cost_micros")
