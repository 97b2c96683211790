"""What a card's workers spent: tokens in and out and model calls, summed over its attempts.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("tokens_in", "tokens_out", "model_calls")


def upgrade() -> None:
    with op.batch_alter_table("kanban_cards") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("kanban_cards") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
