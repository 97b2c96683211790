"""Scheduled tasks: the answer of a run that was produced but not delivered, and the slot it was produced for,
so a failed delivery is retried alone (under that slot's idempotency key) instead of running the agent again.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

When = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("scheduled_jobs") as batch:
        batch.add_column(sa.Column("undelivered", sa.Text(), nullable=True))
        batch.add_column(sa.Column("undelivered_due", When, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scheduled_jobs") as batch:
        batch.drop_column("undelivered_due")
        batch.drop_column("undelivered")
